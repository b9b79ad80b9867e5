"""Compare: the sentence and an edited copy (a word swapped for an embedding neighbour, or typed
anew) translated side by side; or up to four heads side by side."""
from __future__ import annotations

import re

import numpy as np
import streamlit as st

from viz.compare import changed_table, swap_map_figure, swap_pieces_figure
from viz import is_special
from viz.words import word_spans

from ..ui import state
from ..runs.compare import default_swap, pair_runs, swapped_text, word_neighbours
from ..ui.common import (as_arrow, chart, column_width, escape_md, n_heads, n_layers, norm_caption, norm_switch,
                      shared_figure)
from ..server.settings import KIND_LABELS, KINDS, MAX_CHARS, MAX_COMPARE_HEADS, max_concurrent
from .base import View, ViewContext
from .compare_patching import carries_section
from .shared import head_heatmap

MODES = {"swap": "Edit the source", "heads": "Heads side by side"}
# cross-attention first: a swap then costs one plain translation (ALTI+ explains both runs: ~3x the time,
# benchmarks/bench_swap.py --values alti)
VALUES = {"cross": "Cross-attention (last layer, mean of heads)", "alti": "ALTI+ contributions"}
MARKERS = "\u2581\u0120"
LANGUAGE_CODE = re.compile(r"^(__\w+__|>>\w+<<|[a-z]{2,3}_[A-Z][A-Za-z]{1,3})$")   # m2m, Marian, mBART/NLLB
DEFAULT_FOR = "_compare_default_for"   # (sentence, the default edit made for it)
SWAP_NOTE = "_compare_swap_note"       # a message from the swap callback for this run


def _pick_label(pick: str) -> str:
    kind, layer, head = pick.split(":")
    return f"{KIND_LABELS[kind]} · L{layer} · H{head}"


def source_words(result) -> list[tuple[int, int, str]]:
    """(start, stop, word) of each source word a swap may replace: words with a letter or digit,
    not special pieces or language codes."""
    pieces = result.source_tokens
    words = []
    for start, stop in word_spans(pieces):
        text = "".join(pieces[start:stop]).lstrip(MARKERS)
        if any(ch.isalnum() for ch in text) and not is_special(text) and not LANGUAGE_CODE.match(text):
            words.append((start, stop, text))
    return words


def default_edit(ctx: ViewContext) -> str:
    """A fresh link shows a swap at once: the longest word swapped for its nearest neighbour."""
    words = sorted(source_words(ctx.result), key=lambda w: (-len(w[2]), w[0]))
    return default_swap(ctx.model, ctx.device, tuple(ctx.result.source_tokens),
                        tuple((start, stop) for start, stop, _ in words[:3]))


def seed_edit(ctx: ViewContext) -> None:
    """Before the field is drawn: a default swap when there is no edited sentence yet, renewed when
    the sentence above changes while the edited one is still the old default."""
    text = ctx.text[:MAX_CHARS]
    made_for, made = st.session_state.get(DEFAULT_FOR, (None, None))
    current = state.kept("compare_text")
    if current is None or (made_for != text and current == made):
        made = default_edit(ctx)
        st.session_state[DEFAULT_FOR] = (text, made)
        state.put("compare_text", made)


def _on_swap(ctx: ViewContext, words: list, word: int, key: str) -> None:
    """A neighbour picked: the edited sentence becomes the sentence with that word swapped."""
    piece = st.session_state.get(key)
    if not piece or not 0 <= word < len(words):
        return
    start, stop, _ = words[word]
    edited = swapped_text(ctx.model, ctx.device, ctx.result.source_tokens, start, stop, piece)
    state.put("compare_text", edited)
    if not edited.strip():
        st.session_state[SWAP_NOTE] = "That swap leaves the source empty: pick another word or neighbour."


def swap_controls(ctx: ViewContext) -> None:
    """Click a source word, then one of its nearest neighbours in the model's embedding space."""
    words = source_words(ctx.result)
    if not words:
        st.info("This sentence has no word to swap.")
        return
    options = list(range(len(words)))
    state.restore("compare_word", None, lambda v: v is None or v in options)
    word = state.remember("compare_word", st.pills(
        "Swap a word: click a source word", options, key="compare_word", selection_mode="single",
        format_func=lambda i: escape_md(words[i][2], 40)))
    if word is None:
        return
    start, stop, text = words[word]
    found = word_neighbours(ctx.model, ctx.device, tuple(ctx.result.source_tokens[start:stop]))
    if not found:
        st.info(f"“{escape_md(text, 40)}” has no neighbours in this model's vocabulary: pick another word.")
        return
    similarity = dict(found)
    key = f"compare_swap_{word}"
    st.radio(f"Nearest to “{escape_md(text, 40)}” in the model's source embeddings (cosine similarity): "
             "pick one to swap it in", list(similarity), key=key, index=None, horizontal=True,
             format_func=lambda p: f"{escape_md(p.lstrip(MARKERS), 40)} ({similarity[p]:.2f})",
             on_change=_on_swap, args=(ctx, words, word, key))
    if stop - start > 1:
        st.caption("This word is several pieces: its neighbours are those of its pieces' mean embedding, "
                   "and the whole word is replaced by one piece.")


def edited_sentence(ctx: ViewContext, where) -> str | None:
    """The edited sentence to translate, or None after a message saying why there is none."""
    with where:
        edited = state.text_input("Edited sentence", "compare_text", "", placeholder="Type a sentence, or "
                                  "swap a word below", help="Translated with the same model and decoding; "
                                  "kept in the share link.", label_visibility="collapsed")
    note = st.session_state.pop(SWAP_NOTE, None)
    if note and not edited.strip():
        st.info(note)
        return None
    if not edited.strip():
        st.info("The edited sentence is empty: type one above, or swap a word below.")
        return None
    if len(edited) > MAX_CHARS:
        st.warning(f"The edited sentence has {len(edited)} characters, more than the {MAX_CHARS} allowed: "
                   "shorten it to compare.")
        return None
    return edited


def swap_mode(ctx: ViewContext, where):
    """Both translations side by side: the main map, the pieces with their probabilities, the
    changed pieces, then the swap controls (a click there changes the edited sentence above)."""
    display = ctx.display
    seed_edit(ctx)
    with where[1]:
        values = state.selectbox("Values", list(VALUES), "compare_values", format_func=VALUES.get,
                                 label_visibility="collapsed")
    edited = edited_sentence(ctx, where[0])
    figure = pair = None
    if edited is not None:
        try:
            original, other, note = pair_runs(ctx.model, ctx.device, ctx.text[:MAX_CHARS], edited, ctx.beam,
                                              max_concurrent(), values == "alti")
        except ValueError as exc:
            st.info("The edited sentence cannot be translated: " + escape_md(str(exc), 200))
            original = None
        except (RuntimeError, TimeoutError) as exc:
            st.warning("Could not translate the edited sentence: " + escape_md(str(exc), 200))
            original = None
        if original is not None:
            pair = (original, other)
            figure = draw_pair(original, other, values if not note else "cross", display)
            if note:
                st.caption(escape_md(note, 300) + " Showing cross-attention.")
            if ctx.target:
                st.caption("Both sentences are decoded freely here (the reference above applies to the first only).")
    swap_controls(ctx)
    if pair is not None:
        carries_section(ctx, *pair, edited)
    return figure


def draw_pair(a, b, values: str, display):
    """The main map, then the aligned pieces and the changed-pieces table."""
    title = "contribution" if values == "alti" else "attention"

    def maps():         # only when a figure or the table is built, not on each session's run
        if values == "alti":
            return a.source_contribution, b.source_contribution
        return tuple(run.attention["cross"][-1].mean(axis=0) for run in (a, b))

    # built once per process for an audience (shared only when both runs are named)
    owner, pair = (a if getattr(b, "key", "") else None), (getattr(b, "key", ""), values, display.show_space)
    fig = shared_figure(owner, ("compare_map", *pair), lambda: swap_map_figure(
        *maps(), a.output_tokens, b.output_tokens, a.source_tokens, b.source_tokens,
        f"{VALUES[values]}: original (left), edited (right)", value_title=title, show_space=display.show_space,
        height=int(np.clip(260 + 22 * max(len(a.output_tokens), len(b.output_tokens)), 480, 900))))
    chart(fig, "compare_swap_map")
    pieces = shared_figure(owner, ("compare_pieces", *pair), lambda: swap_pieces_figure(
        a.source_tokens, b.source_tokens, a.output_tokens, b.output_tokens, a.probs(), b.probs(),
        show_space=display.show_space))
    chart(pieces, "compare_swap_pieces")
    table = shared_figure(owner, ("compare_table", *pair), lambda: changed_table(
        a.output_tokens, b.output_tokens, a.probs(), b.probs(), *maps(), a.source_tokens, b.source_tokens))
    if table.empty:
        st.caption("Both translations have the same pieces; only their probabilities and the maps differ.")
    else:
        st.caption("Output pieces that changed, and how much of each came from the edited source pieces "
                   f"({title}, share of the row).")
        st.dataframe(as_arrow(owner, ("compare_table", *pair), table), hide_index=True, key="compare_changed")
    return fig


def heads_mode(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    norm = norm_switch(display)
    heads = n_heads(result)
    options = [f"{kind}:{layer}:{head}" for kind in KINDS for layer in range(n_layers(result, kind))
               for head in range(heads)]
    last = n_layers(result, "cross") - 1
    picks = state.multiselect(f"Up to {MAX_COMPARE_HEADS} heads", options, "compare_heads",
                              ["encoder_self:0:0", f"cross:{last}:0"], MAX_COMPARE_HEADS,
                              format_func=_pick_label)
    figures = []
    shares = [1] * max(1, len(picks))
    for index, (column, pick) in enumerate(zip(st.columns(shares), picks)):
        kind, layer, head = pick.split(":")
        with column:
            figures.append(head_heatmap(result, display, kind, int(layer), int(head), f"compare_head_{index}",
                                        height=480, width=column_width(shares, index)))
    norm_caption(norm, figures[0] if figures else None, display.normalize)
    return figures[0] if figures else None


def render(ctx: ViewContext):
    columns = st.columns([1.4, 3.2, 2.8], vertical_alignment="center")      # the values' name whole
    with columns[0]:
        mode = state.selectbox("Compare", list(MODES), "compare_mode", format_func=MODES.get,
                               label_visibility="collapsed")
    if mode == "heads":
        return heads_mode(ctx)
    return swap_mode(ctx, columns[1:])


VIEW = View(
    name="Compare", title="An edited sentence, or heads, side by side",
    explains="Swap a source word for a similar one (or type a sentence) and compare both translations: "
             "what changed, how sure the model was, where each piece came from.",
    render=render, norm_switch=True,
    url_fields=(("edited", "compare_text", str), ("compare", "compare_mode", str), ("cvalues", "compare_values", str)))
