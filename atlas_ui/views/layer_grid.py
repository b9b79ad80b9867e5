"""Layer grid: every head of one layer, side by side; a click opens one large."""
from __future__ import annotations

import streamlit as st

from viz import head_grid_figure

from ..ui.common import (norm_caption, norm_switch, phone_layout, pick_kind, pick_layer, shared_figure, value_options,
                      weights_for)
from ..server.settings import KIND_LABELS
from .base import View, ViewContext
from .shared import clickable_tiles


COLUMNS, PHONE_COLUMNS = 4, 2        # tiles a row


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    columns = st.columns([3, 2, 2.4])
    norm = norm_switch(display, columns[2])
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)

    # a phone's column holds two tiles a row: four made 60-px tiles, and their titles sat on the row above
    tiles_a_row = PHONE_COLUMNS if phone_layout(display) else COLUMNS

    def build():
        weights, queries, keys = weights_for(result, kind, display.words, display.hide_special, norm=norm)
        return head_grid_figure(weights[layer], queries, keys, f"{KIND_LABELS[kind]} · layer {layer} · all heads"
                                + (" · norm-weighted" if norm else ""), normalize=display.normalize,
                                show_space=display.show_space, layer=layer, columns=tiles_a_row,
                                **value_options(result, display, kind, weights))

    fig = shared_figure(result, ("layer_grid", kind, layer, norm, display, tiles_a_row), build)    # once for an audience
    norm_caption(norm, fig, display.normalize)
    clickable_tiles(fig, f"grid_{kind}_{layer}", result, display, kind, fixed_layer=layer)
    return fig


VIEW = View(
    name="Layer grid", title="Every head of one layer",
    explains="One small map per head of the chosen layer, so you can see that heads of the same layer "
             "look at quite different pieces.",
    render=render, norm_switch=True)
