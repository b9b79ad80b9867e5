"""Positional encodings: how the model tells positions apart (sinusoids, a learned table, or T5's bias)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz import embedding_figure, position_bias_figure, position_similarity_figure, positional_encoding_figure

from ..ui import state
from ..ui.common import chart, escape_md, shared_figure
from .base import View, ViewContext


CLASSIC_POSITIONS = 64      # rows of the positional-encoding picture, whatever the sentence's length
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


def render(ctx: ViewContext):
    result = ctx.result
    if result.positional_kind == "relative_bias" and result.position_bias is not None:
        return position_bias_view(result)
    S = len(result.source_tokens)
    pe = np.asarray(result.positional_encoding[:S])
    tokens = result.source_tokens
    name, text = PE_TEXT.get(result.positional_kind, PE_TEXT["sinusoidal"])
    # the classic picture: many more positions than one sentence has, this sentence's outlined
    def table() -> np.ndarray:                   # (P, D); read only when a map is built
        return np.asarray(ctx.positional_table(max(CLASSIC_POSITIONS, S)))

    columns = st.columns(2)
    # the four maps depend on the run only: built once per process for an audience on the link
    main = shared_figure(result, ("pe_matrix",), lambda: positional_encoding_figure(
        table(), title=f"{name}: {len(table())} positions", sentence=tokens))
    with columns[0]:
        chart(main, "pe_matrix")
        st.caption(text)
    with columns[1]:
        chart(shared_figure(result, ("pe_similarity",), lambda: position_similarity_figure(
            table(), None, f"Dot-product similarity between the {len(table())} positions")), "pe_similarity")
        st.caption("Nearby positions have similar encodings; the similarity falls off with distance.")
    columns = st.columns(2)
    embeddings = np.asarray(result.source_embeddings)
    with columns[0]:
        chart(shared_figure(result, ("pe_before",), lambda: embedding_figure(
            embeddings, tokens, "Source embeddings × √d_model, before PE")), "pe_before")
    with columns[1]:
        chart(shared_figure(result, ("pe_after",), lambda: embedding_figure(
            embeddings + pe, tokens, "After adding the positional encoding")), "pe_after")
    st.caption("What the first encoder layer receives: " + escape_md(f"{S} pieces × {pe.shape[1]} dimensions."))
    return main


VIEW = View(
    name="Positional encodings", title="Positional encodings",
    explains="The numbers added to each source piece to say where it stands in the sentence, since "
             "attention by itself does not know the order of the pieces.",
    render=render)
