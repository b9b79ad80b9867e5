"""transformer/diagnosis/crossval.py: each part of val is judged by weights fitted on the other parts
only, with the shipped scoring (scores.scored), and its rates are protocol.evaluate's."""
import numpy as np
import pytest

from transformer.diagnosis.crossval import PARTS, cross_validate, rates
from transformer.diagnosis.fit import Case, Fitted
from transformer.diagnosis.scores import OUTPUT_FEATURES, SENTENCE_FEATURES, SOURCE_FEATURES
from transformer.diagnosis.signals import Item


def _case(pair: int, value: float, kind: str = "correct") -> tuple[Case, dict]:
    """One output word (then </s>) whose first feature is `value`; one source word (then </s>)."""
    item = Item([5, 3], [1, 20], [20, 3], ["▁w", "</s>"], ["▁v", "</s>"])
    f = {"output": np.array([[value] + [0.0] * (len(OUTPUT_FEATURES) - 1)]), "output_groups": [[0]],
         "output_flaggable": np.array([True]),
         "source": np.zeros((1, len(SOURCE_FEATURES))), "source_groups": [[0]], "source_flaggable": np.array([True]),
         "sentence": np.zeros(len(SENTENCE_FEATURES) - 3), "missing": [],
         "raw": {"log_p": np.array([-value, 0.0]), "pmi": np.zeros(2), "deletion_drop": np.zeros(2),
                 "unmet_demand": np.zeros(2)}}
    labels = np.array([float(kind == "substitution"), 0.0])
    return Case(kind, pair, item, labels, np.zeros(2)), f


def _model(width: int, coef0: float, bias: float) -> dict:
    return {"mean": [0.0] * width, "std": [1.0] * width, "coef": [coef0] + [0.0] * (width - 1), "bias": bias}


def test_each_part_is_judged_by_weights_fitted_without_it():
    values = {0: [1.0, 2.0], 1: [5.0, 6.0], 2: [9.0, 10.0]}            # part -> its words' feature values
    parts = []
    for k, vals in values.items():
        built = [_case(100 * k + i, v, "substitution" if i else "correct") for i, v in enumerate(vals)]
        parts.append(Fitted([c for c, _ in built], [f for _, f in built]))
    seen = []

    def fit(fitted, seed, false_alarms):
        """Flag an output word above the mean value of the words fitted on."""
        seen.append(sorted({c.pair // 100 for c in fitted.cases}))
        line = float(np.mean([f["output"][0, 0] for f in fitted.feats]))
        return {"output": _model(len(OUTPUT_FEATURES), 1.0, -line), "source": _model(len(SOURCE_FEATURES), 0.0, -9.0),
                "sentence": _model(len(SENTENCE_FEATURES), 0.0, 0.0), "threshold": 0.5}

    judged = cross_validate(parts, 0.075, fit=fit)
    assert seen == [[1, 2], [0, 2], [0, 1]]
    assert [len(d) for d in judged] == [2, 2, 2]
    # part 0 (values 1, 2) lies under its judges' line (mean of 5, 6, 9, 10 = 7.5): no flag; part 2
    # (9, 10) over its line (mean of 1, 2, 5, 6 = 3.5): both flagged; part 1's line is 5.5
    assert [bool(d.flags) for d in judged[0]] == [False, False]
    assert [bool(d.flags) for d in judged[2]] == [True, True]
    assert judged[1][0].hallucination[0] == pytest.approx(1 / (1 + np.exp(-(5.0 - 5.5))))
    pooled = rates(sum((p.cases for p in parts), []), sum(judged, []), {3})
    assert pooled["correct references with any flag"] == pytest.approx(1 / 3)   # part 2's reference only
    assert pooled["substituted word flagged"] == pytest.approx(2 / 3)     # 6 over 5.5, 10 over 3.5; not 2
    assert all(key in pooled for key in ("omitted word flagged", "flag spans that touch the real error"))
    assert not any(" found at " in key for key in pooled)     # lines drawn on differently shifted scores


def test_the_parts_never_overlap_and_leave_the_last_check_pairs_out():
    covered = [set(range(a, b)) for a, b in PARTS]
    assert all(not (x & y) for i, x in enumerate(covered) for y in covered[i + 1:])
    assert not (set().union(*covered) & set(range(200, 300)))
