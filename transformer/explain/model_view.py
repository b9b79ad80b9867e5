"""One description of a model's layers for the explanation code, whatever built the model.

`alti.forward` re-runs a translation from the weights, block by block, so it can split each
block's output into per-token vectors. It needs, per layer, the attention modules (q/k/v/out
projections), the norms and where they sit (pre-LN or post-LN), and the feed-forward function;
per side, how scaled token embeddings become the first layer's input. `model_view` reads these
from our `Transformer`, from a BART-like Hugging Face model (Marian, BART, mBART, M2M100/NLLB)
or from T5. T5 differs only where the description has room for it: RMSNorm (pre-LN, so it sits
before attention and needs no linearising), no biases (None), a relative position bias added to
the scores (it changes α only, which the decomposition takes as computed), no 1/sqrt(d) on the
scores (scale 1), a token-wise (gated or not) feed-forward, and decoder outputs scaled by
d_model^-0.5 before a tied lm_head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

EXPLAIN_FAMILIES = ("ours", "marian", "bart", "mbart", "m2m_100", "t5")


@dataclass(frozen=True)
class Attention:
    kind: str                    # "encoder_self" | "decoder_self" | "cross"
    layer: int
    q: nn.Linear
    k: nn.Linear
    v: nn.Linear
    out: nn.Linear               # its input is head-major: head h owns columns h*dh:(h+1)*dh
    n_heads: int
    scale: float                 # multiplies q·k
    norm: nn.Module              # the block's norm (LayerNorm or T5's RMSNorm): before (pre-LN) or after
    position_bias: Callable | None = None   # (Tq, Tk, device) -> (H, Tq, Tk) added to the scores (T5)


@dataclass(frozen=True)
class FeedForward:
    fn: Callable                 # (..., D) -> (..., D), token-wise
    norm: nn.Module


@dataclass
class ModelView:
    family: str
    norm_first: bool
    encoder: list                # per layer: [Attention, FeedForward]
    decoder: list                # per layer: [Attention (self), Attention (cross), FeedForward]
    source_embedding: Callable   # ids (B, S) -> scaled token embeddings (B, S, D), before positions
    target_embedding: Callable
    encoder_input: Callable      # (B, S, D) scaled embeddings -> first layer's input
    decoder_input: Callable
    encoder_final: Callable      # the encoder stack's final token-wise map (norm or identity)
    logits: Callable             # decoder's last hidden state (B, T, D) -> logits (B, T, V)


def model_view(translator) -> ModelView:
    family = translator.engine.family
    if family == "ours":
        return _our_view(translator.model)
    if family not in EXPLAIN_FAMILIES:
        raise ValueError(f"explain=True does not support the Hugging Face family {family!r}; supported: "
                         f"{', '.join(EXPLAIN_FAMILIES)}")
    if family == "t5":
        return _t5_view(translator.model)
    return _hf_view(translator.model, family, translator.config.norm_first)


def _our_view(model) -> ModelView:
    H, pe = model.config.n_heads, model.positional_encoding

    def att(a, norm) -> Attention:
        return Attention(a.kind, a.hook.layer, a.q_proj, a.k_proj, a.v_proj, a.out_proj, H, a.d_head ** -0.5, norm)

    encoder = [[att(l.self_attention, l.attention_block.norm),
                FeedForward(l.feed_forward, l.feed_forward_block.norm)] for l in model.encoder_layers]
    decoder = [[att(l.self_attention, l.self_attention_block.norm),
                att(l.cross_attention, l.cross_attention_block.norm),
                FeedForward(l.feed_forward, l.feed_forward_block.norm)] for l in model.decoder_layers]
    return ModelView(
        "ours", model.config.norm_first, encoder, decoder,
        source_embedding=lambda ids: model.scaled_embedding(ids, model.source_embedding),
        target_embedding=lambda ids: model.scaled_embedding(ids, model.target_embedding),
        encoder_input=lambda e: e + pe[: e.shape[1]],
        decoder_input=lambda e: e + pe[: e.shape[1]],
        encoder_final=model.encoder_norm,
        logits=lambda x: model.output_projection(model.decoder_norm(x)))


def _hf_view(model, family: str, norm_first: bool) -> ModelView:
    from ..hf import arch
    enc, dec = model.get_encoder(), model.get_decoder()
    D = model.config.d_model

    def att(kind, layer, a, norm) -> Attention:
        return Attention(kind, layer, a.q_proj, a.k_proj, a.v_proj, a.out_proj, a.num_heads, a.scaling, norm)

    def ffn(layer) -> FeedForward:
        return FeedForward(lambda h: layer.fc2(layer.activation_fn(layer.fc1(h))), layer.final_layer_norm)

    encoder = [[att("encoder_self", i, l.self_attn, l.self_attn_layer_norm), ffn(l)] for i, l in enumerate(enc.layers)]
    decoder = [[att("decoder_self", i, l.self_attn, l.self_attn_layer_norm),
                att("cross", i, l.encoder_attn, l.encoder_attn_layer_norm), ffn(l)] for i, l in enumerate(dec.layers)]

    def stack_input(stack):
        def first_input(e):                                                   # (B, n, D)
            x = e + arch.position_table(stack, family, e.shape[1], D).to(e.dtype)
            ln = getattr(stack, "layernorm_embedding", None)                  # BART, mBART
            return ln(x) if ln is not None else x
        return first_input

    def final(stack):
        norm = getattr(stack, "layer_norm", None)                             # pre-LN stacks end in a norm
        return norm if norm is not None else nn.Identity()

    dec_final, bias = final(dec), getattr(model, "final_logits_bias", None)

    def logits(x):
        out = model.lm_head(dec_final(x))
        return out + bias.to(out.dtype) if bias is not None else out

    return ModelView(family, norm_first, encoder, decoder,
                     source_embedding=lambda ids: arch.token_embeddings(enc, ids),
                     target_embedding=lambda ids: arch.token_embeddings(dec, ids),
                     encoder_input=stack_input(enc), decoder_input=stack_input(dec),
                     encoder_final=final(enc), logits=logits)


def _t5_view(model) -> ModelView:
    """T5 / T5 v1.1 / mT5: pre-LN blocks [self, (cross), feed-forward], each its own RMSNorm."""
    from ..hf import arch
    enc, dec = model.get_encoder(), model.get_decoder()

    def relative(stack):                   # block 0 owns the table; every layer adds the same bias
        table = stack.block[0].layer[0].SelfAttention
        return lambda q, k, device: table.compute_bias(q, k, device=device)[0]        # (H, q, k)

    def att(kind, layer, a, norm, bias=None) -> Attention:
        return Attention(kind, layer, a.q, a.k, a.v, a.o, a.n_heads, 1.0, norm, bias)

    def ffn(sub) -> FeedForward:
        return FeedForward(sub.DenseReluDense, sub.layer_norm)

    encoder = [[att("encoder_self", i, b.layer[0].SelfAttention, b.layer[0].layer_norm, relative(enc)),
                ffn(b.layer[-1])] for i, b in enumerate(enc.block)]
    decoder = [[att("decoder_self", i, b.layer[0].SelfAttention, b.layer[0].layer_norm, relative(dec)),
                att("cross", i, b.layer[1].EncDecAttention, b.layer[1].layer_norm),
                ffn(b.layer[-1])] for i, b in enumerate(dec.block)]
    config = model.config
    scale = getattr(config, "scale_decoder_outputs", getattr(config, "tie_word_embeddings", True))
    factor = config.d_model ** -0.5 if scale else 1.0

    def logits(x):
        return model.lm_head(dec.final_layer_norm(x) * factor)

    return ModelView("t5", True, encoder, decoder,
                     source_embedding=lambda ids: arch.token_embeddings(enc, ids),
                     target_embedding=lambda ids: arch.token_embeddings(dec, ids),
                     encoder_input=lambda e: e, decoder_input=lambda e: e,      # positions live in the bias
                     encoder_final=enc.final_layer_norm, logits=logits)
