"""Rollout: attention followed through every encoder layer (Abnar & Zuidema, 2020)."""
from __future__ import annotations

import streamlit as st

from viz import attention_heatmap, merge_attention, rollout

from ..common import chart, head_title, heat_height
from .base import View, ViewContext


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    weights = result.attention["encoder_self"]                     # (L, H, S, S)
    flow = rollout(weights)                                        # (S, S)
    last = weights[-1].mean(axis=0)                                # (S, S)
    tokens = result.source_tokens
    if display.words:
        flow, queries, keys = merge_attention(flow, tokens, tokens)
        last, _, _ = merge_attention(last, tokens, tokens)
    else:
        queries = keys = tokens
    options = dict(normalize=display.normalize, show_space=display.show_space,
                   hide_special=display.hide_special, height=heat_height(len(queries)))
    layers = weights.shape[0]
    fig = attention_heatmap(flow, queries, keys, f"Attention rollout through {layers} encoder layers", **options)
    columns = st.columns(2)
    with columns[0]:
        chart(fig, "rollout")
    with columns[1]:
        chart(attention_heatmap(last, queries, keys, head_title("encoder_self", layers - 1, None), **options),
              "rollout_last")
    st.caption("Rollout (Abnar & Zuidema, 2020) follows attention through the layers: each layer's heads are "
               "averaged, the residual connection is added as 0.5·A + 0.5·I, and the layers are multiplied. "
               "Row i says how much each input piece flows into position i at the top of the encoder; the "
               "right-hand map is the last layer's own attention, for comparison.")
    return fig


VIEW = View(
    name="Rollout", title="Attention rollout through the encoder",
    explains="How much each source piece flows into each position at the top of the encoder, following "
             "attention through all layers at once instead of looking at one layer.",
    render=render)
