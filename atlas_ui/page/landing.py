"""What a new visitor sees first: cross-attention, on the head that aligns words best.

The encoder's layer 0, head 0 (the old first screen) is a diffuse square that says nothing; a
cross-attention head that aligns output pieces with source pieces says at once what attention is.
So the first screen opens on the best aligner of the model's head_roles.json (issue 34: en-de's
layer 1, head 7 draws the sentence's translation pairs on a near diagonal, where head_importance's
first, layer 2, head 3, reads ahead to the next noun); without that file, on the head whose removal
costs the most loss (head_importance.json); without either, on the most peaked head.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz import top_heads

from ..ui import state
from ..runs.alignment import best_alignment_head
from ..runs.explain import head_importance

LANDED = "_landed"             # session key: the first screen was chosen once


def landing_head(model_path: str, cross_attention: np.ndarray) -> tuple[int, int]:
    """(layer, head) of cross-attention to open on: the best aligner of the model's head_roles.json;
    without that file, the head whose removal costs the most loss in its head_importance.json;
    without that either, the most peaked head (the largest mean, over output pieces, of each row's
    largest weight). cross_attention: (L, H, T, S)."""
    aligner = best_alignment_head(model_path)
    L, H = cross_attention.shape[:2]
    if aligner is not None and 0 <= aligner[0] < L and 0 <= aligner[1] < H:
        return aligner
    data, _ = head_importance(model_path)
    if isinstance(data, dict):
        try:
            table = np.asarray(data["heads"]["cross"]["loss_change"], dtype=float)       # (L, H)
        except (KeyError, TypeError, ValueError):
            table = None
        if table is not None and table.shape == cross_attention.shape[:2] and np.isfinite(table).all():
            return top_heads(table, 1)[0]
    peaks = np.asarray(cross_attention, dtype=float).max(axis=-1).mean(axis=-1)          # (L, H)
    return top_heads(peaks, 1)[0]


def land(model_path: str, result) -> None:
    """Once per session, before the view's pickers are drawn: a visitor whose link names no
    attention kind opens cross-attention on `landing_head`; whatever the link names is kept."""
    if st.session_state.get(LANDED):
        return
    st.session_state[LANDED] = True
    if state.kept("kind") is not None:
        return
    state.put("kind", "cross")
    if state.kept("layer") is None and state.kept("head") is None:
        layer, head = landing_head(model_path, result.attention["cross"])
        state.put("layer", layer)
        state.put("head", head)
