"""Diagnosis's lexicon gap (transformer/diagnosis/lexicon.py): Dice over training pairs, what a gap
is, that it only ever raises a score, and that weights fitted without it read only their own columns."""
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from transformer.diagnosis.lexicon import LEXICON_FILE, MIN_TOP, STEMS, Lexicon, lexicon_for, read_lexicon, stem
from transformer.diagnosis.scores import OUTPUT_FEATURES, SOURCE_FEATURES, combine, features
from transformer.diagnosis.signals import Item, Signals

REPO = Path(__file__).resolve().parents[1]
# Five copies each: every word reaches MIN_COUNT (5) pairs.
SOURCES = ["a red car", "a red house", "a blue car"] * 5
TARGETS = ["ein rotes auto", "ein rotes haus", "ein blaues auto"] * 5


def test_dice_is_counted_once_per_pair_over_stems():
    lex = Lexicon.from_pairs(SOURCES, TARGETS, "en", "de")
    five = lex.by_source[5]
    # red: 10 pairs, rotes: 10, together 10 -> 2*10/(10+10); car: 10, rotes: 10, together 5 -> 0.5
    assert five["red"]["rotes"] == pytest.approx(1.0)
    assert five["car"]["rotes"] == pytest.approx(0.5)
    assert five["car"]["auto"] == pytest.approx(1.0)
    assert lex.by_target[5]["haus"]["house"] == pytest.approx(1.0)
    assert five["a"]["ein"] == pytest.approx(1.0)                 # every pair
    assert lex.by_source[4]["hous"]["haus"] == pytest.approx(1.0)  # the same at four characters
    assert sorted(lex.by_source) == sorted(STEMS)
    # a stem in fewer than MIN_COUNT (5) pairs is never kept
    rare = Lexicon.from_pairs(SOURCES + ["a green car"] * 4, TARGETS + ["ein grünes auto"] * 4, "en", "de")
    assert "green" not in rare.by_source[5] and "grüne" not in rare.by_target[5]


def test_short_stems_join_inflections_that_long_ones_keep_apart():
    lex = Lexicon.from_pairs(["a red car", "the red car", "a red hat"] * 5,
                             ["ein rotes auto", "das rote auto", "ein roter hut"] * 5, "en", "de")
    assert max(lex.by_source[5]["red"].values()) < 0.9            # rotes / rote / roter apart
    assert lex.by_source[4]["red"]["rote"] == pytest.approx(1.0)  # one word at four characters


def test_stems_join_pieces_lowercase_and_drop_punctuation():
    assert stem("▁Fahrrad") == "fahrr" and stem("▁Fahrrad", 4) == "fahr" and stem("▁rot" + "es") == "rotes"
    assert stem("▁A") == "a" and stem(".") is None and stem("</s>") is None and stem("▁") is None


def test_a_gap_is_the_usual_translation_missing():
    lex = Lexicon.from_pairs(SOURCES, TARGETS, "en", "de")
    present = ["ein", "blaues", "auto"]
    gaps = lex.gaps(["a", "blue", "car", "red", "zebra", "."], present, "source")
    assert gaps[0] == 0 and gaps[1] == 0 and gaps[2] == 0                # their translations are there
    # "rotes" is not; "ein" co-occurs with "red" in all 10 of its pairs (Dice 0.8), but a function word is
    # never a translation (function_stems): only "auto" explains some of it, 2*5/(10+10) = 0.5
    assert lex.by_source[5]["red"]["ein"] == pytest.approx(0.8)
    assert gaps[3] == pytest.approx(1.0 - 0.5)
    assert gaps[4] == 0 and gaps[5] == 0                                 # unknown word, punctuation: no evidence
    assert lex.gaps(["red"], ["blaues", "auto"], "source")[0] == pytest.approx(1.0 - 2 * 5 / 20)   # "auto" only
    back = lex.gaps(["ein", "rotes", "auto"], ["a", "blue", "car"], "target")
    assert back[1] == pytest.approx(1.0 - 0.5) and back[0] == 0 and back[2] == 0   # "car" explains "rotes" best


def test_a_function_word_is_never_a_translation():
    """"am Strand": "am" stands beside "beach" more often than "Strand" does at four characters, so before
    this rule "am" in a translation counted as "beach" translated, and a dropped "Strand" was not missing."""
    lex = Lexicon("en", "de")
    for length in STEMS:
        lex.add(length, "beach"[:length], "am", 0.50)
        lex.add(length, "beach"[:length], "stran"[:length], 0.45)
        lex.add(length, "the", "am", 0.3)
    assert lex.usual("beach", 5) == {"stran"}
    assert lex.gaps(["beach"], ["am", "Meer"], "source") == [pytest.approx(0.45)]
    assert lex.gaps(["beach"], ["am", "Strand"], "source") == [0.0]
    assert lex.gaps(["the"], ["Meer"], "source") == [0.0]              # a function word has no translation
    assert lex.gaps(["am"], ["the", "beach"], "target") == [0.0]
    assert {w for _, w, _ in lex._missing(["A", "beach"], [True, True], ["am", "Meer"])} == {1}   # at each stem length
    assert lex.gaps(["▁red"], ["▁rot" + "es"], "source") == [0.0]        # pieces joined into words


def test_a_gap_is_the_mean_over_stem_lengths():
    lex = Lexicon("en", "de")
    lex.add(4, "wood", "holz", 0.8)
    lex.add(5, "woode", "holzb", 0.3)
    lex.add(5, "woode", "hölze", 0.2)
    # "Holzsteg": "holz" at 4 characters (0.8 explained), "holzs" at 5 (not in the table: 0.3 missing)
    assert lex.gaps(["wooden"], ["Holzsteg"], "source") == [pytest.approx((0.0 + 0.3) / 2)]
    assert lex.gaps(["wooden"], ["Auto"], "source") == [pytest.approx((0.8 + 0.3) / 2)]


def test_saved_lexicon_reads_back_and_is_byte_for_byte_reproducible(tmp_path):
    lex = Lexicon.from_pairs(SOURCES, TARGETS, "en", "de")
    lex.save(tmp_path / "a.tsv.gz")
    lex.save(tmp_path / "b.tsv.gz")
    assert (tmp_path / "a.tsv.gz").read_bytes() == (tmp_path / "b.tsv.gz").read_bytes()
    back = Lexicon.read(tmp_path / "a.tsv.gz")
    assert (back.source_lang, back.target_lang) == ("en", "de")
    assert back.by_source == {n: {s: {t: round(d, 4) for t, d in row.items()} for s, row in table.items()}
                              for n, table in lex.by_source.items()}


def _case(top: float):
    """Source a b c </s>, output x y z </s>; word c's usual translation 'qq' (Dice `top`) is missing."""
    T = 4
    log_p = np.full(T, -0.5)
    deletion = np.tile(log_p, (4, 1))
    deletion[:3] -= 0.5
    sig = Signals(log_p, log_p - 2.0, [[0], [1], [2], [3]], deletion, np.zeros((4, T)), np.array([True, True, True, False]))
    item = Item([5, 6, 7, 3], [1, 8, 9, 10], [8, 9, 10, 3], ["▁a", "▁b", "▁c", "</s>"], ["▁x", "▁y", "▁z", "</s>"])
    lex = Lexicon("en", "de")
    for length in STEMS:
        for s, t in (("a", "x"), ("b", "y")):
            lex.add(length, s, t, 0.9)
        lex.add(length, "c", "qq", top)
    return sig, item, lex


WEIGHTS = {"output": {"mean": [0.0] * 6, "std": [1.0] * 6, "coef": [1.0, 0.5, 0.5, 0.2, 2.0, 3.0], "bias": -3.0,
                      "features": OUTPUT_FEATURES[:6]},
           "source": {"mean": [0.0] * 7, "std": [1.0] * 7, "coef": [0.8, 3.0, 1.0, 0.3, 2.5, 0.4, 0.3], "bias": -2.0,
                      "features": SOURCE_FEATURES},
           "sentence": {"mean": [0.0] * 10, "std": [1.0] * 10, "coef": [0.0] * 10, "bias": 0.0}}


def test_a_larger_lexicon_gap_never_lowers_the_omission_score():
    previous = -1.0
    for top in np.linspace(MIN_TOP, 1.0, 10):
        sig, item, lex = _case(float(top))
        dg = combine(sig, WEIGHTS, item, frozenset({3}), lex)
        assert dg.signals["source_lexicon_gap"][2] == pytest.approx(top, abs=1e-6)
        assert dg.signals["source_lexicon_gap"][:2].tolist() == [0.0, 0.0]
        assert dg.omission[2] >= previous
        previous = float(dg.omission[2])
    sig, item, _ = _case(1.0)
    without = combine(sig, WEIGHTS, item, frozenset({3}))
    assert previous > float(without.omission[2])               # the gap is what raised it


VOCAB = {20: "▁qq", 21: "▁qqz", 22: "qq", 23: "▁q", 24: "▁w", 25: "▁x", 26: "▁y"}


def _expected_case(pull: float, output=("▁x", "▁y", "▁w", "</s>")):
    """_case's lexicon; at the third output word's step the model gives `pull` to "▁qq" (which begins
    'qq', the usual translation of the missing source word c), 0.1 to "▁qqz" (begins it too), 0.1 to
    "qq" (not word-initial) and 0.2 to "▁q" (too short to say); 0.05 to "▁qq" at the first step."""
    sig, item, lex = _case(1.0)
    top_ids = np.array([[20, 25, 24, 26, 21], [26, 25, 24, 20, 21], [20, 21, 22, 23, 24], [3, 20, 21, 22, 23]])
    top_probs = np.array([[0.05, 0.9, 0.01, 0.01, 0.0], [0.9, 0.01, 0.01, 0.0, 0.0], [pull, 0.1, 0.1, 0.2, 0.0],
                          [0.99, 0.0, 0.0, 0.0, 0.0]])
    sig.top_ids, sig.top_probs = top_ids, top_probs
    item.output_pieces = list(output)
    return sig, item, lex


def test_the_expected_translation_is_the_pull_towards_a_missing_words_translation():
    sig, item, lex = _expected_case(0.5)
    piece = {**VOCAB, 3: "</s>"}.get
    mass, why = lex.expected(sig.top_ids, sig.top_probs, piece, ["▁a", "▁b", "▁c", "</s>"],
                             ["▁x", "▁y", "▁w", "</s>"], [0, 1, 2, 3])
    assert mass.tolist() == pytest.approx([0.05, 0.0, 0.6, 0.0])          # "▁qq" + "▁qqz"; not "qq" nor "▁q"
    assert why[2] == ("▁c", "▁qq", pytest.approx(0.6)) and why[1] is None
    # the translation is there after all (its pieces joined): no pull counts
    covered, _ = lex.expected(sig.top_ids, sig.top_probs, piece, ["▁a", "▁b", "▁c", "</s>"],
                              ["▁x", "▁y", "▁q" + "q", "</s>"], [0, 1, 2, 3])
    assert covered.tolist() == [0.0] * 4
    # through features(): the column, the per-piece signal and the flag's evidence
    f = features(sig, item, frozenset({3}), lex, piece)
    assert f["output"][:, OUTPUT_FEATURES.index("expected_translation")].tolist() == pytest.approx([0.05, 0.0, 0.6, 0.0])
    dg = combine(sig, WEIGHTS, item, frozenset({3}), lex, piece)
    assert dg.signals["expected_translation"].tolist() == pytest.approx([0.05, 0.0, 0.6, 0.0])
    # without the vocabulary's pieces: no evidence of this kind, and the column is 0
    assert features(sig, item, frozenset({3}), lex)["output"][:, -1].tolist() == [0.0] * 4


def test_a_stronger_pull_never_lowers_the_unsupported_score():
    piece, previous = {**VOCAB, 3: "</s>"}.get, -1.0
    for pull in np.linspace(0.0, 0.6, 7):
        sig, item, lex = _expected_case(float(pull))
        dg = combine(sig, WEIGHTS, item, frozenset({3}), lex, piece)
        assert dg.hallucination[2] >= previous
        previous = float(dg.hallucination[2])
    sig, item, lex = _expected_case(0.0)
    assert previous > float(combine(sig, WEIGHTS, item, frozenset({3}), lex, piece).hallucination[2])


def test_insertions_put_back_the_likeliest_whole_piece_of_a_missing_words_translation():
    sig, item, lex = _expected_case(0.5)
    piece = {**VOCAB, 3: "</s>"}.get
    source, content = ["▁a", "▁b", "▁c", "</s>"], [True, True, True, False]
    found = lex.insertions(sig.top_ids, sig.top_probs, piece, source, content, ["▁x", "▁y", "▁w", "</s>"])
    # only c lacks its translation; its likeliest piece beginning 'qq' is "▁qq" at step 2 ("▁q" is too
    # short to be the word, "qq" is not word-initial); a and b are covered
    # ... and, as a second candidate, "▁qq" at the first step (p 0.05)
    assert found == {2: [(pytest.approx(0.5), 2, 20), (pytest.approx(0.05), 0, 20)]}
    assert lex.insertions(sig.top_ids, sig.top_probs, piece, source, content, ["▁x", "▁y", "▁w", "</s>"],
                          steps=1) == {2: [(pytest.approx(0.5), 2, 20)]}
    # only where a word may begin: not before the third piece
    assert lex.insertions(sig.top_ids, sig.top_probs, piece, source, content, ["▁x", "▁y", "▁w", "</s>"],
                          boundary=np.array([True, True, False, True])) == {2: [(pytest.approx(0.05), 0, 20)]}
    assert lex.insertions(sig.top_ids, sig.top_probs, piece, source, content, ["▁x", "▁y", "▁qq", "</s>"]) == {}
    assert lex.insertions(sig.top_ids, sig.top_probs, piece, source, [True, True, False, False],
                          ["▁x", "▁y", "▁w", "</s>"]) == {}                    # not a content word: never
    weak, _, _ = _expected_case(0.01)
    weak.top_probs[0, 0] = weak.top_probs[2, 1] = 0.0                          # every pull under INSERT_PULL
    assert lex.insertions(weak.top_ids, weak.top_probs, piece, source, content, ["▁x", "▁y", "▁w", "</s>"]) == {}


def test_a_larger_insertion_gain_never_lowers_the_omission_score():
    piece, previous = {**VOCAB, 3: "</s>"}.get, -1.0
    for gain in np.linspace(-8.0, 12.0, 11):
        sig, item, lex = _expected_case(0.5)
        sig.insertion = {2: (float(gain), 0.5, 2, (20,))}
        dg = combine(sig, WEIGHTS, item, frozenset({3}), lex, piece)
        assert dg.signals["insertion_gain"][2] == pytest.approx(gain) and dg.signals["insertion_gain"][:2].tolist() == [0, 0]
        assert dg.omission[2] >= previous
        previous = float(dg.omission[2])
    flag = next(f for f in dg.flags if f.kind == "omission" and f.start == 2)
    assert flag.evidence["inserted_piece"] == "▁qq" and flag.evidence["insertion_gain"] == pytest.approx(12.0)
    assert "with “qq” put back, the translation is 12.0 nats more likely" in flag.evidence["explains"]
    sig, item, lex = _expected_case(0.5)
    assert previous > float(combine(sig, WEIGHTS, item, frozenset({3}), lex, piece).omission[2])


def test_the_positive_part_of_the_insertion_gain_is_a_column_of_its_own():
    """A put-back that makes the translation likelier is stronger evidence than the linear column says
    (docs/diagnosis.md): its own column is clip(gain, 0, 10), 0 for costs and for words never put back."""
    piece = {**VOCAB, 3: "</s>"}.get
    gain_col, positive_col = SOURCE_FEATURES.index("insertion_gain"), SOURCE_FEATURES.index("insertion_gain_positive")
    for gain, linear, positive in ((-8.0, 0.0, 0.0), (-2.0, 3.0, 0.0), (0.0, 5.0, 0.0), (3.5, 8.5, 3.5), (14.0, 15.0, 10.0)):
        sig, item, lex = _expected_case(0.5)
        sig.insertion = {2: (gain, 0.5, 2, (20,))}
        row = features(sig, item, frozenset({3}), lex, piece)["source"][2]
        assert (row[gain_col], row[positive_col]) == pytest.approx((linear, positive))
    sig, item, lex = _expected_case(0.5)
    assert features(sig, item, frozenset({3}), lex, piece)["source"][:, positive_col].tolist() == [0, 0, 0, 0]
    only_positive = {**WEIGHTS, "source": {**WEIGHTS["source"], "coef": [0.0] * 6 + [1.0]}}
    scores = []
    for gain in (-4.0, -1.0, 0.0, 1.0, 5.0, 9.0):
        sig, item, lex = _expected_case(0.5)
        sig.insertion = {2: (gain, 0.5, 2, (20,))}
        scores.append(float(combine(sig, only_positive, item, frozenset({3}), lex, piece).omission[2]))
    assert scores[0] == scores[1] == scores[2] < scores[3] < scores[4] < scores[5]


def test_weights_fitted_without_the_lexicon_read_only_their_own_columns():
    sig, item, lex = _case(1.0)
    four = {part: ({k: (v[:4] if isinstance(v, list) else v) for k, v in WEIGHTS[part].items()}
                   | {"features": names[:4]}) for part, names in (("output", OUTPUT_FEATURES), ("source", SOURCE_FEATURES))}
    four["sentence"] = WEIGHTS["sentence"]
    with_lex, without = combine(sig, four, item, frozenset({3}), lex), combine(sig, four, item, frozenset({3}))
    assert np.array_equal(with_lex.omission, without.omission)
    assert np.array_equal(with_lex.hallucination, without.hallucination)
    assert features(sig, item, frozenset({3}), lex)["source"].shape == (4, len(SOURCE_FEATURES))


def test_the_shipped_models_carry_their_own_lexicon_in_their_direction(tmp_path):
    for name, src, tgt, word, translation in (("en-de", "en", "de", "bike", "fahrr"), ("de-en", "de", "en", "fahrr", "bicyc")):
        model = SimpleNamespace(path=REPO / "pretrained" / name, source_lang=src, target_lang=tgt)
        lex = lexicon_for(model)
        assert (lex.source_lang, lex.target_lang) == (src, tgt)
        row = lex.by_source[5][word]
        assert max(row, key=row.get) == translation
    # a folder without the file, or a lexicon of the other direction: no lexicon
    assert lexicon_for(SimpleNamespace(path=tmp_path, source_lang="en", target_lang="de")) is None
    (tmp_path / LEXICON_FILE).write_bytes((REPO / "pretrained" / "de-en" / LEXICON_FILE).read_bytes())
    read_lexicon.cache_clear()
    assert lexicon_for(SimpleNamespace(path=tmp_path, source_lang="en", target_lang="de")) is None
    assert lexicon_for(SimpleNamespace(path=None, source_lang="en", target_lang="de")) is None
    config = json.loads((REPO / "pretrained" / "en-de" / "config.json").read_text())
    assert (config["source_lang"], config["target_lang"]) == ("en", "de")


def test_the_command_writes_the_lexicon_beside_the_model(tmp_path):
    from transformer.diagnosis.lexicon import write_lexicon
    data = tmp_path / "data"
    data.mkdir()
    import gzip
    for lang, lines in (("en", SOURCES), ("de", TARGETS)):
        with gzip.open(data / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    report = write_lexicon(model, data)
    assert str(model / LEXICON_FILE) in report
    assert Lexicon.read(model / LEXICON_FILE).by_source[5]["red"]["rotes"] == pytest.approx(1.0)
