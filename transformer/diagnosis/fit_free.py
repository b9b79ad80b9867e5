"""The free lines (issue 51): the weights a model's own translation is judged by, the "free" part of
MODEL_DIR/diagnosis.json, fitted on hand-labelled own translations of Multi30k val[OWN_FIT_FROM:500]
(own.py); the benchmark judges on val[:OWN_FIT_FROM], which nothing here reads.

- the output-word and source-word models: monotone logistic regressions (fit.fit_monotone) on
  free.FREE_OUTPUT_FEATURES / FREE_SOURCE_FEATURES, over words both annotators list (1) or neither (0);
- the two flag lines, chosen jointly: the most words found (the worse side first) with at most
  FREE_FALSE_ALARMS of the acceptable outputs flagged and at least FREE_PRECISION of the flags on a
  labelled error; each model's bias then moved so that 0.5 is its line;
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
from .lexicon import lexicon_for
from .own import OWN_FIT_FROM, OwnCase, own_cases
from .reverse import reverse_for
from .scores import FREE_FEATURES, WEIGHTS_FILE, free_sentence_features, word_scores
from .signals import make_item
from .thresholds import shift_to_half

FREE_FALSE_ALARMS = 0.08        # acceptable own translations of the fit pairs that may get a flag (goal 10%)
FREE_PRECISION = 0.8            # flags on a labelled error, at least (goal 0.75)
LINE_GRID = np.arange(-4.0, 4.01, 0.1)     # logits tried as lines
# A source word the reverse model can hardly write back at all is left out more often than the word model
# says where the lexicon knows no translation for it ("Mond"): an expert of its own flags a word whose
# least likely piece is below -REBUILD_GRID nats, with REBUILD_SHARE more of the acceptable outputs
# flagged at most, as the forced lines' put-back expert (thresholds.py).
REBUILD_GRID = np.arange(8.0, 14.01, 0.5)
REBUILD_SHARE = 0.01
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


def _logit(model: dict, x: np.ndarray) -> np.ndarray:
    return ((x - np.asarray(model["mean"])) / np.asarray(model["std"])) @ np.asarray(model["coef"]) + model["bias"]


def choose_lines(cases: list[OwnCase], feats: list[dict], models: dict) -> tuple[float, float, dict]:
    """The (output, source) logits of the flag lines (see the module docstring) and what they give."""
    per_side = {}
    for side in ("output", "source"):
        x, y, where = word_rows(cases, feats, side)
        # every flaggable word's logit decides whether its case gets a flag, labelled or not
        all_x = [np.asarray(f[side])[np.asarray(f[f"{side}_flaggable"], bool)] for f in feats]
        top = np.array([_logit(models[side], a).max() if len(a) else -np.inf for a in all_x])
        per_side[side] = (_logit(models[side], x), y, top)
    ok = np.array([c.ok for c in cases])
    best, choice = None, (0.0, 0.0, {})
    for a in LINE_GRID:
        for b in LINE_GRID:
            flagged = (per_side["output"][2] >= a) | (per_side["source"][2] >= b)
            alarms = float(flagged[ok].mean()) if ok.any() else 0.0
            hits, total, found = 0, 0, []
            for side, line in (("output", a), ("source", b)):
                z, y, _ = per_side[side]
                on = z >= line
                hits, total = hits + int((on & (y == 1)).sum()), total + int(on.sum())
                found.append(float(on[y == 1].mean()) if (y == 1).any() else 0.0)
            precision = hits / total if total else 1.0
            if alarms > FREE_FALSE_ALARMS or precision < FREE_PRECISION:
                continue
            key = min(found) + 0.1 * sum(found)
            if best is None or key > best:
                best, choice = key, (float(a), float(b), {"acceptable flagged": alarms, "precision": precision,
                                                          "unsupported found": found[0], "omitted found": found[1]})
    return choice


def _expert(nats: float) -> dict:
    coef = np.zeros(len(FREE_SOURCE_FEATURES))
    coef[FREE_SOURCE_FEATURES.index("neg_rebuild_min")] = EXPERT_SLOPE
    return {"mean": [0.0] * len(coef), "std": [1.0] * len(coef), "coef": coef.tolist(),
            "bias": -EXPERT_SLOPE * nats, "rebuild_below": -float(nats)}


def rebuild_expert(cases: list[OwnCase], feats: list[dict], models: dict) -> dict | None:
    """The rebuild expert at the smallest depth that keeps the acceptable outputs flagged within the
    word lines' share plus REBUILD_SHARE and the flags' precision at FREE_PRECISION; None when none does."""
    ok = np.array([c.ok for c in cases])

    def flags(source_model):
        per_case, hits, total = [], 0, 0
        for c, f in zip(cases, feats):
            h = word_scores({**models, "source": source_model}, f, "output", table=FREE_FEATURES)
            o = word_scores({**models, "source": source_model}, f, "source", table=FREE_FEATURES)
            per_case.append(bool((h >= 0.5).any() or (o >= 0.5).any()))
            for side, scores, labels in (("output", h, c.output_labels), ("source", o, c.source_labels)):
                for g in f[f"{side}_groups"]:
                    if scores[g[0]] >= 0.5 and labels[g[0]] >= 0:
                        hits, total = hits + int(labels[g[0]] == 1), total + 1
        return np.array(per_case), (hits / total if total else 1.0)
    base, _ = flags(models["source"])
    budget = float(base[ok].mean()) + REBUILD_SHARE if ok.any() else 0.0
    for nats in REBUILD_GRID:
        expert = _expert(nats)
        flagged, precision = flags(dict(models["source"], also=[expert]))
        if (float(flagged[ok].mean()) if ok.any() else 0.0) <= budget and precision >= FREE_PRECISION:
            return expert
    return None


def fit_free(tr, reverse, sources: list[str], pair: str) -> dict:
    cases = own_cases(tr, sources, pair, OWN_FIT_FROM)
    feats = featurise(tr, reverse, [c.item for c in cases])
    models = {}
    for side, names in (("output", FREE_OUTPUT_FEATURES), ("source", FREE_SOURCE_FEATURES)):
        x, y, _ = word_rows(cases, feats, side)
        models[side] = dict(fit_monotone(x, y), features=list(names))
    a, b, found = choose_lines(cases, feats, models)
    # logit line -> probability line, so that shift_to_half puts 0.5 there
    models = {"output": shift_to_half(models["output"], 1 / (1 + np.exp(-a))),
              "source": shift_to_half(models["source"], 1 / (1 + np.exp(-b)))}
    expert = rebuild_expert(cases, feats, models)
    if expert is not None:
        models["source"]["also"] = [expert]
        found["rebuild expert (nats)"] = expert["rebuild_below"]
    # the sentence model: own translations against detached ones (labelled, and another sentence's)
    others = []
    for n, c in enumerate(cases):
        other = cases[(n + 1) % len(cases)].output
        item = make_item(tr, c.source, other)
        item.free = True
        others.append(item)
    rows, labels = [], []
    for c, f in zip(cases + [None] * len(others), feats + featurise(tr, reverse, others)):
        h = word_scores(models, f, "output", table=FREE_FEATURES)
        o = word_scores(models, f, "source", table=FREE_FEATURES)
        rows.append(free_sentence_features(f, h, o))
        labels.append(1.0 if c is None or c.detached else 0.0)
    models["sentence"] = dict(fit_logistic(np.array(rows), np.array(labels)), features=list(FREE_SENTENCE_FEATURES))
    return {**models, "threshold": 0.5, "lines": found,
            "fitted_on": f"hand-labelled own greedy translations of Multi30k val {OWN_FIT_FROM}-"
                         f"{max(c.pair for c in cases)} ({len(cases)}, benchmarks/own_translations/{pair}.jsonl, "
                         "never in the benchmark); words: non-negative logistic regressions; lines: the most words "
                         f"found with at most {FREE_FALSE_ALARMS:.0%} of the acceptable outputs flagged and "
                         f"precision >= {FREE_PRECISION}; sentences: own translations against detached ones "
                         "(labelled, and another sentence's own translation)"}


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
