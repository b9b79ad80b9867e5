"""Overview: every layer × every head of one kind of attention, the important heads outlined."""
from __future__ import annotations

import streamlit as st

from viz import overview_figure

from ..ui.common import norm_caption, norm_switch, phone_layout, pick_kind, shared_figure, value_options, weights_for
from ..server.settings import KIND_LABELS
from .base import View, ViewContext
from .importance import load_importance
from .shared import clickable_tiles


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    columns = st.columns([3, 2.4])
    norm = norm_switch(display, columns[1])
    with columns[0]:
        kind = pick_kind()
    importance = load_importance(ctx.model.path, result)          # head_importance.json: heads to outline
    marked, note = importance.marked(kind), importance.note
    # a phone's column: heads down, layers across (3 tiles a row, not 8 of 30 px)
    heads_down = phone_layout(display)

    def build():
        weights, queries, keys = weights_for(result, kind, display.words, display.hide_special, norm=norm)
        return overview_figure(weights, queries, keys, f"{KIND_LABELS[kind]}: every layer × every head"
                               + (" · norm-weighted" if norm else ""), normalize=display.normalize,
                               kind_label=KIND_LABELS[kind], show_space=display.show_space, marked=marked,
                               heads_down=heads_down, **value_options(result, display, kind, weights))

    # every head of the sentence: built once per process for an audience on the same link
    fig = shared_figure(result, ("overview", kind, norm, display, tuple(marked), heads_down), build)
    clickable_tiles(fig, f"overview_{kind}", result, display, kind)
    st.caption(("Rows of tiles are heads, columns are layers." if heads_down else
                "Rows of tiles are layers, columns are heads.") + (" " + note if note else ""))
    norm_caption(norm, fig, display.normalize)
    return fig


VIEW = View(
    name="Overview", title="Every layer and every head",
    explains="A tiny map for every head of every layer, so you can spot at a glance which heads look at "
             "neighbours, at the start or end of the sentence, or at one particular piece.",
    render=render, norm_switch=True)
