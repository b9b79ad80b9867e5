"""Rollout: attention followed through every encoder layer (Abnar & Zuidema, 2020)."""
from __future__ import annotations

from functools import partial

import streamlit as st

from viz import attention_heatmap, merge_attention, rollout

from ..ui.common import chart, column_width, head_title, heat_height, shared_figure
from .base import View, ViewContext

SIDE_BY_SIDE = [1, 1]            # the rollout map, then the last layer's mean attention


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    # both maps are built once per process for every session showing this run and display
    fig = shared_figure(result, ("rollout", display), partial(rollout_figures, result, display, 0))
    columns = st.columns(SIDE_BY_SIDE)
    with columns[0]:
        chart(fig, "rollout")
    with columns[1]:
        chart(shared_figure(result, ("rollout_last", display), partial(rollout_figures, result, display, 1)),
              "rollout_last")
    st.caption("Rollout (Abnar & Zuidema, 2020) follows attention through the layers: each layer's heads are "
               "averaged, the residual connection is added as 0.5·A + 0.5·I, and the layers are multiplied. "
               "Row i says how much each input piece flows into position i at the top of the encoder; the "
               "right-hand map is the last layer's own attention, for comparison.")
    return fig


def rollout_figures(result, display, which: int):
    """The rollout map (which=0) or the last layer's mean attention (which=1)."""
    weights = result.attention["encoder_self"]                     # (L, H, S, S)
    layers, tokens = weights.shape[0], result.source_tokens
    matrix = rollout(weights) if which == 0 else weights[-1].mean(axis=0)      # (S, S)
    if display.words:
        matrix, queries, keys = merge_attention(matrix, tokens, tokens)
    else:
        queries = keys = tokens
    options = dict(normalize=display.normalize, show_space=display.show_space, hide_special=display.hide_special,
                   height=heat_height(len(queries)), width=column_width(SIDE_BY_SIDE, which))
    title = f"Attention rollout through {layers} encoder layers" if which == 0 else head_title(
        "encoder_self", layers - 1, None)
    return attention_heatmap(matrix, queries, keys, title, **options)


VIEW = View(
    name="Rollout", title="Attention rollout through the encoder",
    explains="How much each source piece flows into each position at the top of the encoder, following "
             "attention through all layers at once instead of looking at one layer.",
    render=render)
