"""Logit lens: what each decoder sublayer would write at every step, and what the decoder writes
from each encoder layer (DecoderLens), issue 33."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from viz.lens import (decision_sites, decoder_lens_frame, lens_grid_height, lens_selection,
                      lens_sentence, logit_lens_figure, site_label)
from viz._labels import show_piece

from ..ui import state
from ..ui.common import STEP_SLIDE_HEIGHT, chart, escape_md, move_step, phone_layout, shared_figure, shared_table
from ..runs.lens import decoder_lens_key, decoder_lens_run, lens_key, lens_run
from ..server.settings import max_concurrent
from .base import View, ViewContext
from .shared import spinner_unless_held

CHART = "lens_grid"
SITE = "lens_site"            # the clicked cell's site (its step is the page's "step", the strip marks it)
# Constants only (no user text). Cell text is cut to the cells of a 1280-px window; on a phone a column
# is a few px wide and the pieces would run into each other: the colours stay, a tap opens the cell.
PHONE_CSS = ("<style>@media (max-width:640px){.st-key-lens_picture .heatmaplayer text,"
             ".st-key-lens_picture .hm text{display:none}}</style>")


PHONE_STEPS = 4               # a phone shows this many steps around the page's step, each cell with its piece


PHONE_WIDTH = {"width": 390}     # the cells' text is cut to a phone's cells, not a 1280-px window's


def step_window(step: int, steps: int, size: int) -> tuple[int, int]:
    """[lo, hi) of `size` steps holding `step` (two before it where there are), inside 0..steps."""
    lo = min(max(step - 2, 0), max(steps - size, 0))
    return lo, min(lo + size, steps)


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    pieces = tuple(result.output_tokens)
    key = lens_key(ctx.run, pieces)                         # the page's run, read over the pieces on screen
    lens = spinner_unless_held(key, "Reading every layer through the model's head…",
                               lambda: lens_run(key, max_concurrent()))
    sites, T = list(lens.sites), len(lens.output_tokens)
    site, step = selected_cell(lens)
    phone = phone_layout(display)
    lo, hi = step_window(step, T, PHONE_STEPS) if phone else (0, T)
    title = "Logit lens: each decoder sublayer read through the model's own head"
    rank = lens.chosen_rank
    fig = shared_figure(result, ("lens", lens.key, display.show_space, display.presenter, lo, hi), lambda: logit_lens_figure(
        lens.chosen_prob[lo:hi], lens.top_pieces[lo:hi], lens.top_probs[lo:hi], pieces[lo:hi], sites,
        title + (f" · steps {lo + 1}–{hi} of {T}" if (lo, hi) != (0, T) else ""),
        chosen_rank=None if rank is None else rank[lo:hi], first_step=lo,
        show_space=display.show_space, cell_font=14 if display.presenter else 11, **PHONE_WIDTH if phone else {},
        height=min(lens_grid_height(len(sites)), STEP_SLIDE_HEIGHT)))
    # one block, the sentence above the chart: presenter mode and phones put a view's first chart
    # block first (page/share.PRESENTER_CSS, page/style.COMPACT_CSS), and the sentence goes with it
    with st.container(key="lens_picture"):
        if not phone:                      # a phone's window of steps has room for the cells' text
            st.html(PHONE_CSS)
        # the first question a speaker is asked, answered for this sentence
        st.markdown("**" + escape_md(lens_sentence(lens.chosen_rank, pieces, sites, show_space=display.show_space),
                                     600) + "**")
        chart(fig, CHART, on_select=lambda: _on_cell_pick(len(sites), T), selection_mode="points",
              max_height=STEP_SLIDE_HEIGHT)                # under the sentence: less room than a plain chart
        if phone and (lo, hi) != (0, T):
            with st.container(horizontal=True, key="lens_window"):
                st.button("◀ Earlier", key="lens_earlier", on_click=move_step, args=(-PHONE_STEPS, T), disabled=lo == 0)
                st.button("Later ▶", key="lens_later", on_click=move_step, args=(PHONE_STEPS, T), disabled=hi >= T)
    st.caption("Read up a column to see when the model settles on the piece it writes: a cell holds the piece the "
               "lens reads after that sublayer, its colour the probability of the piece finally chosen. "
               "Click a cell for its top pieces.")
    cell, table = st.columns([1, 2.2])
    with cell:
        cell_table(result, lens, site, step, display.show_space)
    with table:
        decoder_lens_table(ctx, display.show_space)
    return fig


def selected_cell(lens) -> tuple[int, int]:
    """(site, step) whose top-k is open: the last click (or the link's lens_site and step_no), else the
    step the page is on (the translation strip marks it) read one site before the model settles on
    its piece there."""
    n, T = len(lens.sites), len(lens.output_tokens)
    decided = decision_sites(lens.chosen_rank)
    site, step = state.kept(SITE), state.kept("step", 0)
    if not (isinstance(step, int) and not isinstance(step, bool) and 0 <= step < T):
        step = 0
    if not (isinstance(site, int) and not isinstance(site, bool) and 0 <= site < n):
        site = max(int(decided[step]) - 1, 0) if T and decided[step] >= 0 else n - 1
    state.put(SITE, site)
    state.put("step", step)
    return site, step


def _on_cell_pick(n_sites: int, steps: int) -> None:
    event = st.session_state.get(CHART) or {}
    picked = lens_selection((event.get("selection") or {}).get("points", []))
    if picked is not None and 0 <= picked[0] < n_sites and 0 <= picked[1] < steps:
        state.put(SITE, picked[0])
        state.put("step", picked[1])


def cell_table(result, lens, site: int, step: int, show_space: bool) -> None:
    """The clicked cell's top pieces, as a table with a bar per probability (built once per cell for
    every session: a room on one link converts it once)."""
    if not lens.output_tokens:
        return
    chosen = lens.output_tokens[step]
    st.markdown(escape_md(f"Step {step + 1} (chose {show_piece(chosen, show_space=show_space)}), read after "
                          f"{site_label(lens.sites[site])}: p(chosen) = {float(lens.chosen_prob[step, site]):.3f}, "
                          f"rank {int(lens.chosen_rank[step, site]) + 1}", 300))     # read from 1

    def build():
        top = lens.top_pieces[step][site]
        return pd.DataFrame({"piece": [show_piece(p, show_space=show_space) for p in top],
                             "p": [float(q) for q in lens.top_probs[step, site]],
                             "chosen": ["✓" if p == chosen else "" for p in top]})
    st.dataframe(shared_table(result, ("lens_cell", lens.key, site, step, show_space), build), key="lens_cell",
                 hide_index=True, width="stretch",
                 column_config={"p": st.column_config.ProgressColumn("p", format="%.3f", min_value=0.0,
                                                                     max_value=1.0)})


def decoder_lens_table(ctx: ViewContext, show_space: bool) -> None:
    """The translation from each encoder layer (DecoderLens), pieces aligned by step like the what-if
    table; on a branch, each decodes on from the branch's forced pieces."""
    prefix = ctx.branch_prefix
    key = decoder_lens_key(ctx.run, prefix)                 # greedy with a reference: the page's run's beam
    run = spinner_unless_held(key, "Decoding from each encoder layer…",
                              lambda: decoder_lens_run(key, max_concurrent()))
    st.markdown("**DecoderLens**: the translation when the decoder reads an earlier encoder layer's output"
                + (" (after the branch's forced pieces)" if prefix else "")
                + ("; decoded freely, not forced to the reference" if ctx.target else ""))
    # one Arrow table per run for every session (a Styler would be converted cell by cell on every run)
    table = shared_table(ctx.result, ("decoder_lens", run.key, show_space),
                         lambda: decoder_lens_frame(run.rows, show_space=show_space))
    st.dataframe(table, key="lens_decoder", hide_index=True, width="stretch",
                 column_config={"total log p": st.column_config.NumberColumn(format="%.2f")})
    st.caption("Each row decodes from one encoder layer's output (through the final encoder norm); "
               "\"differs at\" lists the steps where it writes another piece than the model's own.")


VIEW = View(
    name="Logit lens", title="What each layer would say",
    explains="Each cell holds the piece the decoder would write after one sublayer, coloured by the probability "
             "of the piece finally chosen.",
    render=render, steps=True, url_fields=(("lens_site", SITE, int),))
