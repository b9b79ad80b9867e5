"""Views of the attention weights: one head, one layer, every head, and comparisons."""
from __future__ import annotations

from functools import partial

import streamlit as st

from viz import attention_heatmap, head_grid_figure, overview_figure, overview_selection

from . import state
from .common import (chart, escape_md, head_title, heat_height, n_heads, n_layers, norm_caption, norm_switch,
                     pick_head, pick_kind, pick_layer, shared_figure, shows_norm, value_options, weights_for)
from .settings import KIND_LABELS, KINDS, MAX_COMPARE_HEADS


def _head_heatmap(result, display, kind, layer, head, key, height=None):
    """One head (or the mean over heads when head is None) as a large heatmap: its weights, or its
    norm-weighted values when the display asks for them and the run has them."""
    norm = shows_norm(result, display)

    def build():
        weights, queries, keys = weights_for(result, kind, display.words, norm=norm)
        matrix = weights[layer].mean(axis=0) if head is None else weights[layer, head]
        title = head_title(kind, layer, head) + (" · norm-weighted" if norm else "")
        return attention_heatmap(matrix, queries, keys, title, normalize=display.normalize,
                                 show_space=display.show_space, hide_special=display.hide_special,
                                 height=height or heat_height(len(queries)),
                                 **value_options(result, display, kind, weights))

    fig = shared_figure(result, ("head", kind, layer, head, display, height), build)
    chart(fig, key)
    return fig


def heatmap_view(result, display):
    norm = norm_switch(display)
    columns = st.columns([3, 2, 2, 2])
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)
    with columns[3]:
        average = state.toggle("Average over heads", "avg_heads")
    with columns[2]:
        head = pick_head(result, disabled=average)
    fig = _head_heatmap(result, display, kind, layer, None if average else head, "heatmap_main")
    st.caption("Rows are queries, columns are keys; each row is one softmax and sums to 1. "
               "Decoder rows are labelled with the piece that step produced; decoder self-attention "
               "keys with the pieces fed. Hover a cell for its weight.")
    norm_caption(norm, fig, display.normalize)
    return fig


def _clickable_tiles(fig, chart_key: str, result, display, kind: str, fixed_layer: int | None = None):
    """Tiled heads with a click that opens a head large below; selectors do the same by keyboard."""
    chart(fig, chart_key, on_select=partial(_on_tile_pick, chart_key, n_layers(result, kind), n_heads(result)),
          selection_mode="points")
    st.caption("Click a tile to open that head below, or pick it with the selectors.")
    focus_panel(result, display, kind, f"{chart_key}_focus", fixed_layer)


def focus_panel(result, display, kind: str, key: str, fixed_layer: int | None = None):
    """The head a click opened, large, with layer/head selectors and an undo button."""
    columns = st.columns([2, 2, 1])
    with columns[0]:
        layer = pick_layer(result, kind) if fixed_layer is None else fixed_layer
    with columns[1]:
        head = pick_head(result)
    undo_focus_button(columns[2])
    return _head_heatmap(result, display, kind, layer, head, key)


FOCUS_HISTORY = "_focus_history"     # (layer, head) before each click on a tile, newest last


def _on_tile_pick(chart_key: str, layers: int, heads: int) -> None:
    event = st.session_state.get(chart_key)
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return
    picked = overview_selection(points, n_heads=heads)
    if picked is not None and 0 <= picked[0] < layers and 0 <= picked[1] < heads:
        focus_on(*picked)


def focus_on(layer: int, head: int, kind: str | None = None) -> None:
    """Open a head (from a click), remembering the one it replaces so the click can be undone."""
    history = st.session_state.setdefault(FOCUS_HISTORY, [])
    history.append((state.kept("kind", "encoder_self"), state.kept("layer", 0), state.kept("head", 0)))
    del history[:-20]
    if kind is not None:
        state.put("kind", kind)
    state.put("layer", int(layer))
    state.put("head", int(head))
    state.put("avg_heads", False)


def _undo_focus() -> None:
    history = st.session_state.get(FOCUS_HISTORY) or []
    if history:
        kind, layer, head = history.pop()
        state.put("kind", kind)
        state.put("layer", layer)
        state.put("head", head)


def undo_focus_button(column) -> None:
    """Focus set by a click can be undone: back to the head shown before it."""
    history = st.session_state.get(FOCUS_HISTORY) or []
    label = "↩ Undo focus" + (f" (layer {history[-1][1]}, head {history[-1][2]})" if history else "")
    column.button(label, key="undo_focus", on_click=_undo_focus, disabled=not history,
                  help="Go back to the head that was open before the last click on a tile.")


def grid_view(result, display):
    norm = norm_switch(display)
    columns = st.columns(2)
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)
    weights, queries, keys = weights_for(result, kind, display.words, display.hide_special, norm=norm)
    fig = head_grid_figure(weights[layer], queries, keys, f"{KIND_LABELS[kind]} · layer {layer} · all heads"
                           + (" · norm-weighted" if norm else ""), normalize=display.normalize,
                           show_space=display.show_space, layer=layer,
                           **value_options(result, display, kind, weights))
    norm_caption(norm, fig, display.normalize)
    _clickable_tiles(fig, f"grid_{kind}_{layer}", result, display, kind, fixed_layer=layer)
    return fig


def overview_view(result, display, importance=None):
    """`importance(result, kind)` -> (heads to outline, a caption), from head_importance.json."""
    norm = norm_switch(display)
    kind = pick_kind()
    weights, queries, keys = weights_for(result, kind, display.words, display.hide_special, norm=norm)
    marked, note = importance(result, kind) if importance is not None else ((), "")
    fig = overview_figure(weights, queries, keys, f"{KIND_LABELS[kind]}: every layer × every head"
                          + (" · norm-weighted" if norm else ""), normalize=display.normalize,
                          kind_label=KIND_LABELS[kind], show_space=display.show_space, marked=marked,
                          **value_options(result, display, kind, weights))
    st.caption("Rows of tiles are layers, columns are heads." + (" " + note if note else ""))
    norm_caption(norm, fig, display.normalize)
    _clickable_tiles(fig, f"overview_{kind}", result, display, kind)
    return fig


def _pick_label(pick: str) -> str:
    kind, layer, head = pick.split(":")
    return f"{KIND_LABELS[kind]} · L{layer} · H{head}"


def compare_view(result, display, translate_other, examples: list, source_key: str):
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
            figures.append(_head_heatmap(result, display, kind, int(layer), int(head), f"compare_head_{index}",
                                         height=420))

    st.subheader("One head across sentences")
    columns = st.columns(3)
    with columns[0]:
        kind = pick_kind()
    with columns[1]:
        layer = pick_layer(result, kind)
    with columns[2]:
        head = pick_head(result)
    others = [row.get(source_key, "") for row in examples[1:3]]
    texts = [state.text_input(f"Sentence {i + 2}" + (" (optional)" if i else ""), f"compare_text_{i}",
                              others[i] if i < len(others) else "") for i in range(2)]
    columns = st.columns(3)
    with columns[0]:
        st.caption("Sentence 1 (the one above)")
        _head_heatmap(result, display, kind, layer, head, "compare_sentence_0", height=420)
    for index, (column, text) in enumerate(zip(columns[1:], texts), start=1):
        with column:
            if not text.strip():
                st.info("Type a sentence to compare.")
                continue
            try:
                other = translate_other(text)
            except (ValueError, RuntimeError, TimeoutError) as exc:   # bad text, explain failure, busy server
                st.info(escape_md(str(exc)))
                continue
            st.caption(f"Sentence {index + 1} → " + escape_md(other.text, 120))
            _head_heatmap(other, display, kind, layer, head, f"compare_sentence_{index}", height=420)
    norm_caption(norm, None, display.normalize)
    return figures[0] if figures else None
