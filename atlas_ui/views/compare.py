"""Compare: heads side by side, and one head across sentences."""
from __future__ import annotations

import streamlit as st

from .. import state
from ..common import escape_md, n_heads, n_layers, norm_caption, norm_switch, pick_head, pick_kind, pick_layer
from ..settings import KIND_LABELS, KINDS, MAX_COMPARE_HEADS
from .base import View, ViewContext
from .shared import head_heatmap


def _pick_label(pick: str) -> str:
    kind, layer, head = pick.split(":")
    return f"{KIND_LABELS[kind]} · L{layer} · H{head}"


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    norm = norm_switch(display)
    st.subheader("Heads side by side")
    heads = n_heads(result)
    options = [f"{kind}:{layer}:{head}" for kind in KINDS for layer in range(n_layers(result, kind))
               for head in range(heads)]
    last = n_layers(result, "cross") - 1
    picks = state.multiselect(f"Up to {MAX_COMPARE_HEADS} heads", options, "compare_heads",
                              ["encoder_self:0:0", f"cross:{last}:0"], MAX_COMPARE_HEADS,
                              format_func=_pick_label)
    figures = []
    for index, (column, pick) in enumerate(zip(st.columns(max(1, len(picks))), picks)):
        kind, layer, head = pick.split(":")
        with column:
            figures.append(head_heatmap(result, display, kind, int(layer), int(head), f"compare_head_{index}",
                                         height=420))

    st.subheader("One head across sentences")
    columns = st.columns(3)
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)
    with columns[2]:
        head = pick_head(result)
    others = [row.get(ctx.source_key, "") for row in ctx.examples[1:3]]
    texts = [state.text_input(f"Sentence {i + 2}" + (" (optional)" if i else ""), f"compare_text_{i}",
                              others[i] if i < len(others) else "") for i in range(2)]
    columns = st.columns(3)
    with columns[0]:
        st.caption("Sentence 1 (the one above)")
        head_heatmap(result, display, kind, layer, head, "compare_sentence_0", height=420)
    for index, (column, text) in enumerate(zip(columns[1:], texts), start=1):
        with column:
            if not text.strip():
                st.info("Type a sentence to compare.")
                continue
            try:
                other = ctx.translate_other(text)
            except (ValueError, RuntimeError, TimeoutError) as exc:   # bad text, explain failure, busy server
                st.info(escape_md(str(exc)))
                continue
            st.caption(f"Sentence {index + 1} → " + escape_md(other.text, 120))
            head_heatmap(other, display, kind, layer, head, f"compare_sentence_{index}", height=420)
    norm_caption(norm, None, display.normalize)
    return figures[0] if figures else None


VIEW = View(
    name="Compare", title="Heads and sentences side by side",
    explains="Up to four heads next to each other, then one head on up to three sentences, to see whether a "
             "head does the same job everywhere.",
    render=render, norm_switch=True)
