"""Why this piece rather than that one: contrastive saliency (Yin and Neubig, 2022).

"Interpreting Language Models with Contrastive Explanations" (EMNLP 2022) explains why a model
predicted the target y_t rather than a foil y_f by taking the usual saliency methods' gradient of
the difference of the two output scores instead of the target's score alone:
    g*(x_i) = ∇_{x_i} ( q(y_t | x) − q(y_f | x) )
    contrastive gradient × input   S*_GI(x_i) = g*(x_i) · x_i          (signed)
    contrastive gradient norm      S*_GN(x_i) = ‖g*(x_i)‖_L1
where x_i is input token i's embedding and q is the output logit (their code differentiates
logits[target] − logits[foil]); log p(y_t) − log p(y_f) is the same difference, the softmax's
normaliser cancels. A positive S*_GI says token i pushes the model towards the chosen piece and
away from the alternative. For an encoder-decoder both the source pieces and the prefix pieces
fed so far are inputs; their code scores the two sides separately (its `normalize` divides each
side by its own L1 norm), and so does this module (`normalized`).

The pass is `alti.run` on the model description `explain_views.model_view` gives, the very path
translate(explain=True) uses, so it works for our models and every family explain supports.
The input is the scaled token embedding before positions (like `out.source_embeddings`); scaling
is linear, so g·x is the same as for the unscaled table row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .alti import run
from ..capture import no_capture
from .model_view import model_view


@dataclass(frozen=True)
class Contrast:
    """One step's "why `chosen` rather than `alternative`". Rows follow the Translation's axes:
    `source` over out.source_tokens, `prefix` over out.target_tokens[: step + 1] (what was fed)."""
    step: int
    chosen: str
    alternative: str
    margin: float                 # log p(chosen) − log p(alternative) at this step (> 0: chosen is likelier)
    source: np.ndarray            # float32 (S,) S*_GI, signed: > 0 favours `chosen` over `alternative`
    prefix: np.ndarray            # float32 (step + 1,) the same over the fed prefix
    source_norm: np.ndarray       # float32 (S,) S*_GN = ‖g*‖_L1
    prefix_norm: np.ndarray       # float32 (step + 1,)

    def normalized(self) -> tuple[np.ndarray, np.ndarray]:
        """(source, prefix) S*_GI each divided by its own L1 norm, as the authors' code shows them."""
        def by_l1(a):
            total = float(np.abs(a).sum())
            return a / total if total > 0 else a
        return by_l1(self.source), by_l1(self.prefix)


def contrastive_saliency(translator, out, step: int, alternative: str, chosen: str | None = None,
                         head_mask=None) -> Contrast:
    """Contrastive gradient × input and gradient norm of log p(chosen) − log p(alternative) at
    output step `step` of the translation `out` (a Translation, or anything with its
    source_tokens, target_tokens and output_tokens), w.r.t. the source and fed prefix pieces.

    `chosen` defaults to the piece the run produced at that step. `head_mask` as in translate()
    (give the one the run was made with). ValueError: a step outside the output, a piece the
    vocabulary does not have, chosen equal to alternative, or a family explain does not support."""
    T = len(out.output_tokens)
    if not isinstance(step, (int, np.integer)) or not 0 <= step < T:
        raise ValueError(f"step must be in 0..{T - 1}, got {step!r}")
    chosen = out.output_tokens[step] if chosen is None else chosen
    if chosen == alternative:
        raise ValueError(f"the alternative must differ from the chosen piece ({chosen!r})")
    view = model_view(translator)                       # ValueError for an unsupported family
    tokenizer = translator.engine.tokenizer
    source_ids = tokenizer.piece_ids(list(out.source_tokens))
    fed_ids = tokenizer.piece_ids(list(out.target_tokens[: step + 1]))
    chosen_id, alternative_id = tokenizer.piece_ids([chosen, alternative])
    gates = translator.gates(head_mask)
    device = translator.device
    with torch.inference_mode(False), no_capture(), torch.enable_grad():
        if gates is not None:                           # possibly made under inference_mode: copy
            gates = {kind: g.clone() for kind, g in gates.items()}
        source = torch.tensor([source_ids], dtype=torch.long, device=device)            # (1, S)
        fed = torch.tensor([fed_ids], dtype=torch.long, device=device)                  # (1, step + 1)
        e_source = view.source_embedding(source).detach().requires_grad_(True)         # (1, S, D)
        e_target = view.target_embedding(fed).detach().requires_grad_(True)           # (1, step + 1, D)
        hidden = run(view, e_source, e_target, gates)                                   # (1, step + 1, D)
        log_p = torch.log_softmax(view.logits(hidden[:, -1:])[0, -1].float(), dim=-1)   # (V,)
        margin = log_p[chosen_id] - log_p[alternative_id]
        g_source, g_target = torch.autograd.grad(margin, (e_source, e_target))
    with torch.no_grad():
        def numpy(t):
            return t.detach().float().cpu().numpy().astype(np.float32)
        return Contrast(
            step=int(step), chosen=chosen, alternative=alternative, margin=float(margin),
            source=numpy((g_source[0] * e_source[0]).sum(-1)), prefix=numpy((g_target[0] * e_target[0]).sum(-1)),
            source_norm=numpy(g_source[0].abs().sum(-1)), prefix_norm=numpy(g_target[0].abs().sum(-1)))
