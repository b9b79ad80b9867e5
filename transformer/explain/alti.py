"""Re-run a translation from the weights and split every attention block into per-token vectors.

Norm-based attention (Kobayashi et al., 2020): head h moves f_h(x_j) = W_O^h (W_V^h x_j + b_V^h)
from token j to token i, scaled by α_hij, where W_O^h is the output projection restricted to
head h's columns; ‖α_hij f_h(x_j)‖ says how much actually moved, not only how much was looked at.
Their layer-level score is ‖Σ_h α_hij f_h(x_j)‖ (heads can cancel), kept as `layer_norms`.

ALTI (Ferrando et al., 2022a) and ALTI+ (Ferrando et al., 2022b), as their reference code
(mt-upc/transformer-contributions-nmt) computes them: a block's output is exactly
    y_i = Σ_j T_i(x_j) + b_i.
T_i(x_j) is Σ_h α_hij f_h(x_j) plus, for j = i (self-attention) or for the residual input
(cross-attention), the residual x_i; post-LN blocks pass that sum through their norm made linear
per token by fixing its scale (LayerNorm: the std σ_i of z_i, exact, with eps inside the root;
RMSNorm: the rms of z_i). b_i gathers what no token owns: the output projection's bias (post-LN:
centred and over σ_i, plus LayerNorm's β). The value bias b_V rides inside f_h, since each
attention row sums to 1. Each contribution is measured against the WHOLE resultant y_i, biases
included, as the authors define it:
    c_ij = max(0, ‖y_i‖₁ - ‖y_i - T_i(x_j)‖₁), normalised over j.
A token whose T_i(x_j) is the zero vector (an ablated head's keys, every key when all heads are
off) gets exactly ‖y_i‖₁ - ‖y_i‖₁ = 0, so the source share is exactly 0 with every cross-attention
head switched off. Feed-forward blocks and final norms are token-wise: they mix nothing, so
rollout passes through them unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .model_view import Attention, ModelView


@dataclass
class BlockParts:
    """One attention block's decomposition, for tests and for anyone who wants the vectors."""
    kind: str
    layer: int
    attention: torch.Tensor      # (Tq, Tk, D) Σ_h α_hij f_h(x_j): Σ_j of it + out bias = the attention output
    parts: torch.Tensor          # (Tq, Tk', D) T_i(x_j); cross: Tk' = S + 1, the last one the residual
    bias: torch.Tensor           # (Tq, D) b_i, owned by no token
    output: torch.Tensor         # (Tq, D) the block's output y_i, as the forward computed it


@dataclass
class Decomposition:
    logits: torch.Tensor                 # (T, V)
    norms: dict                          # kind -> (layers, H, Tq, Tk) ‖α_hij f_h(x_j)‖
    layer_norms: dict                    # kind -> (layers, Tq, Tk) ‖Σ_h α_hij f_h(x_j)‖
    encoder_rollout: torch.Tensor        # (S, S) ALTI: encoder output j <- source token k
    decoder_rollout: torch.Tensor        # (T, S + T) ALTI+: step t <- [source tokens | prefix tokens]
    blocks: list = field(default_factory=list)   # BlockParts, when asked for
    saliency: tuple | None = None        # ((T, S), (T, T)) unnormalised |grad × input|, when asked for


def _gate(gates, a: Attention):
    return None if gates is None else gates[a.kind][a.layer]


def attend(a: Attention, q_in, kv_in, mask, gate):
    """Multi-head attention as the model computes it. Returns (output (B, Tq, D),
    weights (B, H, Tq, Tk), values (B, H, Tk, dh))."""
    B, Tq, D = q_in.shape
    H = a.n_heads
    q = F.linear(q_in, a.q.weight, a.q.bias).view(B, Tq, H, -1).transpose(1, 2)       # (B, H, Tq, dh)
    k = F.linear(kv_in, a.k.weight, a.k.bias).view(B, kv_in.shape[1], H, -1).transpose(1, 2)
    v = F.linear(kv_in, a.v.weight, a.v.bias).view(B, kv_in.shape[1], H, -1).transpose(1, 2)
    scores = (q * a.scale) @ k.transpose(-2, -1)                                      # (B, H, Tq, Tk)
    if a.position_bias is not None:                    # T5: relative position bias, (H, Tq, Tk)
        scores = scores + a.position_bias(Tq, k.shape[2], scores.device).to(scores.dtype)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = weights @ v                                                             # (B, H, Tq, dh)
    if gate is not None:
        context = context * gate.to(context.dtype).view(1, -1, 1, 1)
    out = F.linear(context.transpose(1, 2).reshape(B, Tq, -1), a.out.weight, a.out.bias)   # H·dh may not be D (T5)
    return out, weights, v


def attention_block(view: ModelView, a: Attention, x, kv, mask, gate, on_block=None):
    """Residual + norm around attention: pre-LN x + A(LN(x)), post-LN LN(x + A(x)).
    Cross-attention reads `kv` (the encoder output) as it is; self-attention reads its own input."""
    h = a.norm(x) if view.norm_first else x
    out, weights, v = attend(a, h, h if a.kind != "cross" else kv, mask, gate)
    z = x + out
    y = z if view.norm_first else a.norm(z)
    if on_block is not None:
        on_block(a, x, z, y, weights, v, gate)
    return y


def ffn_block(view: ModelView, f, x):
    return x + f.fn(f.norm(x)) if view.norm_first else f.norm(x + f.fn(x))


def run(view: ModelView, e_source, e_target, gates=None, on_block=None, keep=None):
    """The whole model from scaled token embeddings (B, S, D), (B, T, D): the decoder's last
    hidden state (B, T, D), before its final norm and the output projection. keep (B, S) bool,
    True on real source pieces, masks padded keys (corpus_pass.py); None: no padding. Padding sits
    after each row's real pieces, so the causal mask keeps every real target position exact."""
    pad = None if keep is None else keep[:, None, None, :]                            # (B, 1, 1, S)
    x = view.encoder_input(e_source)
    for attention, feed_forward in view.encoder:
        x = attention_block(view, attention, x, x, pad, _gate(gates, attention), on_block)
        x = ffn_block(view, feed_forward, x)
    memory = view.encoder_final(x)                                                    # (B, S, D)
    T = e_target.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=e_target.device).tril()[None, None]   # (1, 1, T, T)
    h = view.decoder_input(e_target)
    for self_attention, cross, feed_forward in view.decoder:
        h = attention_block(view, self_attention, h, h, causal, _gate(gates, self_attention), on_block)
        h = attention_block(view, cross, h, memory, pad, _gate(gates, cross), on_block)
        h = ffn_block(view, feed_forward, h)
    return h


def alti_contributions(parts: torch.Tensor, resultant: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """parts (Tq, Tk, D) T_i(x_j) and the whole resultant y_i (Tq, D), biases included ->
    c_ij = max(0, ‖y_i‖₁ - ‖y_i - T_i(x_j)‖₁) / Σ_j (Tq, Tk), rows summing to 1. A row where every
    c_ij is 0 (the authors' code would divide 0 by 0) goes wholly to `own` (Tq,), the index of
    the query's own/residual input: the residual stream is what passes on when nothing else does."""
    distance = (resultant[:, None] - parts).abs().sum(-1)                             # (Tq, Tk)
    c = (resultant.abs().sum(-1, keepdim=True) - distance).clamp(min=0)
    total = c.sum(-1, keepdim=True)
    empty = total[:, 0] <= 0
    if empty.any():
        c[empty] = 0
        c[empty, own[empty]] = 1
        total = c.sum(-1, keepdim=True)
    return c / total


def linearise_norm(norm, z, parts, bias):
    """A post-LN block's norm made linear per token, its scale fixed from z (Tq, D), the input
    it normalised: parts (Tq, Tk, D) and bias (Tq, D) as they come out of it. LayerNorm centres,
    divides by the exact std σ_i = sqrt(var(z_i) + eps) and adds β (to the bias: no token owns
    it); RMSNorm (T5) only divides by rms_i = sqrt(mean(z_i²) + eps): no centring, no β."""
    gamma = norm.weight if norm.weight is not None else torch.ones_like(bias[0])
    if isinstance(norm, torch.nn.LayerNorm):
        sigma = (z.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()             # (Tq, 1)
        beta = norm.bias if norm.bias is not None else torch.zeros_like(bias[0])
        parts = gamma * (parts - parts.mean(-1, keepdim=True)) / sigma[:, None]
        return parts, gamma * (bias - bias.mean(-1, keepdim=True)) / sigma + beta
    eps = getattr(norm, "variance_epsilon", None)
    if eps is None:
        eps = getattr(norm, "eps", None) or 1e-6
    rms = (z.float().pow(2).mean(-1, keepdim=True) + eps).sqrt().to(z.dtype)           # (Tq, 1)
    return gamma * parts / rms[:, None], gamma * bias / rms


def block_parts(a: Attention, x, z, weights, v, gate, norm_first: bool):
    """One attention block's output y_i as a sum over its inputs, batched (B, the sentences of a
    pass): x, z (B, Tq, D) the block's residual input and the sum its post-LN norm normalised,
    weights (B, H, Tq, Tk), v (B, H, Tk, dh). Returns
      fv (B, H, Tk, D)      f_h(x_j), each head's output projection of key j's value, gated;
      moved (B, Tq, Tk, D)  Σ_h α_hij f_h(x_j) (Kobayashi et al. 2020);
      parts (B, Tq, K, D)   T_i(x_j) (ALTI+): a cross block's residual as one more part (K = Tk + 1),
                            a self block's added to token i's own (K = Tk), through a post-LN norm
                            made linear (linearise_norm);
      bias (B, Tq, D), own (B, Tq): each row's own/residual part.
    The one decomposition behind decompose (one sentence) and analysis/corpus_pass (a batch)."""
    B, H, Tk, dh = v.shape
    Tq, D = x.shape[1], x.shape[-1]
    fv = torch.einsum("bhkd,ehd->bhke", v, a.out.weight.view(D, H, dh))                # (B, H, Tk, D)
    if gate is not None:
        fv = fv * gate.to(fv.dtype).view(1, -1, 1, 1)
    moved = torch.einsum("bhij,bhjd->bijd", weights, fv)                                # (B, Tq, Tk, D)
    rows = torch.arange(Tq, device=x.device)
    if a.kind == "cross":
        parts = torch.cat([moved, x[:, :, None, :]], dim=2)                             # (B, Tq, S + 1, D)
        own = torch.full((B, Tq), Tk, device=x.device)
    else:
        parts = moved.clone()
        parts[:, rows, rows] += x                                                       # the residual is token i's own
        own = rows.expand(B, Tq)
    bias = a.out.bias if a.out.bias is not None else torch.zeros(D, dtype=x.dtype, device=x.device)
    bias = bias.expand(B, Tq, D)
    if not norm_first:                              # norm(Σ_j t_j + b), linear given z_i's scale
        flat, flat_bias = linearise_norm(a.norm, z.reshape(B * Tq, D), parts.reshape(B * Tq, -1, D),
                                         bias.reshape(B * Tq, D))
        parts, bias = flat.view(B, Tq, -1, D), flat_bias.view(B, Tq, D)
    return fv, moved, parts, bias, own


def block_contributions(parts, bias, own) -> torch.Tensor:
    """ALTI+ contributions (B, Tq, K) of block_parts' parts to their resultant, y_i = Σ_j T_i(x_j) + b."""
    B, Tq, K, D = parts.shape
    flat = parts.reshape(B * Tq, K, D)
    resultant = flat.sum(1) + bias.reshape(B * Tq, D)                                   # (B·Tq, D) = y_i
    return alti_contributions(flat, resultant, own.reshape(-1)).view(B, Tq, K)


class _Collector:
    """on_block callback: decomposes each block of one sentence (B = 1) as the forward passes."""

    def __init__(self, view: ModelView, keep_blocks: bool):
        self.view, self.keep_blocks = view, keep_blocks
        self.norms = {"encoder_self": [], "decoder_self": [], "cross": []}
        self.layer_norms = {"encoder_self": [], "decoder_self": [], "cross": []}
        self.contributions: list[tuple[str, torch.Tensor]] = []
        self.blocks: list[BlockParts] = []

    @torch.no_grad()
    def __call__(self, a: Attention, x, z, y, weights, v, gate):
        x, z, y, weights, v = (t.detach() for t in (x, z, y, weights, v))
        fv, moved, parts, bias, own = block_parts(a, x, z, weights, v, gate, self.view.norm_first)
        self.norms[a.kind].append(weights[0] * fv[0].norm(dim=-1)[:, None, :])          # (H, Tq, Tk)
        self.layer_norms[a.kind].append(moved[0].norm(dim=-1))                          # (Tq, Tk)
        self.contributions.append((a.kind, block_contributions(parts, bias, own)[0]))   # (Tq, K)
        if self.keep_blocks:
            self.blocks.append(BlockParts(a.kind, a.layer, moved[0], parts[0], bias[0], y[0]))


def decompose(view: ModelView, source, fed, gates=None, keep_blocks: bool = False,
              output_ids: list[int] | None = None) -> Decomposition:
    """One teacher-forced pass over source (1, S) and fed (1, T) ids, decomposed block by block,
    with ALTI rollout: the encoder's first, then the decoder's over [source | prefix] tokens.
    With output_ids, the same pass also gives saliency (see `_saliency`)."""
    collect = _Collector(view, keep_blocks)
    want_grad = output_ids is not None
    with torch.enable_grad() if want_grad else torch.no_grad():
        e_source = view.source_embedding(source).detach().requires_grad_(want_grad)   # (1, S, D)
        e_target = view.target_embedding(fed).detach().requires_grad_(want_grad)      # (1, T, D)
        hidden = run(view, e_source, e_target, gates, collect)                        # (1, T, D)
        top = hidden.detach().requires_grad_(want_grad)
        logits = view.logits(top)[0]                                                  # (T, V)
        scores = _saliency(logits, output_ids, hidden, top, e_source, e_target) if want_grad else None
    logits = logits.detach()
    S, T = source.shape[1], fed.shape[1]
    kw = dict(dtype=logits.dtype, device=logits.device)
    enc = torch.eye(S, **kw)                                                          # (S, S)
    dec = torch.cat([torch.zeros(T, S, **kw), torch.eye(T, **kw)], dim=1)             # (T, S + T)
    for kind, c in collect.contributions:
        c = c.to(logits.dtype)
        if kind == "encoder_self":
            enc = c @ enc
        elif kind == "decoder_self":
            dec = c @ dec
        else:                                          # memory j carries enc[j]; the residual carries dec
            from_source = torch.cat([c[:, :S] @ enc, torch.zeros(T, T, **kw)], dim=1)
            dec = from_source + c[:, S:] * dec
    norms = {kind: torch.stack(v) for kind, v in collect.norms.items()}
    layer_norms = {kind: torch.stack(v) for kind, v in collect.layer_norms.items()}
    return Decomposition(logits, norms, layer_norms, enc, dec, collect.blocks, scores)


def _saliency(logits, output_ids, hidden, top, e_source, e_target):
    """|gradient × input| of log p(output piece t) w.r.t. the scaled token embeddings (before
    positions), summed over the embedding dim: (source (T, S), prefix (T, T)), unnormalised; the
    prefix is causal. It reuses the decomposition's forward. The final norm and output projection
    are token-wise, so one plain backward gives g_t = d log p_t / d hidden_t for every t at once;
    then one backward through the layers, batched over the T steps (`is_grads_batched`), carries
    each g_t alone (grad_outputs row t is g_t at position t, zero elsewhere)."""
    T = logits.shape[0]
    chosen = torch.as_tensor(output_ids, device=logits.device)[:, None]
    log_p = torch.log_softmax(logits.float(), dim=-1).gather(1, chosen)               # (T, 1)
    (g_top,) = torch.autograd.grad(log_p.sum(), top)                                  # (1, T, D)
    steps = torch.arange(T, device=hidden.device)
    seeds = torch.zeros((T,) + tuple(hidden.shape), dtype=hidden.dtype, device=hidden.device)   # (T, 1, T, D)
    seeds[steps, 0, steps] = g_top[0]
    inputs = (e_source, e_target)
    try:
        g_source, g_target = torch.autograd.grad(hidden, inputs, grad_outputs=seeds, is_grads_batched=True)
    except RuntimeError:                             # an op without a batching rule: one step at a time
        grads = [torch.autograd.grad(hidden, inputs, grad_outputs=seeds[t], retain_graph=True) for t in range(T)]
        g_source, g_target = (torch.stack([g[i] for g in grads]) for i in range(2))
    with torch.no_grad():                            # (T, 1, n, D) gradients times (1, n, D) inputs
        return ((g_source[:, 0] * e_source[0]).abs().sum(-1),                          # (T, S)
                (g_target[:, 0] * e_target[0]).abs().sum(-1).tril())                   # (T, T)
