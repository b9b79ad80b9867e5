"""Decoding steps: one output step at a time, its candidates and the attention that chose it."""
from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

from viz import attention_heatmap, keep_peak_labels, merge_keys, topk_bar_figure

from ..ui.common import (STEP_SLIDE_HEIGHT, chart, column_width, escape_md, heat_height, n_heads, norm_caption,
                      norm_switch, pick_cross_head, shared_figure, step_nav, value_options)
from ..ui import branch
from .contributions import step_explanations
from .base import View, ViewContext


def render(ctx: ViewContext):
    """With an explained run, also the step's ALTI+ source/prefix contributions."""
    result, display = ctx.result, ctx.display
    steps = result.steps

    def describe(step: int) -> None:
        piece, p, _ = steps[step]
        fed = " ".join(result.target_tokens[: step + 1])
        counter = "" if display.presenter else f"Step {step + 1} of {len(steps)}: "   # presenter: a heading says it
        st.text(f"{counter}chose {piece}  (p = {p:.3f})\nafter the prefix fed: {fed}")

    t = step_nav(len(steps), display.presenter, describe)
    token, prob, top_k = steps[t]
    prefix = result.target_tokens[: t + 1]
    if len(steps) <= 1:                  # presenter: the chart's title says what was chosen
        describe(t)
    # the charts first, then the head picker below them: the picture starts higher on the screen
    charts = st.container()
    controls, weights = st.columns([7.6, 2.4])
    with controls:
        layer, head, all_heads = pick_cross_head(result, "All heads of the layer", "step_all_heads")
    norm = norm_switch(display, weights)
    left, right = charts.columns(shares := [2, 3])
    with left:
        candidates = [piece for piece, _ in top_k] + ([] if token in {p for p, _ in top_k} else [token])
        chart(shared_figure(result, ("step_topk", t, display.show_space, display.presenter), lambda: candidates_figure(
                  top_k, token, prob, t, display)), "step_topk",
              on_select=partial(_on_bar_pick, "step_topk", result.output_tokens[:t], candidates, token),
              selection_mode="points", max_height=STEP_SLIDE_HEIGHT)
        branch_picker(result, t, token, candidates)
    heads = list(range(n_heads(result))) if all_heads else [head]
    rows = [f"head {h}" for h in heads] if all_heads else [f"step {t + 1} → {token}"]   # never hidden
    row_title = "Head" if all_heads else "Query"
    where = f"layer {layer} · " + ("all heads" if all_heads else f"head {head}")
    values = result.norm if norm else result.attention                         # norm-weighted or raw
    cross = values["cross"][layer, heads, t, :]                                 # (rows, S)
    self_att = values["decoder_self"][layer, heads, t, : t + 1]                 # (rows, t + 1)
    source = result.source_tokens
    if display.words:       # merge the key pieces into words; each row is one step or one head
        cross, source = merge_keys(cross, source)
        self_att, prefix = merge_keys(self_att, prefix)
    options = dict(normalize=display.normalize, show_space=display.show_space,
                   hide_special=display.hide_special, query_title=row_title, height=heat_height(len(rows), 220),
                   width=column_width(shares, 1))
    scales = {kind: widened_scale(value_options(result, display, kind), part)
              for kind, part in (("cross", cross), ("decoder_self", self_att))}
    what = " · norm-weighted" if norm else ""
    shown = (t, layer, tuple(heads), norm, display)          # the maps are built once for an audience
    # thinned labels (presenter type) keep the bright cell's piece
    cross_fig = shared_figure(result, ("step_cross", *shown), lambda: keep_peak_labels(attention_heatmap(
        cross, rows, source, f"Cross-attention over the source · {where}{what}", **options, **scales["cross"])))
    with right:
        chart(cross_fig, "step_cross", max_height=STEP_SLIDE_HEIGHT // 2)      # two maps, one above the other
        chart(shared_figure(result, ("step_self", *shown), lambda: keep_peak_labels(attention_heatmap(
            self_att, rows, prefix, f"Decoder self-attention over the prefix · {where}{what}",
            **options, **scales["decoder_self"]))), "step_self", max_height=STEP_SLIDE_HEIGHT // 2)
    norm_caption(norm, cross_fig, display.normalize)
    branch.panel(display, "step_branch")            # below the candidates that were clicked
    step_explanations(ctx, t)                       # ALTI+ of the step beside "why this rather than that"
    return cross_fig


def candidates_figure(top_k, token: str, prob: float, t: int, display):
    """The step's top-k bars; taller in presenter mode (60% of a 900-px window), where its title
    also says, on a line of its own, what was chosen (the step's text line is left out there)."""
    fig = topk_bar_figure(top_k, chosen=(token, prob), title=f"Top {len(top_k)} candidates at step {t + 1}",
                          note=f"chose {token} (p = {prob:.3f})" if display.presenter else "",
                          show_space=display.show_space)
    return fig.update_layout(height=max(fig.layout.height or 0, 440 if display.presenter else 380))   # under the step bar


def _branch_from(prefix: list, piece: str) -> None:
    branch.create(list(prefix) + [piece])


def _on_bar_pick(key: str, before: list, candidates: list, chosen: str) -> None:
    """A click on a candidate's bar: decode on with it (the chosen piece's bar changes nothing)."""
    event = st.session_state.get(key) or {}
    for point in (event.get("selection") or {}).get("points", []):
        index = point.get("point_index", point.get("y"))
        if isinstance(index, int) and 0 <= index < len(candidates) and candidates[index] != chosen:
            _branch_from(before, candidates[index])
            return


def _on_pill(key: str, before: list) -> None:
    piece = st.session_state.get(key)
    if isinstance(piece, str):
        _branch_from(before, piece)
    st.session_state[key] = None                   # a pill is a button here: ready for the next click


def branch_picker(result, t: int, token: str, candidates: list) -> None:
    """One pill per other candidate: a click decodes on from this step with it (a what-if branch)."""
    if result.forced:
        return
    others = [piece for piece in candidates if piece != token]
    if others:
        # wrap: directly in a column, pills stay on one row that the column cuts off after about six
        st.pills("What if it had taken…", others, key="step_branch_pick", selection_mode="single", wrap=True,
                 format_func=lambda piece: escape_md(piece, 40), on_change=_on_pill, args=("step_branch_pick", result.output_tokens[:t]),
                 help="Click a candidate: the model decodes on from this step with it, and both translations "
                      "appear side by side below.")


def widened_scale(options: dict, shown) -> dict:
    """The kind's norm-weighted colour scale, widened if merged words add up to more."""
    if options and np.size(shown):
        options = {**options, "zmax": max(options["zmax"], float(np.max(shown)))}
    return options


VIEW = View(
    name="Decoding steps", title="The translation, one output piece at a time",
    explains="Step through the output: the pieces the model considered at each step, and which source "
             "and earlier output pieces it attended to when it picked one.",
    render=render, norm_switch=True, steps=True)
