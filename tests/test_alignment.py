"""Word alignment helpers (transformer/analysis/alignment.py): Pharaoh files, AER, pieces -> words,
links from scores."""
from __future__ import annotations

import numpy as np
import pytest

from transformer.analysis.alignment import (AERCounts, Gold, aer, links_from_scores, parse_pharaoh, piece_links,
                                            piece_words, read_pharaoh, text_words, to_words)


def test_pharaoh_sure_and_possible_links(tmp_path):
    gold = parse_pharaoh("0-0 1p2 3-1")
    assert gold.sure == {(0, 0), (3, 1)}
    assert gold.possible == {(0, 0), (1, 2), (3, 1)}              # sure links are possible too
    assert parse_pharaoh("   ") == Gold(set(), set())
    file = tmp_path / "gold.align"
    file.write_text("0-0 1-1\n\n2p0 0-2\n", encoding="utf-8")
    read = read_pharaoh(file)
    assert [g.sure for g in read] == [{(0, 0), (1, 1)}, set(), {(0, 2)}]
    assert read[2].possible == {(2, 0), (0, 2)}
    for bad in ("0-", "a-1", "0-1-2", "1x2", "3"):
        with pytest.raises(ValueError):
            parse_pharaoh(bad)
    file.write_text("0-0\n1:1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=":2:"):
        read_pharaoh(file)


def test_aer_against_a_hand_computed_example():
    # S = {0-0, 1-1}, P = S + {1p2, 2p2}; A = {0-0, 1-2, 2-1}
    # |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 1-2), |A| = 3, |S| = 2: AER = 1 - 3/5 = 0.4
    gold = parse_pharaoh("0-0 1-1 1p2 2p2")
    predicted = {(0, 0), (1, 2), (2, 1)}
    assert aer([predicted], [gold]) == pytest.approx(0.4)
    # a second pair, perfect on S (|A∩S| = |A∩P| = |A| = |S| = 2): corpus sums, (3 + 4) / (5 + 4)
    second = parse_pharaoh("0-1 1-0")
    assert aer([predicted, {(0, 1), (1, 0)}], [gold, second]) == pytest.approx(1 - 7 / 9)
    assert aer([gold.sure], [gold]) == 0.0                       # exactly the sure links
    assert aer([gold.possible], [gold]) == pytest.approx(1 - (2 + 4) / (4 + 2))   # possible ones cost nothing
    assert aer([set()], [gold]) == 1.0
    counts = AERCounts().add(predicted, gold)
    assert (counts.a_and_s, counts.a_and_p, counts.a, counts.s) == (1, 2, 3, 2)
    with pytest.raises(ValueError):
        aer([predicted], [gold, second])


def test_pieces_map_to_words_and_specials_drop_out():
    pieces = ["▁A", "▁man", "▁in", "▁a", "▁T", "-", "shirt", ",", "▁rid", "ing", ".", "</s>"]
    tokens = text_words("A man in a T-shirt, riding.")
    assert tokens == ["A", "man", "in", "a", "T", "-", "shirt", ",", "riding", "."]
    owners, n = piece_words(pieces, tokens, specials={"</s>"})
    assert n == 10
    assert owners == [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, None]
    # whitespace tokens (a Pharaoh file's words): "T-shirt," is one word
    owners, n = piece_words(pieces, "A man in a T-shirt, riding.".split(), specials={"</s>"})
    assert (owners, n) == ([0, 1, 2, 3, 4, 4, 4, 4, 5, 5, 5, None], 6)
    # pieces that do not spell the words: each piece is a word of its own
    owners, n = piece_words(["▁x", "▁y", "</s>"], ["a", "b"], specials={"</s>"})
    assert (owners, n) == ([0, 1, None], 2)


def test_word_scores_are_the_mean_over_pieces():
    scores = np.array([[0.1, 0.3, 0.6],           # output piece 0 (word 0) over source pieces
                       [0.5, 0.1, 0.4],           # output piece 1 (word 0)
                       [0.0, 0.9, 0.1]], dtype=np.float32)   # output piece 2 (special: dropped)
    words = to_words(scores, [0, 0, None], 1, [0, 1, 1], 2)
    np.testing.assert_allclose(words, [[(0.1 + 0.5) / 2, (0.3 + 0.6 + 0.1 + 0.4) / 4]], rtol=1e-6)


def test_links_row_and_mutual_and_their_pieces():
    # rows: target words; columns: source words
    scores = np.array([[0.9, 0.1, 0.0],
                       [0.6, 0.3, 0.1],           # target 1's best is source 0, but source 0's best is target 0
                       [0.0, 0.2, 0.8]])
    assert links_from_scores(scores, "row") == {(0, 0), (0, 1), (2, 2)}
    assert links_from_scores(scores, "mutual") == {(0, 0), (2, 2)}
    assert links_from_scores(np.zeros((0, 3)), "row") == set()
    with pytest.raises(ValueError):
        links_from_scores(scores, "grow-diag")
    # source word 0 = pieces 0, 1; output word 2 = piece 3
    assert piece_links({(0, 2)}, [0, 0, 1, None], [0, 1, None, 2]) == [(0, 3), (1, 3)]
