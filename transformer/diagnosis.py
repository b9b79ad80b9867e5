"""`translate(..., diagnose=True)`: which output pieces the source does not support, which source
words the translation leaves out, and how detached the whole sentence is (api.md, "What went
wrong: diagnosis").

Signals (diagnosis_signals.py), all from batched teacher-forced passes: log p of each piece;
pmi = log p(piece | source) - log p(piece | null source), contrastive conditioning on the whole
source; and for each source word the fall of log p(translation) when that word is deleted
(Vamvas and Sennrich 2022). Three logistic regressions turn them into calibrated probabilities:
per output piece (hallucination), per source piece (omission) and per sentence. The piece and
source ones were fitted on Multi30k train, the sentence one on val pairs the benchmark never uses,
with extra weight on mean pmi and mean log p so that it ranks detached translations at least as well
as either alone (transformer/diagnosis_fit.py, synthetic labels of
benchmarks/bench_diagnosis.py); they ship as MODEL_DIR/diagnosis.json; any other model uses the
generic default in diagnosis_default.py. ALTI+ and attention are not used: on forced
translations they were the weakest signals and cost an explain pass (see the README table).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .diagnosis_signals import Item, Signals, compute_signals

REPO_ROOT = Path(__file__).resolve().parents[1]
WEIGHTS_FILE = "diagnosis.json"
PIECE_FEATURES = ["log_p", "pmi", "log_p_window", "pmi_window", "sentence_pmi", "sentence_log_p"]
SOURCE_FEATURES = ["drop", "drop_max", "drop_mean", "drop_window", "drop_share", "sentence_pmi"]
SENTENCE_FEATURES = ["mean_log_p", "mean_pmi", "min_log_p_window", "min_pmi_window", "low_pmi_share",
                     "min_pmi_window4", "pmi_p10", "mean_hallucination", "max_hallucination", "flagged_share"]


@dataclass
class Flag:
    kind: str            # "hallucination" (output pieces) | "omission" (source pieces)
    start: int
    end: int             # exclusive
    score: float
    evidence: dict = field(default_factory=dict)


@dataclass
class Diagnosis:
    sentence_score: float            # [0, 1], higher = more likely detached from the source
    hallucination: np.ndarray        # float32 (T,)
    omission: np.ndarray             # float32 (S,)
    flags: list
    signals: dict = field(default_factory=dict)    # the raw per-piece signals behind the scores
    missing: list = field(default_factory=list)    # signals this model could not give (none so far)


def _window(x: np.ndarray, radius: int) -> np.ndarray:
    if len(x) == 0:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    n = len(x)
    lo = np.clip(np.arange(n) - radius, 0, n)
    hi = np.clip(np.arange(n) + radius + 1, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


def _slog(x):
    return np.sign(x) * np.log1p(np.abs(x))


def features(sig: Signals) -> dict:
    """Feature matrices: piece (T, F), source (S, F), sentence (F,), plus the named raw signals."""
    lp, pmi = sig.log_p, sig.log_p - sig.log_p_null
    T = len(lp)
    lp_w, pmi_w = _window(lp, 2), _window(pmi, 2)
    s_lp, s_pmi = float(lp.mean()), float(pmi.mean())
    piece = np.stack([lp, pmi, lp_w, pmi_w, np.full(T, s_pmi), np.full(T, s_lp)], 1)
    drops = sig.log_p[None, :] - sig.deletion                                     # (W, T)
    per_word = drops.sum(1) if len(drops) else np.zeros(0)
    word_max = drops.max(1) if len(drops) else np.zeros(0)
    S = sum(len(g) for g in sig.words)
    src = np.zeros((S, len(SOURCE_FEATURES)))
    top = max(float(np.abs(per_word).max()) if len(per_word) else 0.0, 1e-6)
    word_window = _window(_slog(per_word), 1)
    for w, group in enumerate(sig.words):
        src[group] = [_slog(per_word[w]), word_max[w], per_word[w] / T, word_window[w], per_word[w] / top, s_pmi]
    sentence = np.array([s_lp, s_pmi, lp_w.min(), pmi_w.min(), float((pmi_w < 0.5).mean()),
                         _window(pmi, 4).min(), float(np.percentile(pmi, 10))])
    raw = {"log_p": lp, "pmi": pmi, "deletion_drop": np.array([per_word[w] for w, g in enumerate(sig.words)
                                                                 for _ in g])}
    return {"piece": piece, "source": src, "sentence": sentence, "raw": raw}


def sentence_features(f: dict, hallucination: np.ndarray) -> np.ndarray:
    """The sentence's own features plus what the piece model found (mean, max, share >= 0.5)."""
    h = np.asarray(hallucination, dtype=np.float64)
    return np.concatenate([f["sentence"], [h.mean(), h.max(), float((h >= 0.5).mean())]])


def _predict(model: dict, x: np.ndarray) -> np.ndarray:
    z = (x - np.asarray(model["mean"])) / np.asarray(model["std"])
    logit = z @ np.asarray(model["coef"]) + model["bias"]
    if "raw_coef" in model:           # the sentence model's extra weights (diagnosis_fit.emphasise)
        logit = logit + x @ np.asarray(model["raw_coef"])
    return 1.0 / (1.0 + np.exp(-np.clip(logit, -40, 40)))


@lru_cache(maxsize=16)
def _read_weights(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def weights_for(tr) -> dict:
    """MODEL_DIR/diagnosis.json when the model is one of ours shipped in pretrained/ (matched by
    its card) or a local HF folder that has one; else the generic default."""
    card = getattr(tr, "card", {}) or {}
    candidates = []
    if card.get("path"):
        candidates.append(Path(str(card["path"])) / WEIGHTS_FILE)
    if card.get("name") and not hasattr(tr, "family"):
        for folder in sorted((REPO_ROOT / "pretrained").glob("*")):
            try:
                other = _read_weights(str(folder / "card.json"))
            except (OSError, ValueError):
                continue
            if other.get("name") == card.get("name") and other.get("parameters") == card.get("parameters"):
                candidates.append(folder / WEIGHTS_FILE)
    for path in candidates:
        if path.is_file():
            return _read_weights(str(path))
    from .diagnosis_default import DEFAULT
    return DEFAULT


def _spans(scores: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, s in enumerate(list(scores) + [-1.0]):
        if s >= threshold and start is None:
            start = i
        elif s < threshold and start is not None:
            spans.append((start, i))
            start = None
    return spans


def combine(sig: Signals, weights: dict, item: Item | None = None) -> Diagnosis:
    f = features(sig)
    hallucination = _predict(weights["piece"], f["piece"]).astype(np.float32)
    omission = _predict(weights["source"], f["source"]).astype(np.float32)
    sentence = float(_predict(weights["sentence"], sentence_features(f, hallucination)[None])[0])
    threshold = float(weights.get("threshold", 0.5))
    raw = f["raw"]
    flags = []
    for a, b in _spans(hallucination, threshold):
        flags.append(Flag("hallucination", a, b, float(hallucination[a:b].max()), {
            "pieces": list(item.output_pieces[a:b]) if item else [],
            "mean_log_p": float(raw["log_p"][a:b].mean()),
            "mean_source_gain": float(raw["pmi"][a:b].mean()),
            "explains": "low probability, and the source adds little over the prefix alone (pmi, nats)"}))
    for a, b in _spans(omission, threshold):
        flags.append(Flag("omission", a, b, float(omission[a:b].max()), {
            "pieces": list(item.source_pieces[a:b]) if item else [],
            "deletion_drop": float(raw["deletion_drop"][a:b].max()),
            "explains": "deleting these source words barely changes log p(translation) (nats)"}))
    return Diagnosis(sentence, hallucination, omission, flags,
                     signals={k: v.astype(np.float32) for k, v in raw.items()})


def item_of(tr, out) -> Item:
    """The Item a Translation describes (its source ids, fed start token and output ids)."""
    fed = tr.tokenizer.piece_ids(out.target_tokens[:1]) + list(out.output_ids[:-1])
    return Item(list(out.source_ids), fed, list(out.output_ids), list(out.source_tokens), list(out.output_tokens))


def diagnose_items(tr, items: list[Item], head_mask=None, weights: dict | None = None,
                   budget: int | None = None, bf16: bool = False) -> list[Diagnosis]:
    """Many sentences at once (the forced passes of all of them share batches); bf16: faster
    passes under bfloat16 autocast (the CLI's --bf16), scores within a few 1e-2 of float32."""
    for it in items:
        if not it.output_ids or not it.source_ids:
            raise ValueError("diagnosis needs at least one source piece and one output piece")
    weights = weights or weights_for(tr)
    signals = compute_signals(tr, items, tr._gates(head_mask), budget, bf16)
    return [combine(sig, weights, it) for sig, it in zip(signals, items)]


def diagnose(tr, out, head_mask=None, weights: dict | None = None) -> Diagnosis:
    """The Diagnosis of one Translation (free or forced, ours or Hugging Face)."""
    return diagnose_items(tr, [item_of(tr, out)], head_mask, weights)[0]
