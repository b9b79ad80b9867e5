"""Issue 30's pieces that need no model: the realistic-error builder, piece labels, the evaluation
table, the sign-constrained fit, and the monotone word scores of transformer/diagnosis/scores.py."""
import numpy as np
import pytest

from transformer.diagnosis.scores import SOURCE_FEATURES, Diagnosis, Flag, combine, features
from transformer.diagnosis.fit import fit_logistic, fit_monotone
from transformer.diagnosis.thresholds import shift_to_half
from transformer.diagnosis.protocol import build, evaluate, piece_words, roc_auc
from transformer.diagnosis.signals import Item, Signals, word_groups
from transformer.diagnosis.word_align import words

SRC = "A man is riding a red bike."
REF = "Ein Mann fährt ein rotes Fahrrad."
#      0 A 1 man 2 is 3 riding 4 a 5 red 6 bike 7 .   /  0 Ein 1 Mann 2 fährt 3 ein 4 rotes 5 Fahrrad 6 .
LINKS = {(0, 0), (1, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6)}


def test_words_keep_character_spans():
    found = words("Ein Mann, der rennt.")
    assert [w.text for w in found] == ["Ein", "Mann", ",", "der", "rennt", "."]
    assert all("Ein Mann, der rennt."[w.start:w.end] == w.text for w in found)


def test_each_realistic_kind_edits_the_aligned_word():
    other_src, other_ref = "Two dogs play.", "Zwei Hunde spielen."
    cases = build([SRC, other_src], [REF, other_ref], [LINKS, {(0, 0), (1, 1), (2, 2)}], "en", "de", seed=3)
    by = {c.kind: c for c in cases if c.pair == 0}
    assert set(by) == {"correct", "omission", "phrase", "substitution", "insertion"}
    assert by["correct"].target == REF and by["correct"].source == SRC
    (i,) = by["omission"].source_words
    removed = {w.text for w in words(REF)} - {w.text for w in words(by["omission"].target)}
    translation = {1: "Mann", 3: "fährt", 5: "rotes", 6: "Fahrrad"}[i]        # content words only
    assert removed == {translation} and "  " not in by["omission"].target
    sub = by["substitution"]
    a, b = sub.target_span
    assert sub.source_words == (i,) and translation not in sub.target
    assert sub.target[a:b] not in REF and sub.target[:a] + translation + sub.target[b:] == REF
    phrase = by["phrase"]
    assert len(phrase.source_words) == 2 and phrase.source_words[1] == phrase.source_words[0] + 1
    assert len(words(phrase.target)) < len(words(REF))
    ins = by["insertion"]
    (k,) = ins.source_words
    assert ins.target == REF and len(words(ins.source)) == len(words(SRC)) + 1
    assert words(ins.source)[k - 1].text.lower() in ("a", "an", "the")


def test_a_word_linked_twice_is_never_edited_alone():
    links = {(0, 0), (1, 1), (1, 2), (3, 2)}        # "man" -> "Mann", "fährt"; "riding" -> "fährt"
    cases = build([SRC], [REF], [links], "en", "de", seed=0, kinds=("omission",))
    assert all(c.source_words != (1,) and c.source_words != (3,) for c in cases)


def test_piece_labels_follow_the_words_characters():
    pieces = ["▁Ein", "▁Mann", "▁f", "ährt", "▁ein", "▁rot", "es", "▁Fahr", "rad", ".", "</s>"]
    index = piece_words(pieces, REF, {"</s>"})
    assert index.tolist() == [0, 1, 2, 2, 3, 4, 4, 5, 5, 6, -1]


def test_punctuation_is_a_word_of_its_own():
    pieces = ["▁A", "▁bike", ".", "</s>"]
    assert word_groups(pieces, [5, 6, 7, 3], {3}) == [[0], [1], [2], [3]]
    assert word_groups(["▁Fahr", "rad", ",", "▁und"], [1, 2, 3, 4], set()) == [[0, 1], [2], [3]]


def test_fit_monotone_keeps_every_coefficient_non_negative_where_a_free_fit_does_not():
    rng = np.random.default_rng(0)
    evidence = rng.normal(size=4000)
    y = (evidence + rng.normal(0, 0.7, 4000) > 1).astype(float)
    near_copy = evidence + rng.normal(0, 0.05, 4000)                   # collinear: a free fit splits signs
    x = np.stack([evidence, near_copy, rng.normal(size=4000) * 0.1 + 0.9 * evidence], 1)
    free = fit_logistic(x, y, ridge=0.0)
    assert min(free["coef"]) < 0
    constrained = fit_monotone(x, y)
    assert min(constrained["coef"]) >= 0 and max(constrained["coef"]) > 0
    from transformer.diagnosis.scores import _predict
    assert roc_auc(_predict(constrained, x), y) > 0.85


def test_shift_to_half_puts_the_threshold_at_one_half():
    from transformer.diagnosis.scores import _predict
    model = {"mean": [0.0], "std": [1.0], "coef": [2.0], "bias": -1.0}
    x = np.array([[0.3]])
    threshold = float(_predict(model, x)[0])
    assert _predict(shift_to_half(model, threshold), x)[0] == pytest.approx(0.5)


def _signals(drop_of_word_2: float, unmet_of_word_2: float) -> tuple[Signals, Item]:
    """Three content words and </s>; word 2's deletion changes log p(translation) by -drop."""
    T = 4
    log_p = np.full(T, -0.5)
    deletion = np.tile(log_p, (4, 1))
    deletion[0] -= 1.0                                  # word 0 is clearly translated
    deletion[2] -= drop_of_word_2 / T                   # sum_t log p - log p without it = the drop
    unmet = np.zeros((4, T))
    unmet[2, 1] = unmet_of_word_2
    sig = Signals(log_p, log_p - 2.0, [[0], [1], [2], [3]], deletion, unmet, np.array([True, True, True, False]))
    item = Item([5, 6, 7, 3], [1, 8, 9, 10], [8, 9, 10, 3], ["▁a", "▁b", "▁c", "</s>"], ["▁x", "▁y", "▁z", "</s>"])
    return sig, item


WEIGHTS = {"output": {"mean": [0.0] * 4, "std": [1.0] * 4, "coef": [1.0, 0.5, 0.5, 0.2], "bias": -3.0},
           "source": {"mean": [0.0] * 4, "std": [1.0] * 4, "coef": [0.8, 3.0, 1.0, 0.3], "bias": -2.0},
           "sentence": {"mean": [0.0] * 10, "std": [1.0] * 10, "coef": [0.0] * 10, "bias": 0.0}}


def test_more_deletion_evidence_never_lowers_the_omission_score():
    assert SOURCE_FEATURES == ["neg_drop", "unmet_max", "unmet_sum", "neg_drop_max", "lexicon_gap", "insertion_gain",
                               "insertion_gain_positive"]
    previous = -1.0
    for drop in np.linspace(3.0, -4.0, 15):              # deletion makes the translation ever MORE likely
        for unmet in (0.0, 0.3, 0.9):
            sig, item = _signals(drop, unmet)
            score = float(combine(sig, WEIGHTS, item, frozenset({3})).omission[2])
            if unmet == 0.0:
                assert score >= previous - 1e-12
                previous = score
    low, high = (float(combine(_signals(0.0, u)[0], WEIGHTS, _signals(0.0, u)[1], frozenset({3})).omission[2])
                 for u in (0.1, 0.8))
    assert high > low


def test_shipped_weights_are_monotone():
    import json
    from pathlib import Path
    for name in ("en-de", "de-en"):
        weights = json.loads((Path(__file__).resolve().parents[1] / "pretrained" / name / "diagnosis.json").read_text())
        for part in ("output", "source"):
            assert min(weights[part]["coef"]) >= 0, (name, part)


def test_end_of_sentence_and_punctuation_are_never_left_out():
    sig, item = _signals(-5.0, 0.9)
    sig.deleted[:] = True                                # even when a pass deleted them
    item.source_pieces[1] = "."
    dg = combine(sig, WEIGHTS, item, frozenset({3}))
    f = features(sig, item, frozenset({3}))
    assert dg.omission[3] == 0.0 and dg.omission[1] == 0.0          # </s> and "."
    assert f["source_flaggable"].tolist() == [True, False, True, False]
    assert all(not (f.kind == "omission" and f.start <= 3 < f.end) for f in dg.flags)


def test_evaluate_counts_hits_false_alarms_and_precision():
    from types import SimpleNamespace as NS

    def case(kind, src_labels, out_labels):
        n, t = len(src_labels), len(out_labels)
        item = Item(list(range(5, 5 + n - 1)) + [3], [1] * t, list(range(20, 20 + t - 1)) + [3],
                    ["▁w"] * (n - 1) + ["</s>"], ["▁v"] * (t - 1) + ["</s>"])
        return NS(kind=kind, item=item, source_labels=np.array(src_labels, float), piece_labels=np.array(out_labels, float))

    def dg(h, o, flags):
        signals = {"log_p": -np.array(h), "pmi": -np.array(h), "deletion_drop": -np.array(o), "unmet_demand": np.array(o)}
        return Diagnosis(0.0, np.array(h, np.float32), np.array(o, np.float32),
                         [Flag(k, a, b, 0.9, {"pieces": ["▁w"]}) for k, a, b in flags], signals)

    cases = [case("correct", [0, 0, 0], [0, 0, 0]), case("correct", [0, 0, 0], [0, 0, 0]),
             case("omission", [0, 1, 0], [0, 0, 0]), case("substitution", [1, 0, 0], [0, 1, 0])]
    diagnoses = [dg([0.1, 0.1, 0], [0.1, 0.1, 0], []), dg([0.1, 0.7, 0], [0.1, 0.1, 0], [("hallucination", 1, 2)]),
                 dg([0.1, 0.1, 0], [0.6, 0.9, 0], [("omission", 0, 2)]),
                 dg([0.2, 0.8, 0], [0.1, 0.1, 0], [("hallucination", 0, 1), ("hallucination", 1, 2)])]
    table = evaluate(cases, diagnoses, {3})
    assert table[("rate", "correct references with any flag")] == 0.5
    assert table[("rate", "omitted word flagged")] == 1.0
    assert table[("rate", "substituted word flagged")] == 1.0
    assert table[("rate", "flag spans that touch the real error")] == pytest.approx(2 / 3)
    assert table[("auc", "omission", "combination")] == 1.0
    assert table[("auc", "substitution", "combination")] == 1.0
