"""Cross-validation of the free lines on the labelled own translations of val 0-499 (the selection protocol
of docs/diagnosis.md, "Frozen on val 0-499"): 5 folds by sentence x REPEATS shuffles; in each fold everything
is fitted on the four others exactly as fit_free fits it (fit_free.fit_lines: word models, sentence gate,
lines, budget by an inner cross-validation, rebuild expert, sentence model) and the fifth is judged as
bench_diagnosis --own-only judges (own.evaluate_own over scores.free_scored). Pooled over the held-out folds
of each shuffle, then averaged over shuffles.

    PYTHONPATH=.:benchmarks/own_translations/experiments python benchmarks/own_translations/experiments/cv30.py \
        en-de a b c ...

Reads runs/s30/ownfeats.{m}.pkl (cache30.py); no label row with val >= 500.
"""
from __future__ import annotations

import json
import pickle
import sys
import time

import numpy as np

from transformer.diagnosis import fit_free as ff
from transformer.diagnosis import free_lines as fl
from transformer.diagnosis.free import FREE_OUTPUT_FEATURES
from transformer.diagnosis.own import evaluate_own
from transformer.diagnosis.protocol import roc_auc
from transformer.diagnosis.scores import free_scored

SHIPPED = FREE_OUTPUT_FEATURES[:11]          # today's columns (before pieces per letter, what the sentence lacks)
S28_BUDGETS = (0.05, 0.055, 0.06, 0.065, 0.07, 0.075, 0.08)
# name -> (output columns, budget (None: by inner CV), CV target, budgets tried, gate)
CONFIGS = {
    "a": (SHIPPED, 0.08, None, None, None),                              # shipped form
    "b": (FREE_OUTPUT_FEATURES, None, 0.08, S28_BUDGETS, None),           # session 28's candidate
    "c": (FREE_OUTPUT_FEATURES, None, 0.08, S28_BUDGETS, "hard"),         # (b) + a hard sentence gate
    "c1": (FREE_OUTPUT_FEATURES, None, 0.08, S28_BUDGETS, 1.0),           # (b) + a soft gate, slope 1
    "d": (FREE_OUTPUT_FEATURES, None, 0.07, ff.FREE_BUDGETS, None),       # (b), held-out target 7%, budgets from 3%
    "e": (FREE_OUTPUT_FEATURES, None, 0.07, ff.FREE_BUDGETS, "hard"),     # (c), held-out target 7%
    "e1": (FREE_OUTPUT_FEATURES, None, 0.07, ff.FREE_BUDGETS, 1.0),
    "f": (FREE_OUTPUT_FEATURES, None, 0.065, ff.FREE_BUDGETS, "hard"),
    "g": (FREE_OUTPUT_FEATURES, 0.08, None, None, "hard"),                # gate, fixed 8% budget
    "a13": (FREE_OUTPUT_FEATURES, 0.08, None, None, None),                # (b)'s columns at a fixed 8%
    "h": (FREE_OUTPUT_FEATURES, None, 0.075, ff.FREE_BUDGETS, "hard"),
    "i": (FREE_OUTPUT_FEATURES, None, 0.0725, ff.FREE_BUDGETS, "hard"),
    "e_w5": (FREE_OUTPUT_FEATURES, None, 0.07, ff.FREE_BUDGETS, "hard", {"ERROR_WEIGHT": 0.5}),
    "e_w1": (FREE_OUTPUT_FEATURES, None, 0.07, ff.FREE_BUDGETS, "hard", {"ERROR_WEIGHT": 1.0}),
    "h_w5": (FREE_OUTPUT_FEATURES, None, 0.075, ff.FREE_BUDGETS, "hard", {"ERROR_WEIGHT": 0.5}),
}
REPEATS = int(__import__('os').environ.get('CV_REPEATS_OUTER', 2))
N_PAIRS = 500                # the fit pairs the folds are drawn over (cv31.py: 800)


def extend(cases, feats, shift=0):
    """Today's cached 11 output columns + session 28's two (as free.free_features computes them now); shift 1:
    the swapped features (case n's source, case n + 1's output)."""
    from transformer.diagnosis.signals import word_texts
    out = []
    for n, f in enumerate(feats):
        c = cases[(n + shift) % len(cases)]
        f = dict(f)
        x = np.asarray(f["output"])
        if x.shape[1] == 11:
            texts = word_texts(c.item.output_pieces, f["output_groups"])
            src, on = np.asarray(f["source"]), np.asarray(f["source_flaggable"], bool)
            missing = float(src[on, 0].max()) if on.any() else 0.0
            ppl = [len(g) / max(sum(ch.isalpha() for ch in t.replace("\u2581", "")), 1)
                   for g, t in zip(f["output_groups"], texts)]
            f["output"] = np.hstack([x, np.array(ppl).reshape(-1, 1), np.full((len(ppl), 1), missing)])
        out.append(f)
    return out


def load(m):
    cases, feats, swapped = pickle.load(open(f"runs/s30/ownfeats.{m}.pkl", "rb"))
    assert max(c.pair for c in cases) < 500
    return cases, extend(cases, feats), extend(cases, swapped, 1)


def special_ids(m):
    from transformer import Translator
    return Translator.load(f"pretrained/{m}").engine.special_ids


def run(m, name, cases, feats, swapped, special, repeats=REPEATS, log=None):
    cols, budget, target, budgets, gate, *more = CONFIGS[name]
    old, old_fl = ff.FREE_BUDGETS, {k: getattr(fl, k) for k in (more[0] if more else {})}
    if budgets is not None:
        ff.FREE_BUDGETS = budgets
    for k, v in (more[0] if more else {}).items():
        setattr(fl, k, v)
    pairs = np.array([c.pair for c in cases])
    tables, chosen = [], []
    try:
        for r in range(repeats):
            fold = np.random.RandomState(100 + r).permutation(N_PAIRS)[pairs] % 5
            diags = [None] * len(cases)
            swap_scores = [None] * len(cases)
            for k in range(5):
                train = [n for n in range(len(cases)) if fold[n] != k]
                held = [n for n in range(len(cases)) if fold[n] == k]
                w = ff.fit_lines([cases[n] for n in train], [feats[n] for n in train], [swapped[n] for n in train],
                                 cols, budget, gate, target if target is not None else ff.CV_FALSE_ALARMS)
                chosen.append({k2: v for k2, v in w["lines"].items() if k2 != "cross-validated at the budget"}
                              | ({"gate": round(w["gate"]["line"], 2)} if "gate" in w else {}))
                for n in held:
                    diags[n] = free_scored(feats[n], w, cases[n].item)
                    swap_scores[n] = _swap_score(swapped[n], w)
            t = evaluate_own(cases, diags, special)
            own = [d.sentence_score for d in diags]
            t[("auc", "swapped vs own", "sentence score")] = roc_auc(own + swap_scores, [0] * len(own) + [1] * len(own))
            tables.append(t)
    finally:
        ff.FREE_BUDGETS = old
        for k, v in old_fl.items():
            setattr(fl, k, v)
    keys = [k for k in tables[0] if k[0] in ("auc", "rate")]
    mean = {k: float(np.nanmean([t[k] for t in tables])) for k in keys}
    spread = {k: (float(np.nanmin([t[k] for t in tables])), float(np.nanmax([t[k] for t in tables]))) for k in keys}
    budgets_seen = sorted({c["budget"] for c in chosen})
    return mean, spread, budgets_seen, chosen, tables[0][("count", "outputs: error / acceptable / detached")]


def _swap_score(f, w):
    from transformer.diagnosis.scores import _predict, free_sentence_features, free_word_scores
    h, o, _ = free_word_scores(w, f, None)
    return float(_predict(w["sentence"], free_sentence_features(f, h, o)[None])[0])


SHORT = {("auc", "omission", "combination"): "AUC left out", ("auc", "unsupported", "combination"): "AUC unsup",
         ("rate", "outputs with a real error that get a flag"): "error flagged",
         ("rate", "acceptable outputs with any flag"): "ok flagged",
         ("rate", "omission words flagged (both annotators list them)"): "left out found",
         ("rate", "unsupported words flagged (both annotators list them)"): "unsup found",
         ("rate", "flags on a real error (precision)"): "precision",
         ("auc", "detached (hand-labelled) vs the rest", "sentence score"): "AUC detached",
         ("auc", "swapped vs own", "sentence score"): "AUC swapped"}


if __name__ == "__main__":
    m, names = sys.argv[1], sys.argv[2:] or list(CONFIGS)
    cases, feats, swapped = load(m)
    special = special_ids(m)
    for name in names:
        t0 = time.time()
        mean, spread, budgets_seen, chosen, counts = run(m, name, cases, feats, swapped, special)
        cells = "  ".join(f"{SHORT[k]} {mean[k]:.3f} [{spread[k][0]:.3f}-{spread[k][1]:.3f}]" for k in SHORT if k in mean)
        print(f"{m} {name}: {cells}  budgets {budgets_seen}  counts {counts}  ({time.time() - t0:.0f}s)", flush=True)
        with open(f"runs/s30/cv.{m}.jsonl", "a") as fh:
            fh.write(json.dumps({"model": m, "config": name, "mean": {SHORT[k]: v for k, v in mean.items() if k in SHORT},
                                 "spread": {SHORT[k]: v for k, v in spread.items() if k in SHORT},
                                 "chosen": chosen, "counts": counts}) + "\n")
