"""transformer.analysis.neighbours: nearest source pieces by embedding cosine, for ours and every Hugging
Face family (tests/hf_tiny.py), checked against a brute-force ranking; and swap_word."""
from __future__ import annotations

import numpy as np
import pytest

from viz.words import word_spans
from transformer.analysis.neighbours import nearest_pieces, source_embedding_matrix, source_ids, swap_word

FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]


def brute_force(matrix, query_ids, excluded, k):
    """Every allowed id scored one by one with plain Python cosine, best first, ties by id."""
    query = np.mean([matrix[i].astype(np.float64) for i in query_ids], axis=0)
    scored = []
    for i, row in enumerate(matrix.astype(np.float64)):
        if i in excluded or i in query_ids:
            continue
        cosine = float(row @ query / max(np.linalg.norm(row) * np.linalg.norm(query), 1e-12))
        scored.append((-cosine, i))
    return [(i, -score) for score, i in sorted(scored)[:k]]


def special_ids(translator) -> set:
    hf = getattr(translator.engine.tokenizer, "hf", None)
    if hf is None:
        return {0, 1, 2, 3}
    return set(hf.all_special_ids) | set(getattr(hf, "lang_code_to_id", {}).values())


def vocabulary_size(translator, matrix) -> int:
    source = getattr(translator.engine.tokenizer, "_source", None)
    return min(matrix.shape[0], max(source) + 1 if source else len(translator.engine.tokenizer))


@pytest.fixture(scope="module")
def hf_models(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


def check_exact(translator, text: str, k: int = 6) -> None:
    out = translator.translate(text, capture=False)
    ids = source_ids(translator, out.source_tokens)
    matrix = source_embedding_matrix(translator)
    matrix = matrix[:vocabulary_size(translator, matrix)]
    specials = special_ids(translator)
    word = [i for i in ids if i not in specials][:2]             # one piece, then a two-piece "word"
    for query in ([word[0]], word):
        found = nearest_pieces(translator, query, k)
        expected = brute_force(matrix, query, specials, k)
        assert len(found) == k
        assert [n.id for n in found] == [i for i, _ in expected]
        np.testing.assert_allclose([n.similarity for n in found], [s for _, s in expected], atol=1e-5)
        assert not {n.id for n in found} & (specials | set(query))
        assert [n.similarity for n in found] == sorted((n.similarity for n in found), reverse=True)


def test_exact_against_brute_force_ours(tiny):
    check_exact(tiny, "a b c d")


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_against_brute_force_hf(hf_models, family):
    check_exact(hf_models[family], "A man is riding a bike.")


def test_special_pieces_never_come_back(tiny):
    found = nearest_pieces(tiny, [4], len(tiny.engine.tokenizer))             # every candidate
    pieces = {n.piece for n in found}
    assert not pieces & {"<pad>", "<unk>", "<s>", "</s>"}
    assert 4 not in {n.id for n in found}
    assert len(found) == len(tiny.engine.tokenizer) - 5                        # 4 specials and the piece itself


def test_language_codes_are_not_neighbours(hf_models):
    for family in ("m2m100", "nllb", "mbart50"):
        tr = hf_models[family]
        found = nearest_pieces(tr, [source_ids(tr, tr.translate("A man.", capture=False).source_tokens)[1]], 10_000)
        codes = set(tr.engine.tokenizer.hf.all_special_ids)
        assert codes and not codes & {n.id for n in found}, family


def test_k_bounds(tiny):
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="k must be"):
            nearest_pieces(tiny, [4], bad)
    with pytest.raises(ValueError, match="no piece"):
        nearest_pieces(tiny, [], 3)
    with pytest.raises(ValueError, match="outside"):
        nearest_pieces(tiny, [len(tiny.engine.tokenizer)], 3)
    assert len(nearest_pieces(tiny, 4, 1)) == 1
    assert len(nearest_pieces(tiny, 4, 10 ** 6)) == len(tiny.engine.tokenizer) - 5   # no more than there are


def test_word_start_keeps_whole_words(tiny):
    found = nearest_pieces(tiny, [4], 10 ** 6, word_start=True)
    assert found and all(n.piece.startswith("\u2581") for n in found)
    every = {n.id for n in nearest_pieces(tiny, [4], 10 ** 6)}
    assert {n.id for n in found} < every


def test_swap_word_makes_the_edited_sentence(tiny, hf_models):
    out = tiny.translate("a b c", capture=False)
    assert out.source_tokens[-1] == "</s>"
    spans = {"".join(out.source_tokens[s:e]).lstrip("\u2581"): (s, e) for s, e in word_spans(out.source_tokens)}
    assert swap_word(tiny, out.source_tokens, *spans["b"], "\u2581d") == "a d c"    # the word's pieces, all
    with pytest.raises(ValueError, match="no pieces"):
        swap_word(tiny, out.source_tokens, 3, 9, "\u2581d")
    tr = hf_models["marian"]
    out = tr.translate("A man is riding a bike.", capture=False)
    start = out.source_tokens.index("\u2581man")
    assert swap_word(tr, out.source_tokens, start, start + 1, "\u2581dog") == "A dog is riding a bike."


def test_special_ids_of_a_sentence_agree_with_the_whole_vocabulary_scan(tiny, hf_models):
    """swap_word asks only about a sentence's ids (no scan of the vocabulary on every swap); the
    answer must be the vocabulary scan's, for ours and every family, specials and plain ids alike."""
    for tr in [tiny, *(hf_models[family] for family in FAMILIES)]:
        size = vocabulary_size(tr, source_embedding_matrix(tr))
        _, special = tr.engine.source_vocabulary(size)
        ids = sorted(special)[:20] + list(range(size))[:60] + [size - 1]
        assert tr.engine.source_special(ids) == {i for i in ids if i in special}, type(tr.engine.tokenizer).__name__
        assert tr.engine.source_special(ids) & special and set(ids) - special
