"""Ablation: switch heads off, re-translate, and compare with the original run step by step."""
from __future__ import annotations

import streamlit as st

from viz.ablation import changed_count, diff_html, probability_change_figure, probability_change_table

from ..ui import state
from ..ui.common import chart, escape_md, n_heads, n_layers, shared_figure, shared_table
from ..server.settings import KIND_LABELS, KINDS
from .base import View, ViewContext


PICKER_OPEN = "ablation_picker_open"       # session key: the head picker's popover is open


def _layer_key(kind: str, layer: int) -> str:
    return f"{state.ABLATE_PREFIX}{kind}_{layer}"


def _toggle_layer(kind: str, layer: int, heads: int) -> None:
    """The "whole layer" shortcut: tick every head of the layer, or untick them all if all are ticked."""
    key = _layer_key(kind, layer)
    everything = list(range(heads))
    state.put(key, [] if sorted(state.kept(key, []) or []) == everything else everything)


def _clear_all(keys: list) -> None:
    for key in keys:
        state.put(key, [])


def head_picker(result) -> list:
    """Pills per (kind, layer) to tick heads off; returns the sorted (kind, layer, head) set."""
    heads = n_heads(result)
    keys = []
    for column, kind in zip(st.columns(len(KINDS)), KINDS):
        with column:
            st.markdown(f"**{KIND_LABELS[kind]}**")
            for layer in range(n_layers(result, kind)):
                key = _layer_key(kind, layer)
                keys.append(key)
                # wrap: on one row a column a third of the popover wide scrolled heads 5-7 out of sight
                state.pills(f"Layer {layer}: heads", range(heads), key, format_func=str, wrap=True)
                st.button(f"Whole layer {layer}", key=f"ablate_all_{kind}_{layer}", type="tertiary",
                          on_click=_toggle_layer, args=(kind, layer, heads),
                          help="Tick every head of this layer (again: untick them all).")
    st.button("Switch every head back on", key="ablate_clear", on_click=_clear_all, args=(keys,))
    return sorted((kind, layer, head) for kind in KINDS for layer in range(n_layers(result, kind))
                  for head in state.kept(_layer_key(kind, layer), []) or [])


def render(ctx: ViewContext):
    """Re-runs this sentence with the ticked heads off (ctx.variant), and forced through the original
    output on both sides. One row of controls (the head picker folded in a popover), then the chart,
    then the two translations."""
    result, display = ctx.result, ctx.display
    picker, summary = st.columns([2.2, 7.8], vertical_alignment="center")
    # drawn only while open (lazy; opening it is one rerun): its 20-odd pills and buttons cost every
    # session of a room opening an ablation link. A fixed label: a stateful popover's label is its
    # identity, so a count in it would close the popover at every tick (the count is in the summary).
    with picker.popover("Heads switched off", width="stretch", key=PICKER_OPEN, on_change="rerun") as box:
        if box.open:
            st.caption("Tick heads to switch them off: that head's output is zeroed before the layer's output "
                       "projection. The sentence is translated again with the same decoding, and the original "
                       "output is forced through the ablated model to show how each piece's probability changed.")
            head_picker(result)
    heads = n_heads(result)               # ticks kept from another model may not exist in this one
    mask = tuple((kind, layer, head) for kind, layer, head in state.ablated_heads()
                 if kind in KINDS and layer < n_layers(result, kind) and head < heads)
    if not mask:
        summary.info("No head is switched off yet. Open “Heads switched off” and tick one or more heads.")
        return None
    on_branch = bool(ctx.branch_prefix)          # the branch on screen: decode it again, same forced prefix
    ablated = ctx.variant(head_mask=mask)
    old, new = result.output_tokens, ablated.output_tokens
    changed = max(changed_count(old, new), changed_count(new, old))
    summary.markdown(f"**{len(mask)} head{'s' if len(mask) != 1 else ''} off** "
                     f"({escape_md(state.format_heads(mask), 120)}) · "
                     + ("the translation did not change" if old == new
                        else f"{changed} piece{'s' if changed != 1 else ''} changed"))

    # Both runs forced through the same pieces, so step t means the same thing on both sides.
    base = ctx.variant(pieces=tuple(old))
    forced = ctx.variant(head_mask=mask, pieces=tuple(old))
    before, after = base.probs(), forced.probs()
    fig = shared_figure(result, ("ablation", mask, display.show_space), lambda: probability_change_figure(
        old, before, after, show_space=display.show_space,
        title="Probability of each original piece, original vs heads off"))     # once for an audience
    chart(fig, "ablation_probs")
    table = shared_figure(result, ("ablation_table", mask), lambda: probability_change_table(old, before, after))
    worst = table.loc[table["change"].idxmin()]
    st.caption(f"Largest drop: step {int(worst['step'])} ({escape_md(worst['piece'], 40)}), "
               f"{worst['original']:.3f} → {worst['ablated']:.3f}.")
    if on_branch:
        st.caption(f"On the branch: its first {len(ctx.branch_prefix)} pieces stay forced, and the model "
                   "decodes on from there with the heads off.")
    left, right = st.columns(2)
    with left:
        st.markdown("**Branch**" if on_branch else "**Original**")
        st.code(result.text or " ", language=None, wrap_lines=True)
        st.markdown(shared_figure(result, ("ablation_diff", mask, "old", display.show_space), lambda: diff_html(
            old, new, side="old", show_space=display.show_space)), unsafe_allow_html=True)
    with right:
        st.markdown("**With the heads switched off**")
        st.code(ablated.text or " ", language=None, wrap_lines=True)
        st.markdown(shared_figure(result, ("ablation_diff", mask, "new", display.show_space), lambda: diff_html(
            old, new, side="new", show_space=display.show_space)), unsafe_allow_html=True)
    st.dataframe(shared_table(result, ("ablation_table_arrow", mask), lambda: table), hide_index=True, key="ablation_table", column_config={
        name: st.column_config.NumberColumn(format="%.4f") for name in ("original", "ablated", "change")})
    return fig


VIEW = View(
    name="Ablation", title="Switch heads off",
    explains="Tick heads to switch them off: the sentence is translated again without them, and the chart "
             "shows how much each original output piece lost or gained in probability.",
    render=render)
