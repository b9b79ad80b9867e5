"""Views of the model's mechanics: decoding step by step, masks, positional encodings."""
from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.masks import causal_mask, decoder_mask, padding_mask
from viz import (attention_heatmap, batch_padding_figure, embedding_figure, mask_figure, merge_keys,
                 position_bias_figure, position_similarity_figure, positional_encoding_figure, topk_bar_figure)

from . import state
from .common import chart, escape_md, heat_height, n_heads, norm_caption, norm_switch, pick_cross_head, value_options

MASK_TEXT = {
    "padding": "**Source padding mask.** A query may attend only to real source pieces: the `<pad>` "
               "positions that fill a batch up to its longest sentence are blocked "
               "(grey = blocked, blue = may attend).",
    "causal": "**Causal mask.** Decoder step t may look only at the pieces fed so far (positions ≤ t), "
              "never at pieces it has not produced yet.",
    "combined": "**Combined decoder mask.** Decoder self-attention applies both: a key is visible only if "
                "it is in the past *and* is a real piece, not padding.",
}


def _step_nav(step_count: int, presenter: bool = False) -> int:
    """Slider plus previous/next buttons over the decoding steps; returns the 0-based step.

    In presenter mode the slider gives way to big buttons bound to the ← and → keys (a focused
    slider would take the arrow keys too, and move twice).
    """
    if step_count <= 1:
        state.put("step", 0)
        st.caption("This output has a single step.")
        return 0
    state.restore("step", 0, lambda v: isinstance(v, int) and 0 <= v < step_count)
    current = st.session_state["step"]
    keys = dict(prev=dict(shortcut="Left"), next=dict(shortcut="Right")) if presenter else dict(prev={}, next={})
    columns = st.columns([1, 1, 6])
    columns[0].button("◀ Prev", key="step_prev", on_click=_move_step, args=(-1, step_count),
                      disabled=current <= 0, **keys["prev"])
    columns[1].button("Next ▶", key="step_next", on_click=_move_step, args=(1, step_count),
                      disabled=current >= step_count - 1, **keys["next"])
    with columns[2]:
        if presenter:
            state.remember("step", current)
            st.markdown(f"### Step {current + 1} of {step_count}")
            return current
        return state.int_slider("Decoding step", 0, step_count - 1, "step", 0, label_visibility="collapsed")


def _move_step(delta: int, step_count: int) -> None:
    current = state.kept("step", 0)
    state.put("step", int(min(max(current + delta, 0), step_count - 1)))


def steps_view(result, display, contributions=None):
    """`contributions(result, display, t)` draws the step's ALTI+ source/prefix rows (explained runs)."""
    norm = norm_switch(display)
    steps = result.steps
    t = _step_nav(len(steps), display.presenter)
    token, prob, top_k = steps[t]
    prefix = result.target_tokens[: t + 1]
    counter = "" if display.presenter else f"Step {t + 1} of {len(steps)}\n"    # presenter: a heading says it
    st.text(f"{counter}Prefix fed: {' '.join(prefix)}\nChosen piece: {token}   p = {prob:.3f}")
    layer, head, all_heads = pick_cross_head(result, "All heads of the layer", "step_all_heads")
    left, right = st.columns([2, 3])
    with left:
        chart(topk_bar_figure(top_k, chosen=(token, prob), title=f"Top {len(top_k)} candidates at step {t + 1}",
                              show_space=display.show_space), "step_topk")
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
                   hide_special=display.hide_special, query_title=row_title, height=heat_height(len(rows), 220))
    scales = {kind: _scale(value_options(result, display, kind), part)
              for kind, part in (("cross", cross), ("decoder_self", self_att))}
    what = " · norm-weighted" if norm else ""
    cross_fig = attention_heatmap(cross, rows, source, f"Cross-attention over the source · {where}{what}",
                                  **options, **scales["cross"])
    with right:
        chart(cross_fig, "step_cross")
        chart(attention_heatmap(self_att, rows, prefix, f"Decoder self-attention over the prefix · {where}{what}",
                                **options, **scales["decoder_self"]), "step_self")
    norm_caption(norm, cross_fig, display.normalize)
    if contributions is not None:
        contributions(result, display, t)
    return cross_fig


def _scale(options: dict, shown) -> dict:
    """The kind's norm-weighted colour scale, widened if merged words add up to more."""
    if options and np.size(shown):
        options = {**options, "zmax": max(options["zmax"], float(np.max(shown)))}
    return options


def masks_view(result, batch: list, sentences: list):
    """`batch`: [(label, Result)] of this sentence and the examples `sentences`, for the padded batch."""
    S, T = len(result.source_tokens), len(result.output_tokens)
    st.subheader("This sentence")
    columns = st.columns(3)
    figures = [
        ("padding", mask_figure(result.source_padding, None, result.source_tokens,
                                "Source padding mask")),
        ("causal", mask_figure(causal_mask(T), result.output_tokens, result.target_tokens, "Causal mask")),
        ("combined", mask_figure(decoder_mask([T], T)[0], result.output_tokens, result.target_tokens,
                                 "Combined decoder mask")),
    ]
    for column, (name, fig) in zip(columns, figures):
        with column:
            chart(fig, f"mask_{name}")
            st.markdown(MASK_TEXT[name])
    st.caption(f"Alone, this sentence has no padding (all {S} source pieces are real), so its combined mask "
               "equals the causal one. The padded batch below shows the difference.")

    st.subheader("A padded batch: this sentence and two examples")
    labels = [label for label, _ in batch]
    source_lengths = [len(r.source_tokens) for _, r in batch]
    target_lengths = [len(r.output_tokens) for _, r in batch]
    S_max, T_max = max(source_lengths), max(target_lengths)
    chart(batch_padding_figure(padding_mask(source_lengths, S_max), labels, [str(i) for i in range(S_max)],
                              f"Source padding mask of the batch (padded to {S_max} pieces)"), "mask_batch_padding")
    st.markdown(MASK_TEXT["padding"])
    named = zip([label for label, _ in batch[1:]], sentences)
    st.caption(" · ".join(f"{escape_md(label)}: {escape_md(text, 80)}" for label, text in named)
               + ". The decoder masks below use each translation's length.")
    combined = decoder_mask(target_lengths, T_max)
    positions = [str(i) for i in range(T_max)]
    columns = st.columns(len(batch))
    for index, (column, label) in enumerate(zip(columns, labels)):
        with column:
            chart(mask_figure(combined[index], positions, positions,
                              f"{label}: {target_lengths[index]} of {T_max} real"),
                  f"mask_batch_decoder_{index}")
    st.markdown(MASK_TEXT["combined"])
    return figures[2][1]


PE_TEXT = {
    "sinusoidal": ("Sinusoidal positional encoding", "Each row is one position, each column one dimension: sines "
                   "and cosines of falling frequency, added to the token embeddings so that attention can tell "
                   "positions apart."),
    "learned": ("Learned positional embeddings", "Each row is one position, each column one dimension: a table "
                "the model learned, added to the token embeddings (rows as the model indexes them, offset "
                "included)."),
}


def position_bias_view(result):
    """T5 adds nothing to the embeddings: each head adds a learned bias, by query-key distance,
    to its attention logits. Show that bias per head, and say so."""
    st.info("This model (T5) has no positional encoding: nothing is added to the token embeddings. Instead "
            "each encoder head adds a learned bias, bucketed by the distance from query to key, to its "
            "attention logits before the softmax. Below is that bias, per head, for this sentence.")
    bias = np.asarray(result.position_bias)                            # (H, S, S)
    head = state.selectbox("Head", range(bias.shape[0]), "pe_bias_head")
    fig = position_bias_figure(bias[head], result.source_tokens,
                               f"Relative position bias · encoder · head {head}")
    chart(fig, "pe_bias")
    st.caption("Rows are queries, columns keys; red raises a key's logit, blue lowers it. Every layer "
               "reuses the first layer's bias.")
    embeddings = np.asarray(result.source_embeddings)
    chart(embedding_figure(embeddings, result.source_tokens, "Source embeddings: what the first encoder layer "
                           "receives (no positions added)"), "pe_before")
    return fig


def pe_view(result):
    if result.positional_kind == "relative_bias" and result.position_bias is not None:
        return position_bias_view(result)
    S = len(result.source_tokens)
    pe = np.asarray(result.positional_encoding[:S])
    tokens = result.source_tokens
    name, text = PE_TEXT.get(result.positional_kind, PE_TEXT["sinusoidal"])
    columns = st.columns(2)
    main = positional_encoding_figure(pe, tokens, f"{name} ({S} positions)")
    with columns[0]:
        chart(main, "pe_matrix")
        st.caption(text)
    with columns[1]:
        chart(position_similarity_figure(pe, tokens, "Dot-product similarity between positions"), "pe_similarity")
        st.caption("Nearby positions have similar encodings; the similarity falls off with distance.")
    columns = st.columns(2)
    embeddings = np.asarray(result.source_embeddings)
    with columns[0]:
        chart(embedding_figure(embeddings, tokens, "Source embeddings × √d_model, before PE"), "pe_before")
    with columns[1]:
        chart(embedding_figure(embeddings + pe, tokens, "After adding the positional encoding"), "pe_after")
    st.caption("What the first encoder layer receives: " + escape_md(f"{S} pieces × {pe.shape[1]} dimensions."))
    return main
