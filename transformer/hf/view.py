"""The layer description (transformer/view.py) of a Hugging Face model, by its family's layout
(families.py): BART-like stacks (Marian, BART, mBART, M2M100/NLLB) or T5 blocks."""
from __future__ import annotations

from torch import nn

from ..view import Attention, FeedForward, ModelView
from . import arch
from .families import family


def model_view(model) -> ModelView:
    """The view of `model`, built from its family's layout (ValueError for a layout without one)."""
    record = family(model.config.model_type)
    if record.layout not in LAYOUTS:
        raise ValueError(f"explain=True does not support the Hugging Face family {record.model_type!r}: its "
                         f"layout {record.layout!r} is not described; described: {', '.join(LAYOUTS)}")
    return LAYOUTS[record.layout](model, record)


def _bart_view(model, record) -> ModelView:
    family, norm_first = record.model_type, record.norm_first
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


def _t5_view(model, record) -> ModelView:
    """T5 / T5 v1.1 / mT5: pre-LN blocks [self, (cross), feed-forward], each its own RMSNorm."""
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

    return ModelView(record.model_type, record.norm_first, encoder, decoder,
                     source_embedding=lambda ids: arch.token_embeddings(enc, ids),
                     target_embedding=lambda ids: arch.token_embeddings(dec, ids),
                     encoder_input=lambda e: e, decoder_input=lambda e: e,      # positions live in the bias
                     encoder_final=enc.final_layer_norm, logits=logits)


LAYOUTS = {"bart": _bart_view, "t5": _t5_view}          # families.py's layouts, each described once
