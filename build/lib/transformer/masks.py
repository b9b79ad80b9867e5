"""Attention masks as plain functions (numpy in, numpy out) so the app can draw them.

Convention everywhere: True means "this key may be attended".
"""
from __future__ import annotations

import numpy as np


def padding_mask(lengths, S: int) -> np.ndarray:
    """bool (B, S): True for the first lengths[b] positions of each row (real tokens)."""
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if (lengths < 0).any() or (lengths > S).any():
        raise ValueError(f"lengths must lie in [0, {S}], got {lengths.tolist()}")
    return np.arange(S)[None, :] < lengths[:, None]


def causal_mask(T: int) -> np.ndarray:
    """bool (T, T): query t may see keys 0..t (on and below the diagonal)."""
    if T < 0:
        raise ValueError(f"T must be non-negative, got {T}")
    return np.tril(np.ones((T, T), dtype=bool))


def decoder_mask(lengths, T: int) -> np.ndarray:
    """bool (B, T, T): causal mask combined with the target padding mask on the keys."""
    return causal_mask(T)[None, :, :] & padding_mask(lengths, T)[:, None, :]
