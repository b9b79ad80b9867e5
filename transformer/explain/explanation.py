"""`translate(..., explain=True)`: what moved information, not only what was looked at.

The explanation describes the run `out.attention` describes (same tokens; the returned beam
hypothesis; a forced target; an ablated run), computed from one teacher-forced pass over the
final output, which equals cached decoding (tests/test_capture.py), plus one backward for
saliency. All state is local to the call. See `alti.py` for the maths: ALTI+ measures every
contribution against the whole block output, biases included, as Ferrando et al. define it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .alti import decompose
from ..capture import no_capture
from ..interventions import intervening
from .model_view import model_view


@dataclass
class Explanation:
    """Rows are output steps (the piece produced at t), like `attention.cross` (api.md)."""
    norm_encoder_self: np.ndarray     # float32 (Le, H, S, S) ‖α_hij f_h(x_j)‖, Kobayashi et al. 2020
    norm_decoder_self: np.ndarray     # float32 (Ld, H, T, T), zero above the diagonal
    norm_cross: np.ndarray            # float32 (Ld, H, T, S); an ablated head moves nothing: 0
    norm_cross_layer: np.ndarray      # float32 (Ld, T, S) ‖Σ_h α_hij f_h(x_j)‖, Kobayashi et al.'s per-layer score
    source_share: np.ndarray          # float32 (T,) = source_contribution.sum(1), ALTI+
    source_contribution: np.ndarray   # float32 (T, S) ALTI+; with prefix_contribution each row sums to 1
    prefix_contribution: np.ndarray   # float32 (T, T) over target_tokens (what was fed), lower-triangular
    saliency_source: np.ndarray       # float32 (T, S) |grad × input| of log p(output t), each row sums to 1
    saliency_prefix: np.ndarray       # float32 (T, T) the same over the fed prefix, each row sums to 1
    saliency_source_share: np.ndarray  # float32 (T,) source / (source + prefix) before the rows were normalised
    encoder_contribution: np.ndarray  # float32 (S, S) ALTI rollout of the encoder: output j <- source k
    logits_check: float = 0.0         # max |recomputed - model logits|: the re-run matches the model

    def get_norm(self, kind: str) -> np.ndarray:
        return {"encoder_self": self.norm_encoder_self, "decoder_self": self.norm_decoder_self,
                "cross": self.norm_cross}[kind]


def _rows_to_one(scores: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum; an all-zero row (no gradient at all) stays zero."""
    total = scores.sum(-1, keepdim=True)
    return torch.where(total > 0, scores / total.clamp(min=1e-30), scores)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float32)


def explain_run(translator, source_ids: list[int], fed_ids: list[int], output_ids: list[int],
                gates=None, reference_logits: torch.Tensor | None = None) -> Explanation:
    """Everything in `Explanation` for one run: source ids (S,), fed ids (T,) (start token, then
    outputs[:-1]), output ids (T,), the run's head gates. Saliency's input is the scaled token
    embedding before positions (what `out.source_embeddings` holds), so the score of a piece is
    the first-order effect of removing its embedding; |g·e| is summed over the embedding dim.
    Each of saliency_source and saliency_prefix is normalised on its own (api.md: rows sum to 1);
    saliency_source_share keeps the balance between them."""
    view = model_view(translator)
    device = translator.device
    # translate() runs under inference_mode; autograd needs ordinary tensors made here.
    with torch.inference_mode(False), no_capture():
        source = torch.tensor([source_ids], dtype=torch.long, device=device)          # (1, S)
        fed = torch.tensor([fed_ids], dtype=torch.long, device=device)                # (1, T)
        if gates is not None:                                  # made under inference_mode: copy
            gates = {kind: g.clone() for kind, g in gates.items()}
        parts = decompose(view, source, fed, gates, output_ids=output_ids)
    sal_source, sal_prefix = parts.saliency                                           # (T, S), (T, T)
    S = len(source_ids)
    rollout = parts.decoder_rollout                                                   # (T, S + T)
    source_contribution, prefix_contribution = rollout[:, :S], rollout[:, S:].tril()
    both = sal_source.sum(-1) + sal_prefix.sum(-1)
    check = 0.0
    if reference_logits is not None:
        check = float((parts.logits.float() - reference_logits.float().to(parts.logits.device)).abs().max())
    return Explanation(
        norm_encoder_self=_np(parts.norms["encoder_self"]), norm_decoder_self=_np(parts.norms["decoder_self"]),
        norm_cross=_np(parts.norms["cross"]), norm_cross_layer=_np(parts.layer_norms["cross"]),
        source_share=_np(source_contribution.sum(-1)),
        source_contribution=_np(source_contribution), prefix_contribution=_np(prefix_contribution),
        saliency_source=_np(_rows_to_one(sal_source)), saliency_prefix=_np(_rows_to_one(sal_prefix)),
        saliency_source_share=_np(torch.where(both > 0, sal_source.sum(-1) / both.clamp(min=1e-30), both)),
        encoder_contribution=_np(parts.encoder_rollout), logits_check=check)


def method_scores(out) -> dict[str, np.ndarray]:
    """Per method, a (T, S) source-importance map with rows summing to 1, for comparing methods:
    raw cross-attention (mean over layers and heads), norm-based cross-attention as Kobayashi et
    al. score a layer, ‖Σ_h α_hij f_h(x_j)‖ (heads may cancel, so not the sum of per-head norms),
    mean over layers; ALTI+ source contribution; and saliency."""
    ex = out.explanation
    if ex is None or out.attention is None:
        raise ValueError("method_scores needs a translation made with capture=True and explain=True")

    def rows(a: np.ndarray) -> np.ndarray:
        total = a.sum(-1, keepdims=True)
        return np.divide(a, total, out=np.zeros_like(a), where=total > 0).astype(np.float32)

    return {"attention": rows(out.attention.cross.mean(axis=(0, 1))),
            "norm": rows(ex.norm_cross_layer.mean(axis=0)),
            "alti+": rows(ex.source_contribution),
            "saliency": rows(ex.saliency_source)}


def explain_of(tr, out, call) -> Explanation:
    """The analysis (transformer/analyses.py): out's Explanation under its head_mask. logits_check
    compares the re-run against the call's own logits, or, for a translation made earlier, against
    the engine's teacher-forced pass over it."""
    fed_ids = [tr.engine.start_id] + list(out.output_ids[:-1])
    gates, reference = tr.gates(out.head_mask), call.logits
    if reference is None:
        fed = torch.tensor([fed_ids], device=tr.device)
        with torch.inference_mode(), no_capture(), intervening(None, gates):
            reference = tr.engine.teacher_forced(torch.tensor([out.source_ids], device=tr.device), None, fed)[0]
    return explain_run(tr, out.source_ids, fed_ids, out.output_ids, gates, reference_logits=reference)
