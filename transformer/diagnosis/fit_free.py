"""The free lines (issue 51): the weights a model's own translation is judged by, the "free" part of
MODEL_DIR/diagnosis.json, fitted on the hand-labelled own translations of Multi30k val[OWN_FIT] (own.py);
the benchmark judges on the typed set (own.OWN_JUDGE), which nothing here reads.

- the output-word and source-word models: monotone logistic regressions (fit.fit_monotone) on
  free.FREE_OUTPUT_FEATURES / FREE_SOURCE_FEATURES, over words both annotators list (1) or neither (0);
- the sentence gate (GATE): a monotone logistic regression on free.FREE_GATE_FEATURES of the outputs with
  an error (1) against the acceptable ones (0); under its line no word of the sentence is flagged;
- the two flag lines and the gate's line, chosen jointly: the most words found (the worse side first) with
  at most a budget of the acceptable outputs flagged and at least FREE_PRECISION of the flags on a labelled
  error; each word model's bias then moved so that 0.5 is its line. The budget is chosen per model by
  cross-validation within the fit pairs (cross_validated_budget): lines fitted on the pairs they are judged
  by flag more of the pairs they never saw;
- the rebuild expert (a source word the reverse model can hardly write back at all);
- the sentence model: a logistic regression on FREE_SENTENCE_FEATURES, detached = outputs both
  annotators call detached plus another sentence's own translation given for this source.

    python -m transformer.diagnosis.fit_free --model pretrained/en-de --model pretrained/de-en
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .fit import fit_logistic, fit_monotone
from .free import FREE_OUTPUT_FEATURES, FREE_SENTENCE_FEATURES, FREE_SOURCE_FEATURES, compute_free_signals, free_features
from .free_lines import FREE_PRECISION, GATE, Words, expert_depth, pick
from .lexicon import lexicon_for
from .own import OWN_FIT, OwnCase, own_cases
from .reverse import reverse_for
from .scores import FREE_FEATURES, WEIGHTS_FILE, free_sentence_features, free_word_scores
from .signals import make_item
from .thresholds import shift_to_half

# The largest of FREE_BUDGETS (acceptable fit outputs the lines may flag) whose lines, fitted on four fifths
# of the fit pairs, flag at most CV_FALSE_ALARMS of the acceptable outputs of the fifth left out (the goal is
# 10% on pairs never fitted on; a rate over ~70 acceptable outputs moves by ~3.5 points between samples)
FREE_BUDGETS = tuple(round(0.03 + 0.005 * k, 3) for k in range(11))        # 3% ... 8%
CV_FALSE_ALARMS = 0.0725
CV_FOLDS, CV_REPEATS = 5, 3
EXPERT_SLOPE = 2.0


def featurise(tr, reverse, items) -> list[dict]:
    special, lexicon = frozenset(tr.engine.special_ids), lexicon_for(tr)
    return [free_features(s, it, special, lexicon, tr.engine.tokenizer.id_to_piece, tr.source_lang, tr.target_lang)
            for s, it in zip(compute_free_signals(tr, reverse, items), items)]


def word_rows(cases: list[OwnCase], feats: list[dict], side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, case index) of each flaggable word both annotators list (1) or neither lists (0)."""
    xs, ys, where = [], [], []
    labels_of = "source_labels" if side == "source" else "output_labels"
    for n, (c, f) in enumerate(zip(cases, feats)):
        labels = getattr(c, labels_of)
        for g, on, row in zip(f[f"{side}_groups"], f[f"{side}_flaggable"], f[side]):
            if on and labels[g[0]] >= 0:
                xs.append(row)
                ys.append(labels[g[0]])
                where.append(n)
    return np.array(xs), np.array(ys), np.array(where)


def word_models(cases: list[OwnCase], feats: list[dict], output_features=None) -> dict:
    """The two word models (their own logits; the lines come later). output_features: a subset of
    FREE_OUTPUT_FEATURES (all by default)."""
    models = {}
    for side, names in (("output", list(output_features or FREE_OUTPUT_FEATURES)), ("source", FREE_SOURCE_FEATURES)):
        x, y, _ = word_rows(cases, feats, side)
        cols = [FREE_FEATURES[side].index(n) for n in names]
        models[side] = dict(fit_monotone(x[:, cols], y), features=list(names))
    return models


def _expert(nats: float) -> dict:
    coef = np.zeros(len(FREE_SOURCE_FEATURES))
    coef[FREE_SOURCE_FEATURES.index("neg_rebuild_min")] = EXPERT_SLOPE
    return {"mean": [0.0] * len(coef), "std": [1.0] * len(coef), "coef": coef.tolist(),
            "bias": -EXPERT_SLOPE * nats, "rebuild_below": -float(nats), "features": list(FREE_SOURCE_FEATURES)}


def cross_validated_budget(cases: list[OwnCase], feats: list[dict], output_features=None, gate=GATE,
                           target: float = CV_FALSE_ALARMS) -> tuple[float, dict]:
    """The largest of FREE_BUDGETS whose lines, fitted on four fifths of the fit pairs as fit_free fits them,
    flag at most `target` of the acceptable outputs of the fifth left out (pooled over CV_FOLDS folds x
    CV_REPEATS shuffles of the sentences); the smallest budget when none does. Also each budget's pooled
    held-out rates."""
    pairs = np.array([c.pair for c in cases])
    totals = {fa: {} for fa in FREE_BUDGETS}
    for r in range(CV_REPEATS):
        fold = np.random.RandomState(r).permutation(int(pairs.max()) + 1)[pairs] % CV_FOLDS
        for k in range(CV_FOLDS):
            train = [n for n in range(len(cases)) if fold[n] != k]
            models = word_models([cases[n] for n in train], [feats[n] for n in train], output_features)
            words = Words(cases, feats, models)
            fitting = np.isin(np.arange(len(cases)), train)
            words.fit_gate(fitting, gate)
            choices = pick(words, fitting, FREE_BUDGETS)
            for fa, (a, b, g, _) in choices.items():
                nats = expert_depth(words, a, b, g, fitting)
                for name, (num, den) in words.rates(a, b, g, nats, ~fitting).items():
                    n0, d0 = totals[fa].get(name, (0, 0))
                    totals[fa][name] = (n0 + num, d0 + den)
    rates = {fa: {name: num / den if den else float("nan") for name, (num, den) in t.items()} for fa, t in totals.items()}
    fitting = [fa for fa in FREE_BUDGETS if rates[fa]["acceptable flagged"] <= target + 1e-12]
    return (max(fitting) if fitting else min(FREE_BUDGETS)), rates


def fit_lines(cases: list[OwnCase], feats: list[dict], swapped: list[dict], output_features=None,
              budget: float | None = None, gate=GATE, target: float = CV_FALSE_ALARMS) -> dict:
    """The free part of diagnosis.json from featurised cases (free.free_features) and, for the sentence model,
    each case's source with another case's output (swapped). budget None: cross_validated_budget's."""
    models = word_models(cases, feats, output_features)
    found = {}
    if budget is None:
        budget, cv = cross_validated_budget(cases, feats, output_features, gate, target)
        found["cross-validated at the budget"] = {k: round(v, 4) for k, v in cv[budget].items()}
    words = Words(cases, feats, models)
    everything = np.ones(len(cases), bool)
    gate_model = words.fit_gate(everything, gate)
    a, b, g, rates = pick(words, everything, [budget])[budget]
    nats = expert_depth(words, a, b, g, everything)
    found.update(rates, budget=budget)
    # logit line -> probability line, so that shift_to_half puts 0.5 there
    weights = {"output": shift_to_half(models["output"], 1 / (1 + np.exp(-a))),
               "source": shift_to_half(models["source"], 1 / (1 + np.exp(-b)))}
    if nats is not None:
        weights["source"]["also"] = [_expert(nats)]
        found["rebuild expert (nats)"] = -nats
    if gate_model is not None and g is not None:
        weights["gate"] = dict(gate_model, line=float(g), offsets={"output": a, "source": b},
                               slope=None if gate == "hard" else float(gate))
    # the sentence model: own translations against detached ones (labelled, and another sentence's)
    rows, labels = [], []
    for c, f in zip(cases + [None] * len(swapped), feats + swapped):
        h, o, _ = free_word_scores(weights, f, c.item if c is not None else None)
        rows.append(free_sentence_features(f, h, o))
        labels.append(1.0 if c is None or c.detached else 0.0)
    weights["sentence"] = dict(fit_logistic(np.array(rows), np.array(labels)), features=list(FREE_SENTENCE_FEATURES))
    return {**weights, "threshold": 0.5, "lines": found}


def fit_free(tr, reverse, sources: list[str], pair: str) -> dict:
    cases = own_cases(tr, sources, pair, OWN_FIT.start, OWN_FIT.stop)
    feats = featurise(tr, reverse, [c.item for c in cases])
    others = []
    for n, c in enumerate(cases):
        item = make_item(tr, c.source, cases[(n + 1) % len(cases)].output)
        item.free = True
        others.append(item)
    weights = fit_lines(cases, feats, featurise(tr, reverse, others))
    budget = weights["lines"]["budget"]
    return {**weights, "fitted_on": (
        f"hand-labelled own greedy translations of Multi30k val {OWN_FIT.start}-{OWN_FIT.stop - 1} ({len(cases)}, "
        f"benchmarks/own_translations/{pair}.jsonl, never in the benchmark); words: non-negative logistic "
        f"regressions; sentence gate: a non-negative logistic regression of the outputs with an error; lines: the "
        f"most words found with at most {budget:.1%} of the acceptable outputs flagged (the largest budget whose "
        f"lines flag at most {CV_FALSE_ALARMS:.0%} of the acceptable outputs of a fifth left out, {CV_FOLDS} folds x "
        f"{CV_REPEATS}) and precision >= {FREE_PRECISION}; sentences: own translations against detached ones "
        "(labelled, and another sentence's own translation)")}


def main(argv=None) -> int:
    import torch
    parser = argparse.ArgumentParser(prog="python -m transformer.diagnosis.fit_free")
    parser.add_argument("--model", action="append", default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from ..training.data import read_split, resolve_data_dir
    from ..translator import Translator
    for model in args.model or ["pretrained/en-de", "pretrained/de-en"]:
        tr = Translator.load(model)
        reverse = reverse_for(tr)
        if reverse is None:
            parser.error(f"no model of the other direction with the same vocabulary beside {model}")
        sources = read_split(resolve_data_dir(args.data_dir), "val", tr.source_lang)
        path = Path(model, WEIGHTS_FILE)
        weights = json.loads(path.read_text(encoding="utf-8"))
        weights["free"] = fit_free(tr, reverse, sources, f"{tr.source_lang}-{tr.target_lang}")
        path.write_text(json.dumps(weights, indent=1) + "\n", encoding="utf-8")
        w = weights["free"]
        print(f"wrote {path}: free output coef {np.round(w['output']['coef'], 3).tolist()}, source coef "
              f"{np.round(w['source']['coef'], 3).tolist()}, lines {json.dumps(w['lines'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
