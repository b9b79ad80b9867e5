"""Heatmap: one head (or the mean of a layer's heads) as one large map."""
from __future__ import annotations

import streamlit as st

from ..ui import state
from ..ui.common import norm_caption, norm_switch, pick_head, pick_kind, pick_layer
from .base import View, ViewContext
from .shared import head_heatmap


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    # the kind's name the widest (Decoder self-attention); the weights' two options side by side
    columns = st.columns([3.3, 1.8, 1.8, 2.1, 2.4])
    norm = norm_switch(display, columns[4])
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)
    with columns[3]:
        average = state.toggle("Average over heads", "avg_heads")
    with columns[2]:
        head = pick_head(result, disabled=average)
    fig = head_heatmap(result, display, kind, layer, None if average else head, "heatmap_main")
    st.caption("Rows are queries, columns are keys; each row is one softmax and sums to 1. "
               "Decoder rows are labelled with the piece that step produced; decoder self-attention "
               "keys with the pieces fed. Hover a cell for its weight.")
    norm_caption(norm, fig, display.normalize)
    return fig


VIEW = View(
    name="Heatmap", title="One attention head",
    explains="Each row is a piece the model is working on; its bright cells are the pieces it looked at "
             "(cross-attention: the source pieces it read to write that piece).",
    render=render, norm_switch=True)
