"""Every head's attention, norm-based scores and ALTI+ over a corpus, many pairs per pass.

`forced.forced_pass` hands out log-probabilities only (it runs without capture), and
`explain.explain_run` decomposes one sentence at a time (about 50 ms each). Head roles need both
kinds of evidence for a thousand pairs, so this runs the model from its weights through
`explain.model_view` (any family explain supports) and alti.run's walk, on padded batches planned
as forced.py plans them, with key-padding masks, and decomposes every block of the whole batch at
once: per-head weights (every kind), Kobayashi et al.'s per-layer norm score ‖Σ_h α_hij f_h(x_j)‖
for cross-attention, and ALTI+ (Ferrando et al. 2022) rolled out over [source | prefix], with
alti.py's maths. A padded key has weight 0, so it moves nothing and contributes exactly 0.
tests/test_head_roles.py checks that B = 1 equals explain_run and that padding changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..capture import KINDS, no_capture
from ..explain.alti import block_contributions, block_parts, run
from ..explain.model_view import model_view
from ..forced import Row, plan_chunks


@dataclass
class PassBatch:
    """One padded batch, everything on the CPU in float32. Rows past a pair's lengths are padding."""
    rows: list                    # indices into the caller's pairs
    source: np.ndarray            # (B, S) ids
    fed: np.ndarray               # (B, T) ids
    source_len: list
    target_len: list
    weights: dict                 # kind -> (B, L, H, Tq, Tk)
    norm_layer: np.ndarray | None  # (B, L, T, S) ‖Σ_h α f_h(x_j)‖ of cross-attention
    alti: np.ndarray | None       # (B, T, S) ALTI+ source contributions
    logits: torch.Tensor | None = None   # (B, T, V) the re-run's logits (tests compare them to the model's)


class _Collector:
    """on_block callback over a whole batch: weights of every block; with `decompose`, the
    cross norms and each block's ALTI contributions (B, Tq, Tk')."""

    def __init__(self, norm_first: bool, decompose: bool):
        self.norm_first, self.decompose = norm_first, decompose
        self.weights = {kind: [] for kind in KINDS}
        self.norm_layer: list = []
        self.contributions: list = []

    @torch.no_grad()
    def __call__(self, a, x, z, y, w, v, gate):
        self.weights[a.kind].append(w.float())                                        # (B, H, Tq, Tk)
        if not self.decompose:
            return
        _, moved, parts, bias, own = block_parts(a, x, z, w, v, gate, self.norm_first)
        if a.kind == "cross":
            self.norm_layer.append(moved.norm(dim=-1).float())                         # (B, Tq, Tk)
        self.contributions.append((a.kind, block_contributions(parts, bias, own).float()))   # (B, Tq, K)


def _rollout(contributions: list, B: int, S: int, T: int) -> torch.Tensor:
    """ALTI+ as alti.decompose rolls it out, batched: (B, T, S) source contributions."""
    kw = dict(dtype=torch.float32, device=contributions[0][1].device)
    enc = torch.eye(S, **kw).expand(B, S, S)                                           # (B, S, S)
    dec = torch.cat([torch.zeros(T, S, **kw), torch.eye(T, **kw)], dim=1).expand(B, T, S + T)
    for kind, c in contributions:
        if kind == "encoder_self":
            enc = c @ enc
        elif kind == "decoder_self":
            dec = c @ dec
        else:
            from_source = torch.cat([c[..., :S] @ enc, torch.zeros(B, T, T, **kw)], dim=-1)
            dec = from_source + c[..., S:] * dec
    return dec[..., :S]


@torch.inference_mode()
def corpus_pass(tr, pairs: list[tuple[list, list]], reduce: Callable[[PassBatch], None],
                decompose: bool = True, budget: int | None = None, progress=None,
                keep_logits: bool = False, gates=None) -> None:
    """pairs: (source_ids, output_ids); each output is forced (fed = start piece + output[:-1]).
    reduce(batch) is called once per padded batch (rows grouped by length, <= budget padded
    tokens); progress(n) after each. decompose=False: attention weights only (no norms, no ALTI+).
    gates: tr.gates(head_mask), None for all heads on."""
    view = model_view(tr)
    rows = [Row(list(s), [tr.engine.start_id] + list(o[:-1]), list(o)) for s, o in pairs]
    budget = budget or (20000 if tr.device.type == "cuda" else 1500)
    with no_capture():
        for chunk in plan_chunks(rows, budget):
            source, keep = tr.engine.batch([rows[r].source_ids for r in chunk])          # (B, S) each
            T = max(len(rows[r].fed_ids) for r in chunk)
            fed = torch.full((len(chunk), T), tr.engine.pad_id, dtype=torch.long)
            for b, r in enumerate(chunk):
                fed[b, : len(rows[r].fed_ids)] = torch.tensor(rows[r].fed_ids)
            fed = fed.to(tr.device)
            collect = _Collector(view.norm_first, decompose)
            e_source, e_target = view.source_embedding(source), view.target_embedding(fed)
            hidden = run(view, e_source, e_target, gates, collect, keep=keep)               # (B, T, D)
            B, S = source.shape
            weights = {kind: torch.stack(w, 1).cpu().numpy() for kind, w in collect.weights.items()}
            batch = PassBatch(
                chunk, source.cpu().numpy(), fed.cpu().numpy(), [len(rows[r].source_ids) for r in chunk],
                [len(rows[r].fed_ids) for r in chunk], weights,
                torch.stack(collect.norm_layer, 1).cpu().numpy() if decompose else None,
                _rollout(collect.contributions, B, S, T).cpu().numpy() if decompose else None,
                view.logits(hidden).float().cpu() if keep_logits else None)
            reduce(batch)
            if progress is not None:
                progress(len(chunk))
