"""Views that summarise or trace attention: head statistics, rollout, and the beam."""
from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from viz import attention_heatmap, merge_attention, rollout, statistic_figure
from viz.beam import beam_path, beam_selection, beam_table, beam_tree_figure
from viz.stats import STAT_COLUMNS

from . import state
from .backend import kind_statistics
from .common import chart, head_title, heat_height, n_heads, n_layers, pick_cross_head, pick_kind
from .views_attention import _head_heatmap, _on_tile_pick, focus_on, focus_panel
from .views_importance import importance_rows, importance_section

SCOPES = ("This sentence", "All examples")


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


def stats_view(result, display, example_stats, example_count: int, importance=None):
    """Entropy, distance, max weight, special and diagonal share per head; click a head to open it.
    `importance`: views_importance.Importance (head_importance.json), shown when given."""
    scope = state.radio("Statistics of", SCOPES, "stats_scope", horizontal=True,
                        format_func=lambda s: s if s == SCOPES[0] else f"All {example_count} examples",
                        help="Averaged over the example sentences: each sentence translated with the "
                             "current model and decoding, its statistics computed, then averaged.")
    if scope == SCOPES[0]:
        frames = kind_statistics(result)
    else:
        with st.spinner(f"Translating the {example_count} examples…"):
            frames = example_stats()
        if not frames:
            st.info("There are no example sentences to average over.")
            frames = kind_statistics(result)
    kind = pick_kind()
    columns = st.columns(3)
    main = None
    for index, column in enumerate(STAT_COLUMNS):
        fig = statistic_figure(frames[kind], column)
        key = f"stat_{kind}_{column}"
        with columns[index % 3]:
            chart(fig, key, on_select=partial(_on_tile_pick, key, n_layers(result, kind), n_heads(result)),
                  selection_mode="points")
        main = main or fig
    if kind == "cross":
        st.caption("Cross-attention has no diagonal (queries are target pieces, keys are source pieces).")
    st.caption("Click a cell, or select a row of the table, to open that head below. "
               "Sort the table by clicking a column header.")
    table = statistics_table(frames)
    if importance is not None:
        table = importance_rows(importance, table)
    number = st.column_config.NumberColumn(format="%.3f")
    st.dataframe(table, hide_index=True, key="stats_table", on_select=partial(_on_table_pick, "stats_table", table),
                 selection_mode="single-row", column_config={
                     c: number for c in (*STAT_COLUMNS, "michel")} | {
                     "loss_change": st.column_config.NumberColumn(format="%.4f")})
    if importance is not None:
        importance_section(importance, kind, _on_tile_pick)
    focus_panel(result, display, kind, "stats_focus")
    return main


def rollout_view(result, display):
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


def beam_signature(result) -> str:
    """Which run a picked node belongs to: a node picked for one sentence means nothing for another."""
    return " ".join(result.source_tokens) + " → " + " ".join(result.output_tokens)


def _on_node_pick(key: str, signature: str) -> None:
    event = st.session_state.get(key) or {}
    picked = beam_selection((event.get("selection") or {}).get("points", []))
    if picked is not None:
        st.session_state["beam_node"] = {"run": signature, "node": list(picked)}


def _switch_to_beam() -> None:
    state.put("decoding", "Beam search")


def beam_view(result, display, run_variant):
    """The hypotheses kept at each step; a picked node shows the attention that produced its piece."""
    if result.beam is None:
        reason = "a reference translation is forced" if result.forced else "decoding is greedy"
        st.info(f"The beam view needs beam search, but {reason}. Choose “Beam search” above"
                + (" and clear the reference." if result.forced else "."))
        if not result.forced:
            st.button("Use beam search", key="beam_switch", on_click=_switch_to_beam)
        return None
    fig = beam_tree_figure(result.beam, result.beam_final, show_space=display.show_space,
                           title=f"Beam search: {len(result.beam)} steps, the returned hypothesis highlighted")
    signature = beam_signature(result)
    chart(fig, "beam_tree", on_select=partial(_on_node_pick, "beam_tree", signature), selection_mode="points")
    path = beam_path(result.beam, result.beam_final)
    picked = st.session_state.get("beam_node")
    node = picked.get("node") if isinstance(picked, dict) and picked.get("run") == signature else None
    if not (isinstance(node, list) and len(node) == 2 and 0 <= node[0] < len(result.beam)
            and 0 <= node[1] < len(result.beam[node[0]])):
        node = list(path[-1])            # by default, the returned hypothesis
    step, index = node
    pieces, score, _, finished = result.beam[step][index]
    on_path = (step, index) in path
    st.markdown(f"**Node: step {step + 1}, hypothesis {index}** · score {score:.3f}"
                + (" · finished" if finished else "") + (" · on the returned path" if on_path else ""))
    st.caption("Click a node in the tree to pick it. Below: the cross-attention of a pass that feeds this "
               "hypothesis's pieces; its last row is the step that chose the node's piece.")
    layer, head, average = pick_cross_head(result, "Average over heads", "avg_heads")
    node_run = run_variant(pieces=tuple(pieces))
    _head_heatmap(node_run, display, "cross", layer, None if average else head, "beam_node_attention",
                  height=heat_height(len(pieces) + 4))
    st.dataframe(beam_table(result.beam, result.beam_final), hide_index=True, key="beam_table")
    return fig

