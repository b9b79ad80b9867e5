"""Masks: which positions attention may look at (padding, causal, both), alone and in a padded batch."""
from __future__ import annotations

import streamlit as st

from transformer.masks import causal_mask, decoder_mask, padding_mask
from viz import batch_padding_figure, mask_figure

from ..ui.common import chart, column_width, escape_md, shared_figure
from ..server.settings import FALLBACK_EXAMPLES
from .base import View, ViewContext

MASK_TEXT = {
    "padding": "**Source padding mask.** A query may attend only to real source pieces: the `<pad>` "
               "positions that fill a batch up to its longest sentence are blocked "
               "(:blue-background[blue] = may attend, :gray-background[grey] = masked).",
    "causal": "**Causal mask.** Decoder step t may look only at the pieces fed so far (positions ≤ t), "
              "never at pieces it has not produced yet.",
    "combined": "**Combined decoder mask.** Decoder self-attention applies both: a key is visible only if "
                "it is in the past *and* is a real piece, not padding.",
}


def batch_sentences(examples: list, source_key: str, current: str, count: int = 2) -> list:
    """Two other sentences for the padded batch: examples first, then the built-in ones."""
    others = [row[source_key] for row in examples if row.get(source_key) and row[source_key] != current]
    fallback = [row["en"] for row in FALLBACK_EXAMPLES if row["en"] != current]
    return (others + fallback)[:count]


MASK_HEIGHT = 460      # px, the causal and combined masks of this sentence: the view's picture
PADDING_HEIGHT = 170   # px, its one-row padding mask: a row of blocks, not a thin strip


def render(ctx: ViewContext):
    """This sentence's masks, then a padded batch of it and two examples."""
    result = ctx.result
    sentences = batch_sentences(ctx.examples, ctx.source_key, ctx.text)
    batch = [("this sentence", result)] + [(f"example {i + 1}", ctx.translate_other(sentence))
                                           for i, sentence in enumerate(sentences)]
    S, T = len(result.source_tokens), len(result.output_tokens)
    # the two square masks side by side in halves, the one-row padding mask across the page under
    # them: in thirds, with the padding mask beside them, a 1280x720 window showed 260 px of maps
    # (115 px wide in presenter mode)
    halves = [1, 1]
    width = column_width(halves, 0)

    def tall(fig):                    # the view's picture: tall enough to read each cell
        return fig.update_layout(height=max(fig.layout.height or 0, MASK_HEIGHT))

    # every map depends on the runs only: built once per process for an audience on the link
    # (set while building: a shared figure is never changed after, other sessions are reading it)
    # no colour bars on these three (the padding mask's text names the colours): beside a map the
    # bar and its words took as much room as the cells
    figures = [
        ("causal", shared_figure(result, ("mask_causal", width), lambda: tall(mask_figure(
            causal_mask(T), result.output_tokens, result.target_tokens, "Causal mask", width=width,
            legend=False)))),
        ("combined", shared_figure(result, ("mask_combined", width), lambda: tall(mask_figure(
            decoder_mask([T], T)[0], result.output_tokens, result.target_tokens, "Combined decoder mask",
            width=width, legend=False)))),
    ]
    for column, (name, fig) in zip(st.columns(halves), figures):
        with column:
            chart(fig, f"mask_{name}")
            st.markdown(MASK_TEXT[name])
    chart(shared_figure(result, ("mask_padding", "across"), lambda: mask_figure(
        result.source_padding, None, result.source_tokens, "Source padding mask", legend=False,
        height=PADDING_HEIGHT)), "mask_padding")
    st.markdown(MASK_TEXT["padding"])
    st.caption(f"Alone, this sentence has no padding (all {S} source pieces are real), so its combined mask "
               "equals the causal one. The padded batch below shows the difference.")

    st.subheader("A padded batch: this sentence and two examples")
    labels = [label for label, _ in batch]
    source_lengths = [len(r.source_tokens) for _, r in batch]
    target_lengths = [len(r.output_tokens) for _, r in batch]
    S_max, T_max = max(source_lengths), max(target_lengths)
    chart(shared_figure(result, ("mask_batch", tuple(labels), tuple(source_lengths)), lambda: batch_padding_figure(
        padding_mask(source_lengths, S_max), labels, [str(i) for i in range(S_max)],
        f"Source padding mask of the batch (padded to {S_max} pieces)")), "mask_batch_padding")
    st.markdown(MASK_TEXT["padding"])
    named = zip([label for label, _ in batch[1:]], sentences)
    st.caption(" · ".join(f"{escape_md(label)}: {escape_md(text, 80)}" for label, text in named)
               + ". The decoder masks below use each translation's length.")
    combined = decoder_mask(target_lengths, T_max)
    positions = [str(i) for i in range(T_max)]
    columns = st.columns(shares := [1] * len(batch))
    for index, (column, label) in enumerate(zip(columns, labels)):
        with column:
            chart(shared_figure(result, ("mask_batch_decoder", label, tuple(target_lengths)), lambda: mask_figure(
                combined[index], positions, positions, f"{label}: {target_lengths[index]} of {T_max} real",
                width=column_width(shares, index))),
                  f"mask_batch_decoder_{index}")
    st.markdown(MASK_TEXT["combined"])
    return figures[1][1]


VIEW = View(
    name="Masks", title="Attention masks",
    explains="Grey cells are positions attention may not look at: padding that fills up a batch, and "
             "output pieces the decoder has not written yet.",
    render=render)
