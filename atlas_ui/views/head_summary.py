"""Head summary: statistics of every head (entropy, distance, ...) and, when measured, importance."""
from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from viz.stats import STAT_COLUMNS, STAT_TITLES

from ..ui import state
from ..ui.common import PRESENTER_MAX_HEIGHT, as_arrow, chart, column_width, n_heads, n_layers, pick_kind
from ..runs.result import kind_statistics
from .base import View, ViewContext
from .importance import importance_rows, importance_section, load_importance
from .shared import focus_on, focus_panel, on_tile_pick
from .stat_maps import scope_key, shared_table, statistic_map, statistic_maps

SCOPES = ("This sentence", "All examples")
TABLE_OPEN = "stats_table_open"   # session key: the table of every head is open
MAIN_HEIGHT = 440          # px: the large statistic map and the opened head beside it
FOCUS_SLIDE_HEIGHT = PRESENTER_MAX_HEIGHT - 60   # presenter: the opened head sits under its pickers


def statistics_table(frames: dict) -> pd.DataFrame:
    """One sortable table of every head of every kind."""
    parts = [frame.assign(kind=kind) for kind, frame in frames.items()]
    table = pd.concat(parts, ignore_index=True)
    first = ["kind", "layer", "head"]
    return table[first + [c for c in table.columns if c not in first]]


def _on_table_pick(key: str, table: pd.DataFrame) -> None:
    rows = (st.session_state.get(key) or {}).get("selection", {}).get("rows", [])
    if rows and 0 <= rows[0] < len(table):
        row = table.iloc[rows[0]]
        focus_on(int(row["layer"]), int(row["head"]), kind=str(row["kind"]))


def render(ctx: ViewContext):
    """Entropy, distance, max weight, special and diagonal share per head; click a head to open it.
    With the model's head_importance.json, its importance too."""
    result, display = ctx.result, ctx.display
    example_count = len(ctx.example_texts())
    importance = load_importance(ctx.model.path, result)
    # the statistic's and the kind's names whole, with the sidebar open too
    scope_column, statistic_column, kind_column = st.columns([2.0, 2.6, 2.4], vertical_alignment="bottom")
    with scope_column:
        scope = state.radio("Statistics of", SCOPES, "stats_scope", horizontal=True,
                            format_func=lambda s: s if s == SCOPES[0] else f"All {example_count} examples",
                            help="Averaged over the example sentences: each sentence translated with the "
                                 "current model and decoding, its statistics computed, then averaged.")
    if scope == SCOPES[0]:
        frames = kind_statistics(result)
    else:
        with st.spinner(f"Translating the {example_count} examples…"):
            frames = ctx.example_stats()
        if not frames:
            st.info("There are no example sentences to average over.")
            frames = kind_statistics(result)
    with statistic_column:
        statistic = state.selectbox("Statistic", STAT_COLUMNS, "stat_main", format_func=STAT_TITLES.get,
                                    help="The statistic drawn large; the others are below.")
    with kind_column:
        kind = pick_kind()
    # the chosen statistic large, and the head a click opens right beside it (not below the fold)
    big, beside = st.columns(halves := [1, 1])
    with big:
        main = statistic_map(ctx, frames, scope != SCOPES[0], kind, statistic, MAIN_HEIGHT)
        key = f"stat_{kind}_{statistic}"
        chart(main, key, on_select=partial(on_tile_pick, key, n_layers(result, kind), n_heads(result)),
              selection_mode="points")
    with beside:
        focus_panel(result, display, kind, "stats_focus", height=MAIN_HEIGHT - 60, width=column_width(halves, 1),
                    max_height=FOCUS_SLIDE_HEIGHT)
    # the other statistics as small multiples in one chart (one element, not one per statistic)
    others = tuple(column for column in STAT_COLUMNS if column != statistic)
    key = f"stat_maps_{kind}_{statistic}"
    chart(statistic_maps(ctx, frames, scope != SCOPES[0], kind, others), key,
          on_select=partial(on_tile_pick, key, n_layers(result, kind), n_heads(result)), selection_mode="points")
    st.caption(("Cross-attention has no diagonal (queries are target pieces, keys are source pieces). "
                if kind == "cross" else "") + "Click a cell to open that head beside the large map; the table "
               "below sorts every head by any statistic.")
    # drawn only while open (lazy, like the importance section below; its label never changes): a
    # 72-row table fewer for every session of a room on a Head summary link
    box = st.expander("Every head as a sortable table", key=TABLE_OPEN, on_change="rerun")
    if box.open:
        with box:
            heads_table(ctx, result, scope != SCOPES[0], importance, frames)
    importance_section(importance, kind, on_tile_pick, result)
    return main


def heads_table(ctx: ViewContext, result, over_examples: bool, importance, frames: dict) -> None:
    """Every head of every kind, one row each (with importance when measured); a row opens its head."""
    table = shared_table(ctx, over_examples, importance.stamp,
                         lambda: importance_rows(importance, statistics_table(frames)))
    number = st.column_config.NumberColumn(format="%.3f")
    arrow = as_arrow(result, ("statistics_table", scope_key(ctx, over_examples), importance.stamp), table)
    st.caption("Sort by clicking a column header; select a row to open that head beside the large map.")
    st.dataframe(arrow, hide_index=True, key="stats_table", on_select=partial(_on_table_pick, "stats_table", table),
                 selection_mode="single-row", column_config={
                     c: number for c in (*STAT_COLUMNS, "michel")} | {
                     "loss_change": st.column_config.NumberColumn(format="%.4f")})


VIEW = View(
    name="Head summary", title="Statistics of every head",
    explains="One number per head (how spread out, how far back, how much on special pieces) for every "
             "layer, so heads that behave alike stand out; click one to open it.",
    render=render)
