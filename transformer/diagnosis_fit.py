"""The diagnosis protocol (issue 22) and the fit of the shipped weights.

For each pair (src, ref): correct = force ref; detached = force another pair's ref; partial =
ref with its second half of words replaced by the second half of another ref (pieces after the
cut are hallucinated); omission = src + " and " / " und " + second half of another source,
forcing the original ref (the appended source pieces are omitted). `cases()` builds them with
their labels; `fit()` fits the piece and source logistic regressions on Multi30k TRAIN, and
`fit_sentence()` the sentence one on val pairs FIT_FROM onwards, which the benchmark (val[:FIT_FROM])
never sees. Train is what the model learnt from, so its translations there are more confident than
on new text; the sentence scores are calibrated on text the model has not seen:

    python -m transformer.diagnosis_fit --model pretrained/en-de --n 1500
"""
from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .diagnosis import (PIECE_FEATURES, SENTENCE_FEATURES, SOURCE_FEATURES, WEIGHTS_FILE, _predict, features,
                        sentence_features)
from .diagnosis_signals import Item, compute_signals, word_groups
from .faithfulness import _special_ids, average_ranks

AND = {"en": " and ", "de": " und ", "fr": " et "}
FIT_FROM = 300                     # val[:FIT_FROM] is the benchmark's; the sentence model fits on the rest
EMPHASIS_GRID = np.arange(0.0, 8.01, 0.5)


@dataclass
class Case:
    kind: str                 # correct | detached | partial | omission
    pair: int
    item: Item
    piece_labels: np.ndarray  # (T,) 1 hallucinated, 0 supported, -1 not judged (</s> in eval)
    source_labels: np.ndarray  # (S,) 1 omitted, 0 translated
    source: str = ""           # the source text (for re-running it through translate())


def roc_auc(scores, labels) -> float:
    """Rank-based ROC AUC (ties count half); nan without both classes."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = average_ranks(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _word_index(pieces, ids, special) -> np.ndarray:
    index = np.zeros(len(ids), dtype=int)
    for w, group in enumerate(word_groups(pieces, ids, special)):
        index[group] = w
    return index


def make_item(tr, source: str, target) -> Item:
    """An Item for forcing `target` (text or pieces) on `source`, without a translate() call."""
    source_ids, _ = tr.encode_source(source)
    output_ids = tr._target_ids(target)
    if hasattr(tr, "family"):
        start = tr.model.generation_config.decoder_start_token_id
        start = tr.model.config.decoder_start_token_id if start is None else start
    else:
        from .model import BOS_ID
        start = BOS_ID
    pieces = tr.tokenizer.source_pieces(source_ids) if hasattr(tr.tokenizer, "source_pieces") \
        else tr.tokenizer.pieces(source_ids)
    return Item(source_ids, [start] + output_ids[:-1], output_ids, pieces, tr.tokenizer.pieces(output_ids))


def _half(sentence: str) -> list[str]:
    words = sentence.split()
    return words[len(words) // 2:]


def cases(tr, sources: list[str], refs: list[str], seed: int = 0, kinds=("correct", "detached", "partial", "omission")):
    rng = random.Random(seed)
    special = _special_ids(tr)
    n = len(sources)
    out = []
    for i, (src, ref) in enumerate(zip(sources, refs)):
        j = rng.randrange(n - 1)
        j = j + 1 if j >= i else j                             # another pair, never i
        if "correct" in kinds:
            it = make_item(tr, src, ref)
            out.append(Case("correct", i, it, np.zeros(len(it.output_ids)), np.zeros(len(it.source_ids)), src))
        if "detached" in kinds:
            it = make_item(tr, src, refs[j])
            out.append(Case("detached", i, it, np.ones(len(it.output_ids)), np.ones(len(it.source_ids)), src))
        words = ref.split()
        if "partial" in kinds and len(words) >= 2:
            cut = len(words) // 2
            it = make_item(tr, src, " ".join(words[:cut] + _half(refs[j])))
            labels = (_word_index(it.output_pieces, it.output_ids, special) >= cut).astype(float)
            out.append(Case("partial", i, it, labels, np.zeros(len(it.source_ids)), src))
        if "omission" in kinds:
            joined = src + AND.get(tr.source_lang, " and ") + " ".join(_half(sources[j]))
            it = make_item(tr, joined, ref)
            labels = (_word_index(it.source_pieces, it.source_ids, special) >= len(src.split())).astype(float)
            labels[[k for k, idx in enumerate(it.source_ids) if idx in special]] = 0.0
            out.append(Case("omission", i, it, np.zeros(len(it.output_ids)), labels, joined))
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, ridge: float = 1.0, iterations: int = 30) -> dict:
    """L2-regularised logistic regression by Newton's method on standardised features."""
    mean, std = x.mean(0), x.std(0) + 1e-6
    z = np.concatenate([(x - mean) / std, np.ones((len(x), 1))], 1)
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], ridge)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -40, 40)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"mean": mean.tolist(), "std": std.tolist(), "coef": w[:-1].tolist(), "bias": float(w[-1])}


def fit_cases(tr, all_cases) -> dict:
    """Piece and source models first; the sentence model then sees the piece model's output."""
    feats = [features(s) for s in compute_signals(tr, [c.item for c in all_cases], tr._gates(None))]
    piece = fit_logistic(np.concatenate([f["piece"] for f in feats]), np.concatenate([c.piece_labels for c in all_cases]))
    source = fit_logistic(np.concatenate([f["source"] for f in feats]), np.concatenate([c.source_labels for c in all_cases]))
    sent = [(sentence_features(f, _predict(piece, f["piece"])), 0.0 if c.kind == "correct" else 1.0)
            for f, c in zip(feats, all_cases) if c.kind != "omission"]
    sentence = fit_logistic(np.array([x for x, _ in sent]), np.array([y for _, y in sent]))
    return {"piece": dict(piece, features=PIECE_FEATURES), "source": dict(source, features=SOURCE_FEATURES),
            "sentence": dict(sentence, features=SENTENCE_FEATURES)}


def _row_aucs(score: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """ROC AUC of detached vs correct and of partial vs correct (the benchmark's sentence rows)."""
    correct = score[kinds == "correct"]
    return np.array([roc_auc(np.r_[correct, score[kinds == bad]],
                             np.r_[np.zeros(len(correct)), np.ones(int((kinds == bad).sum()))])
                     for bad in ("detached", "partial")])


def emphasise(model: dict, x: np.ndarray, kinds: np.ndarray) -> tuple[dict, tuple[float, float]]:
    """Add -a * mean_pmi - b * mean_log_p to the sentence model's logit, (a, b) from EMPHASIS_GRID
    squared: the pair whose worse row beats the better single signal (Seq-Logprob or mean pmi) by
    the widest margin on these cases (ties: the smaller weights). Why: a regression fitted on
    detached and partial cases together leans on the local-window features that find partial ones,
    and then ranks a few detached translations below correct ones that either single signal alone
    would have ordered right."""
    pmi, log_p = SENTENCE_FEATURES.index("mean_pmi"), SENTENCE_FEATURES.index("mean_log_p")
    best_single = np.maximum(_row_aucs(-x[:, pmi], kinds), _row_aucs(-x[:, log_p], kinds))
    z = (x - np.asarray(model["mean"])) / np.asarray(model["std"])
    logit = z @ np.asarray(model["coef"]) + model["bias"]
    margins = {(float(a), float(b)): float((_row_aucs(logit - a * x[:, pmi] - b * x[:, log_p], kinds)
                                            - best_single).min())
               for a in EMPHASIS_GRID for b in EMPHASIS_GRID}
    a, b = max(margins, key=lambda pair: (margins[pair], -sum(pair)))
    raw = np.zeros(len(SENTENCE_FEATURES))
    raw[pmi], raw[log_p] = -a, -b
    return dict(model, raw_coef=raw.tolist()), (a, b)


def fit_sentence(tr, data_dir, piece: dict, seed: int = 2) -> tuple[dict, tuple[float, float]]:
    """The sentence model on val[FIT_FROM:] (correct, detached and partial cases), then emphasise()."""
    from .data import read_split
    sources = read_split(data_dir, "val", tr.source_lang)[FIT_FROM:]
    refs = read_split(data_dir, "val", tr.target_lang)[FIT_FROM:]
    held = cases(tr, sources, refs, seed, kinds=("correct", "detached", "partial"))
    feats = [features(s) for s in compute_signals(tr, [c.item for c in held], tr._gates(None))]
    x = np.array([sentence_features(f, _predict(piece, f["piece"])) for f in feats])
    kinds = np.array([c.kind for c in held])
    model = dict(fit_logistic(x, (kinds != "correct").astype(float)), features=SENTENCE_FEATURES)
    return emphasise(model, x, kinds)


def fit(tr, data_dir, n: int, seed: int = 1) -> dict:
    from .data import read_split
    sources = read_split(data_dir, "train", tr.source_lang)
    refs = read_split(data_dir, "train", tr.target_lang)
    pick = random.Random(seed).sample(range(len(sources)), n)
    weights = fit_cases(tr, cases(tr, [sources[i] for i in pick], [refs[i] for i in pick], seed))
    return with_sentence(tr, data_dir, weights, f"Multi30k train, {n} random pairs (seed {seed})")


def with_sentence(tr, data_dir, weights: dict, pieces_from: str) -> dict:
    """`weights` (piece and source models) plus the sentence model of fit_sentence."""
    weights = dict(weights)
    weights["sentence"], (a, b) = fit_sentence(tr, data_dir, weights["piece"])
    return {**weights, "threshold": 0.5,
            "fitted_on": f"pieces and source words: {pieces_from}; sentences: val pairs {FIT_FROM} onwards (never in "
                         f"the benchmark), mean pmi weighted {a:g} and mean log p {b:g} more; synthetic labels of the "
                         "protocol"}


def average(weight_sets: list[dict]) -> dict:
    out = {"threshold": 0.5, "fitted_on": "mean of: " + "; ".join(w["fitted_on"] for w in weight_sets)}
    for part in ("piece", "source", "sentence"):
        out[part] = {key: (np.mean([w[part][key] for w in weight_sets], 0).tolist() if key != "features"
                           else weight_sets[0][part][key]) for key in weight_sets[0][part]}
    return out


def main(argv=None) -> int:
    import torch
    parser = argparse.ArgumentParser(prog="python -m transformer.diagnosis_fit")
    parser.add_argument("--model", action="append", default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n", type=int, default=1500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write-default", action="store_true", help="also write transformer/diagnosis_default.py")
    parser.add_argument("--sentence-only", action="store_true",
                        help="keep the piece and source models of MODEL/diagnosis.json, refit the sentence model")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from .data import resolve_data_dir
    from .translator import Translator
    fitted = []
    for model in args.model or ["pretrained/en-de", "pretrained/de-en"]:
        tr = Translator.load(model)
        if args.sentence_only:
            old = json.loads(Path(model, WEIGHTS_FILE).read_text(encoding="utf-8"))
            pieces_from = old["fitted_on"].split("; sentences:")[0].removeprefix("pieces and source words: ")
            w = with_sentence(tr, resolve_data_dir(args.data_dir), {k: old[k] for k in ("piece", "source")},
                              pieces_from)
        else:
            w = fit(tr, resolve_data_dir(args.data_dir), args.n)
        Path(model, WEIGHTS_FILE).write_text(json.dumps(w, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {Path(model, WEIGHTS_FILE)}")
        fitted.append(w)
    if args.write_default:
        target = Path(__file__).with_name("diagnosis_default.py")
        head = target.read_text(encoding="utf-8").split("DEFAULT =")[0]
        target.write_text(head + "DEFAULT = " + json.dumps(average(fitted), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
