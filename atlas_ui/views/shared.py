"""Parts several views draw: one head as a large heatmap, tiled heads that open a head on click
(with undo), and a cached run behind a spinner only while it is being made. The decoding-step
navigator is ui.common.step_nav."""
from __future__ import annotations

import contextlib
from functools import partial
from typing import Callable, TypeVar

import streamlit as st

from viz import MAIN_WIDTH, attention_heatmap, overview_selection

from ..ui import state
from ..ui.common import (PRESENTER_MAX_HEIGHT, chart, head_title, heat_height, n_heads, n_layers, pick_head, pick_layer,
                      shared_figure, shows_norm, value_options, weights_for)
from ..runs.warm import holds

T = TypeVar("T")


def spinner_unless_held(key, waiting: str, run: Callable[[], T]) -> T:
    """run(), the cached run of RunKey `key` (runs/warm.cached_run), under a spinner saying `waiting`
    only when the process does not hold it yet: a held run needs no spinner, whose timer thread and
    transient element every session of a room would pay for on every rerun."""
    with contextlib.nullcontext() if holds(key.digest) else st.spinner(waiting):
        return run()


def head_heatmap(result, display, kind, layer, head, key, height=None, width=MAIN_WIDTH,
                 max_height=PRESENTER_MAX_HEIGHT):
    """One head (or the mean over heads when head is None) as a large heatmap: its weights, or its
    norm-weighted values when the display asks for them and the run has them. `width`: its column's
    (common.column_width), when it is not the main one. `max_height`: its most in presenter mode."""
    norm = shows_norm(result, display)

    def build():
        weights, queries, keys = weights_for(result, kind, display.words, norm=norm)
        matrix = weights[layer].mean(axis=0) if head is None else weights[layer, head]
        title = head_title(kind, layer, head) + (" · norm-weighted" if norm else "")
        return attention_heatmap(matrix, queries, keys, title, normalize=display.normalize,
                                 show_space=display.show_space, hide_special=display.hide_special,
                                 height=height or heat_height(len(queries)), width=width,
                                 **value_options(result, display, kind, weights))

    fig = shared_figure(result, ("head", kind, layer, head, display, height, width), build)
    chart(fig, key, max_height=max_height)
    return fig


def clickable_tiles(fig, chart_key: str, result, display, kind: str, fixed_layer: int | None = None):
    """Tiled heads with a click that opens a head large below; selectors do the same by keyboard."""
    chart(fig, chart_key, on_select=partial(on_tile_pick, chart_key, n_layers(result, kind), n_heads(result)),
          selection_mode="points")
    st.caption("Click a tile to open that head below, or pick it with the selectors.")
    with st.container(key=f"{chart_key}_opened"):
        focus_panel(result, display, kind, f"{chart_key}_focus", fixed_layer)
        scroll_after_click(chart_key)


OPENED_BY_CLICK = "_opened_by_click"     # (chart key, click count) of a tile click whose run has not drawn yet
TILE_CLICKS = "_tile_clicks"             # tile clicks that opened a head, this session
# Constants and an integer only (no user text). The head opens below the tiles, often below the
# fold, so a click seemed to do nothing: bring its panel into view (under Streamlit's fixed header).
SCROLL_JS = """<script>/* click {count} */(() => {{
  const panel = document.querySelector('.st-key-{key}_opened');      /* st.html is not in an iframe */
  if (!panel) return;
  panel.style.scrollMarginTop = '4rem';
  panel.scrollIntoView({{block: 'start', behavior: 'smooth'}});
}})();</script>"""


def scroll_after_click(chart_key: str) -> None:
    """In the run a tile click started, and only then, scroll the opened head into view. The
    click's count is in the script, so a second click's script is a new element and runs again."""
    opened = st.session_state.pop(OPENED_BY_CLICK, None)
    if isinstance(opened, tuple) and opened[0] == chart_key:
        st.html(SCROLL_JS.format(count=int(opened[1]), key=chart_key), unsafe_allow_javascript=True)


def focus_panel(result, display, kind: str, key: str, fixed_layer: int | None = None, height: int | None = None,
                width: float = MAIN_WIDTH, max_height: int = PRESENTER_MAX_HEIGHT):
    """The head a click opened, large, with layer/head selectors and an undo button (a third of the
    row: in Head summary's half column with the sidebar open, a fifth cut it to "↩ Undo f…")."""
    columns = st.columns([1, 1, 1])
    with columns[0]:
        layer = pick_layer(result, kind) if fixed_layer is None else fixed_layer
    with columns[1]:
        head = pick_head(result)
    undo_focus_button(columns[2])
    return head_heatmap(result, display, kind, layer, head, key, height=height, width=width, max_height=max_height)


FOCUS_HISTORY = "_focus_history"     # (layer, head) before each click on a tile, newest last


def on_tile_pick(chart_key: str, layers: int, heads: int, kind: str | None = None,
                 opened_by: str | None = None) -> bool:
    """A click on a layers x heads tile: open that head (of `kind`, when the map has its own), undoable;
    OPENED_BY_CLICK names `opened_by` (default the chart) so its panel scrolls into view. True when a
    head was opened."""
    event = st.session_state.get(chart_key)
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return False
    picked = overview_selection(points, n_heads=heads)
    if picked is None or not (0 <= picked[0] < layers and 0 <= picked[1] < heads):
        return False
    focus_on(*picked, kind=kind)
    clicks = st.session_state[TILE_CLICKS] = st.session_state.get(TILE_CLICKS, 0) + 1
    st.session_state[OPENED_BY_CLICK] = (opened_by or chart_key, clicks)
    return True


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


def undo_focus() -> None:
    history = st.session_state.get(FOCUS_HISTORY) or []
    if history:
        kind, layer, head = history.pop()
        state.put("kind", kind)
        state.put("layer", layer)
        state.put("head", head)


def undo_focus_button(column) -> None:
    """Focus set by a click can be undone: back to the head shown before it."""
    history = st.session_state.get(FOCUS_HISTORY) or []
    back = f" (layer {history[-1][1]}, head {history[-1][2]})" if history else ""
    column.button("↩ Undo focus", key="undo_focus", on_click=undo_focus, disabled=not history,
                  help=f"Go back to the head that was open before the last click on a tile{back}.")
