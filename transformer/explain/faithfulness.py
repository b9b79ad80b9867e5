"""Which explanation tells the truth? Perturb what a method ranks highest and watch p fall.

`perturbation_test` drops the top-1 and top-3 source pieces a method ranks highest for each
output step and re-runs forced decoding of the same output: a faithful method's top pieces
should cost the chosen piece the most probability. "Dropping" replaces the piece's id with
<unk> and keeps every other piece at its position: removing pieces would shift every later
position and change the length, which confounds the test with positional effects; <unk> is the
model's own "no information here" piece. Special pieces (</s>, language codes) are never
dropped. `rank_correlations` compares methods' rankings per step (Spearman, numpy only).
"""
from __future__ import annotations

import numpy as np

from ..forced import forced_pass
from .explanation import method_scores


def _forced_probs(tr, sources: list[list[int]], fed_ids: list[int], output_ids: list[int], gates) \
        -> tuple[np.ndarray, np.ndarray]:
    """For each perturbed source, one forced pass (forced.py): p(output piece t | prefix) and the
    argmax piece at each step, (N, T) each; only these two leave each batch."""
    def reduce(batch) -> list:
        chosen = batch.log_probs.gather(-1, batch.gold.unsqueeze(-1)).squeeze(-1).exp().cpu().numpy()  # (B, T)
        argmax = batch.log_probs.argmax(-1).cpu().numpy()                                              # (B, T)
        return list(zip(chosen, argmax))
    results = forced_pass(tr, [(s, fed_ids, output_ids) for s in sources], reduce, gates)
    return np.stack([p for p, _ in results]), np.stack([a for _, a in results])


def perturbation_test(tr, out, scores: dict | None = None, ks=(1, 3), head_mask=None,
                      random_baseline: bool = True, seed: int = 0):
    """One row per (method, output step, k): the k source pieces the method ranks highest for
    that step become <unk>, the same output is forced again, and p(chosen piece) is compared.

    out: a Translation (its source_ids, output_ids and fed pieces); scores: {method: (T, S)}, by
    default `method_scores(out)` (raw attention, norm-based, ALTI+, saliency); head_mask: the
    run's ablation, if any, applied to the re-runs too; random_baseline adds a "random" method
    (seeded) to compare against. Returns a pandas DataFrame with columns method, step, k,
    dropped (source positions), p_before, p_after, drop (p_before - p_after), argmax_changed.
    """
    import pandas as pd
    scores = dict(method_scores(out) if scores is None else scores)
    source, output = list(out.source_ids), list(out.output_ids)
    T, S = len(output), len(source)
    fed = tr.engine.tokenizer.piece_ids(out.target_tokens[:1]) + output[:-1]
    special = tr.engine.special_ids
    candidates = np.array([j for j, i in enumerate(source) if i not in special])
    if random_baseline:
        rng = np.random.default_rng(seed)
        scores["random"] = rng.random((T, S))
    for name, s in scores.items():
        if np.shape(s) != (T, S):
            raise ValueError(f"scores[{name!r}] has shape {np.shape(s)}, expected (T, S) = ({T}, {S})")
    plans, variants = [], {tuple(source): 0}
    unk = tr.engine.unk_id
    for name, s in scores.items():
        for t in range(T):
            row = np.asarray(s[t], dtype=np.float64)[candidates]
            order = candidates[np.argsort(-row, kind="stable")]                         # best first
            for k in ks:
                dropped = sorted(int(j) for j in order[:k])
                ids = [unk if j in dropped else i for j, i in enumerate(source)]
                index = variants.setdefault(tuple(ids), len(variants))
                plans.append((name, t, int(k), dropped, index))
    probs, argmax = _forced_probs(tr, [list(v) for v in variants], fed, output, tr.gates(head_mask))  # (N, T)
    rows = []
    for name, t, k, dropped, index in plans:
        rows.append(dict(method=name, step=t, k=k, dropped=dropped, p_before=float(probs[0, t]),
                         p_after=float(probs[index, t]), argmax_changed=bool(argmax[index, t] != argmax[0, t])))
    frame = pd.DataFrame(rows)
    frame.insert(6, "drop", frame.p_before - frame.p_after)
    return frame


def perturbation_summary(frame):
    """Per method and k: mean fall of p(chosen piece), and how often the argmax piece changed."""
    return (frame.groupby(["method", "k"], sort=False)
            .agg(mean_drop=("drop", "mean"), flip_rate=("argmax_changed", "mean"), steps=("step", "count"))
            .reset_index())


def average_ranks(values) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank (as scipy.stats.rankdata)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(a, b) -> float:
    """Spearman's rank correlation of two equal-length vectors; nan when either is constant."""
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator > 0 else float("nan")


def rank_correlations(scores: dict, positions=None):
    """Per output step and pair of methods, Spearman's rho between their (T, S) rows; positions
    limits the columns compared (e.g. leave out </s>). Returns a pandas DataFrame with columns
    step, method_a, method_b, spearman."""
    import pandas as pd
    names = list(scores)
    arrays = {n: np.asarray(scores[n], dtype=np.float64) for n in names}
    T = arrays[names[0]].shape[0]
    cols = slice(None) if positions is None else list(positions)
    rows = [dict(step=t, method_a=a, method_b=b, spearman=spearman(arrays[a][t, cols], arrays[b][t, cols]))
            for t in range(T) for i, a in enumerate(names) for b in names[i + 1:]]
    return pd.DataFrame(rows, columns=["step", "method_a", "method_b", "spearman"])
