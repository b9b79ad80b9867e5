"""Compare's "What carries the difference" (issue 53): the edited run with one part of the original
run copied in (activation patching, runs/patching.py), drawn as one sentence and then the maps
(viz/patching.py). A click on a head tile opens that head of the original below, as the Overview's
tiles do (views/shared.py)."""
from __future__ import annotations

from functools import partial

import streamlit as st

from viz.patching import KINDS, carrier_sentence, encoder_patch_figure, head_patch_figure

from ..ui import state
from ..ui.common import chart, column_width, escape_md, shared_figure
from ..runs.patching import PatchFailed, patch_key, patch_sweep
from ..server.settings import KIND_LABELS, max_concurrent
from .base import ViewContext
from .shared import focus_panel, on_tile_pick, scroll_after_click, spinner_unless_held

SECTION = "compare_patch"              # widget keys start with it; the opened head's container is SECTION_opened
PATCH_OPENED = "_compare_patch_opened"  # session: a head tile of this section was clicked (its panel is shown)
HEAD_MAP_HEIGHT = 280                  # under presenter mode's main-chart size: small multiples stay small


def _on_head_pick(chart_key: str, kind: str, layers: int, heads: int) -> None:
    """A tile clicked: open that head (its kind too), undoable, and scroll its panel into view."""
    if on_tile_pick(chart_key, layers, heads, kind=kind, opened_by=SECTION):
        st.session_state[PATCH_OPENED] = True


def _describe(sweep) -> str:
    """Where the difference is measured, as escaped Markdown."""
    def piece(p):
        return "“" + escape_md(p.replace("\u2581", " ").strip() or p, 40) + "”"
    return (f"Measured at output piece {sweep.step + 1} of the original's greedy translation, forced in both runs: "
            f"{piece(sweep.clean_piece)} (original) against {piece(sweep.corrupt_piece)} (the edited run's choice), "
            f"a logit difference of {sweep.clean_value:.2f} in the original and {sweep.corrupt_value:.2f} in the "
            "edited run. Each cell is the share of it that comes back when that one part is copied from the "
            "original into the edited run: red restores, blue pushes further away.")


def carries_section(ctx: ViewContext, original, other, edited: str) -> None:
    """The section under the pair, when the edited sentence reads as other pieces than the original."""
    st.subheader("What carries the difference", anchor=False)
    if tuple(original.source_tokens) == tuple(other.source_tokens):
        st.info("The edited sentence reads as the same pieces as the original: change a word to see what "
                "carries the difference.")
        return
    key = patch_key(ctx.run, edited)
    try:
        sweep = spinner_unless_held(key, "Patching the edited run…", lambda: patch_sweep(key, max_concurrent()))
    except (RuntimeError, TimeoutError) as exc:
        st.warning("Could not patch the edited run: " + escape_md(str(exc), 200))
        return
    if isinstance(sweep, PatchFailed):
        st.info("Nothing to patch for this edit: " + escape_md(sweep.reason, 200))
        return
    display = ctx.display
    sentence = shared_figure(sweep, ("patch_sentence",), lambda: carrier_sentence(          # once for an audience
        sweep.encoder, sweep.heads, sweep.clean_source_tokens, sweep.corrupt_source_tokens))
    st.markdown("**" + escape_md(sentence, 400) + "**")
    st.caption(_describe(sweep))
    if sweep.encoder is not None:
        fig = shared_figure(sweep, ("patch_encoder", display.show_space), lambda: encoder_patch_figure(
            sweep.encoder, sweep.clean_source_tokens, sweep.corrupt_source_tokens, show_space=display.show_space))
        chart(fig, f"{SECTION}_encoder")
    else:
        st.caption("The two sentences differ in piece count, so source positions (and encoder self-attention "
                   "heads) are not compared: only the decoder's heads are.")
    kinds = [kind for kind in KINDS if sweep.heads.get(kind) is not None]
    shares = [1] * len(kinds)
    for index, (column, kind) in enumerate(zip(st.columns(shares), kinds)):
        values = sweep.heads[kind]
        width = column_width(shares, index)
        fig = shared_figure(sweep, ("patch_heads", kind, width), lambda values=values, kind=kind, width=width:
                           head_patch_figure(values, kind, title=KIND_LABELS[kind], height=HEAD_MAP_HEIGHT, width=width))
        chart_key = f"{SECTION}_{kind}"
        with column:
            chart(fig, chart_key, on_select=partial(_on_head_pick, chart_key, kind, *values.shape),
                  selection_mode="points")
    st.caption("Rows are layers, columns are heads: each head's output copied from the original at every "
               "position. Click a tile to open that head of the original sentence below.")
    if st.session_state.get(PATCH_OPENED):
        kind = state.kept("kind", "cross")
        kind = kind if kind in kinds else kinds[-1]
        with st.container(key=f"{SECTION}_opened"):
            focus_panel(ctx.result, display, kind, f"{SECTION}_focus")
            scroll_after_click(SECTION)
