"""The unmet demand here (transformer/diagnosis/scores.py: unmet_here): per output word, how much one source
word wanted, at that word's first step, pieces the rest of the translation never writes. What it is,
that more of it never lowers a word's "unsupported" score, and that weights without it read as before."""
import json
from pathlib import Path

import numpy as np
import pytest

from transformer.diagnosis.scores import OUTPUT_FEATURES, diagnosis_weights, features, scored, unmet_here, word_scores
from transformer.diagnosis.signals import Item, Signals

REPO = Path(__file__).resolve().parents[1]
SPECIAL = frozenset({3})


def _case(unmet_at_word_1: float = 0.0):
    """Source a b c </s> -> output x yy z </s>: output word 1 is two pieces (steps 1-2)."""
    T = 5
    log_p = np.array([-0.2, -4.0, -0.5, -0.3, -0.1])
    deletion = np.tile(log_p, (4, 1)) - 0.3
    unmet = np.zeros((4, T))
    unmet[0, 1] = unmet_at_word_1          # word "a" wanted something else where "yy" begins
    unmet[1, 2] = 0.9                      # at the word's second piece: not its first step, not counted
    unmet[2, 0] = 0.4                      # at another word's step
    unmet[3, 1] = 0.8                      # </s> is never deleted: its row never counts
    sig = Signals(log_p, log_p - 1.0, [[0], [1], [2], [3]], deletion, unmet, np.array([True, True, True, False]))
    item = Item([5, 6, 7, 3], [1, 8, 9, 10, 11], [8, 9, 10, 11, 3], ["▁a", "▁b", "▁c", "</s>"],
                ["▁x", "▁y", "y", "▁z", "</s>"])
    return sig, item


def test_it_is_the_largest_unmet_demand_of_a_deleted_source_word_at_the_words_first_step():
    sig, item = _case(0.35)
    f = features(sig, item, SPECIAL)
    assert [list(g) for g in f["output_groups"]] == [[0], [1, 2], [3], [4]]
    column = f["output"][:, OUTPUT_FEATURES.index("unmet_here")]
    assert column.tolist() == pytest.approx([0.4, 0.35, 0.0, 0.0])
    assert unmet_here(sig, np.array([True, True, True, False]), f["output_groups"]).tolist() == pytest.approx(column.tolist())
    assert f["raw"]["unmet_here"].tolist() == pytest.approx([0.4, 0.35, 0.35, 0.0, 0.0])   # per piece
    # a translation no source word was deleted for has none
    sig.deleted = np.zeros(4, dtype=bool)
    assert features(sig, item, SPECIAL)["output"][:, OUTPUT_FEATURES.index("unmet_here")].tolist() == [0.0] * 4


def test_more_unmet_demand_here_never_lowers_the_unsupported_score(de_en):
    weights = diagnosis_weights(de_en)
    names = weights["output"]["features"]
    assert "unmet_here" in names and weights["output"]["coef"][names.index("unmet_here")] > 0
    previous = -1.0
    for u in np.linspace(0.0, 1.0, 21):
        sig, item = _case(float(u))
        score = float(word_scores(weights, features(sig, item, SPECIAL), "output")[1])
        assert score >= previous - 1e-12
        previous = score
    assert previous > float(word_scores(weights, features(*_case(0.0), SPECIAL), "output")[1])


def _without_column(weights: dict) -> dict:
    """The same output model without the unmet_here column."""
    model = weights["output"]
    keep = [i for i, n in enumerate(model["features"]) if n != "unmet_here"]
    return dict(weights, output=dict(model, **{k: [model[k][i] for i in keep] for k in ("features", "mean", "std", "coef")}))


def test_a_flag_shows_it_only_where_the_weights_read_it(de_en):
    sig, item = _case(1.0)
    f = features(sig, item, SPECIAL)
    weights = diagnosis_weights(de_en)
    everything = dict(weights, output=dict(weights["output"], bias=weights["output"]["bias"] + 40.0))  # every word flagged
    flags = [fl for fl in scored(f, everything, item).flags if fl.kind == "hallucination"]
    assert flags and all(fl.evidence["unmet_here"] == pytest.approx(max(f["raw"]["unmet_here"][fl.start:fl.end]))
                         for fl in flags)
    assert "wanted another word here" in flags[0].evidence["explains"]
    flags = [fl for fl in scored(f, _without_column(everything), item).flags if fl.kind == "hallucination"]
    assert flags and all("unmet_here" not in fl.evidence and "wanted another word" not in fl.evidence["explains"]
                         for fl in flags)


def test_weights_without_the_column_score_as_before():
    """en-de's weights were fitted before the column (or without it): they read only their own columns, so
    a translation's scores do not depend on it."""
    for name in ("en-de", "de-en"):
        weights = json.loads((REPO / "pretrained" / name / "diagnosis.json").read_text())
        assert set(weights["output"]["features"]) <= set(OUTPUT_FEATURES)
    sig, item = _case(0.0)
    f = features(sig, item, SPECIAL)
    weights = {"output": {"mean": [0.0] * 6, "std": [1.0] * 6, "coef": [1.0, 0.5, 0.5, 0.2, 2.0, 3.0], "bias": -3.0,
                          "features": OUTPUT_FEATURES[:6]}}
    before = word_scores(weights, f, "output")
    f["output"][:, OUTPUT_FEATURES.index("unmet_here")] = 0.9
    assert word_scores(weights, f, "output").tolist() == before.tolist()
