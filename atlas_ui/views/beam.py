"""Beam: the hypotheses beam search kept at each step, and the attention behind any of them."""
from __future__ import annotations

from functools import partial

import streamlit as st

from viz.beam import beam_path, beam_selection, beam_table, beam_tree_figure

from ..ui import branch, state
from ..ui.common import chart, heat_height, pick_cross_head, shared_figure, shared_table
from .base import View, ViewContext
from .shared import head_heatmap


PRESENTER_TREE_HEIGHT = 560


def beam_signature(result) -> str:
    """Which run a picked node belongs to: a node picked for one sentence means nothing for another."""
    return " ".join(result.source_tokens) + " → " + " ".join(result.output_tokens)


def _on_node_pick(key: str, signature: str, history: list, path: list) -> None:
    """A click on a node picks it; a node off the returned path is also a what-if: decode on from
    its pieces (the tree stays the same run, so the returned path stays drawn)."""
    event = st.session_state.get(key) or {}
    picked = beam_selection((event.get("selection") or {}).get("points", []))
    if picked is not None:
        st.session_state["beam_node"] = {"run": signature, "node": list(picked)}
        step, index = picked
        if tuple(picked) not in path and 0 <= step < len(history) and 0 <= index < len(history[step]):
            branch.create(history[step][index][0])


def _switch_to_beam() -> None:
    state.put("decoding", "Beam search")


def render(ctx: ViewContext):
    """The hypotheses kept at each step; a picked node shows the attention that produced its piece."""
    result, display = ctx.result, ctx.display
    if result.beam is None:
        reason = "a reference translation is forced" if result.forced else "decoding is greedy"
        st.info(f"The beam view needs beam search, but {reason}. Choose “Beam search” above"
                + (" and clear the reference." if result.forced else "."))
        if not result.forced:
            st.button("Use beam search", key="beam_switch", on_click=_switch_to_beam)
        return None
    rows = max(len(step) for step in result.beam)
    # presenter: at least 60% of a 900-px window (the auto height suits the page, not the slide)
    height = max(PRESENTER_TREE_HEIGHT, 160 + 50 * rows) if display.presenter else None
    fig = shared_figure(result, ("beam_tree", display.show_space, height), lambda: beam_tree_figure(   # once for an audience
        result.beam, result.beam_final, show_space=display.show_space, height=height,
        title=f"Beam search: {len(result.beam)} steps, the returned hypothesis highlighted"))
    signature = beam_signature(result)
    path = beam_path(result.beam, result.beam_final)
    chart(fig, "beam_tree", on_select=partial(_on_node_pick, "beam_tree", signature, result.beam, path),
          selection_mode="points")
    picked = st.session_state.get("beam_node")
    node = picked.get("node") if isinstance(picked, dict) and picked.get("run") == signature else None
    if not (isinstance(node, list) and len(node) == 2 and 0 <= node[0] < len(result.beam)
            and 0 <= node[1] < len(result.beam[node[0]])):
        node = list(path[-1])            # by default, the returned hypothesis
    step, index = node
    pieces, score, _, finished = result.beam[step][index]
    on_path = (step, index) in path
    st.markdown(f"**Node: step {step + 1}, hypothesis {index + 1}** · length-normalised score {score:.3f}"
                + (" · finished" if finished else "") + (" · on the returned path" if on_path else ""))
    st.caption("Click a node in the tree to pick it. Its score is Σ log p ÷ a length penalty, so long and short "
               "hypotheses compare; a what-if's “total log p” is the plain sum. Below: the cross-attention of a "
               "pass that feeds this hypothesis's pieces; its last row is the step that chose the node's piece.")
    layer, head, average = pick_cross_head(result, "Average over heads", "avg_heads")
    node_run = ctx.variant(pieces=tuple(pieces))
    head_heatmap(node_run, display, "cross", layer, None if average else head, "beam_node_attention",
                  height=heat_height(len(pieces) + 4))
    branch.panel(display, "beam_branch")          # a what-if made by a click on a node: below what it opened
    st.dataframe(shared_table(result, ("beam_table",), lambda: beam_table(result.beam, result.beam_final)),
                 hide_index=True, key="beam_table")
    return fig


VIEW = View(
    name="Beam", title="Beam search",
    explains="The tree of partial translations beam search kept at each step, with the one it returned "
             "highlighted; pick a node to see the attention that produced its last piece.",
    render=render)
