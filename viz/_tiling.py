"""Where each head's tile sits in a tiled map (viz/overview.py): the grid, its gaps, each row's and
column's position."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Tiling:
    """Where tile (layer, head) sits in the grid: rows l*(Q+gap) + q, cols h*(K+gap) + k."""
    z: np.ndarray            # (R, C) weights (or each tile / its max) with NaN gaps
    raw: np.ndarray | None   # (R, C) the raw weights when z is normalised, else None
    row_of: np.ndarray       # (R,) query position of each grid row, -1 in gaps
    col_of: np.ndarray       # (C,) key position of each grid column, -1 in gaps
    step_q: int              # Q + gap
    step_k: int              # K + gap


def default_gap(Q: int, K: int) -> int:
    """Gap in cells: about 1/16 of a tile, so it stays visible at 128 tokens."""
    return max(1, round(max(Q, K) / 16))


def tile(w: np.ndarray, *, gap: int, normalize: bool, row_gap: int | None = None) -> Tiling:
    """Lay out (L, H, Q, K) weights as an (L*(Q+row_gap)-row_gap, H*(K+gap)-gap) grid
    (`row_gap` defaults to `gap`; a head grid leaves room for its tile titles).

    With `normalize`, each tile is divided by its own max (so every head spans the
    full colour scale) and the raw weights are kept alongside for the hover.
    """
    L, H, Q, K = w.shape
    row_gap = gap if row_gap is None else row_gap
    sq, sk = Q + row_gap, K + gap
    R, C = L * sq - row_gap, H * sk - gap
    dtype = np.result_type(w.dtype, np.float32)
    z = np.full((R, C), np.nan, dtype=dtype)
    raw = np.full((R, C), np.nan, dtype=np.float32) if normalize else None
    for l in range(L):
        for h in range(H):
            block = (slice(l * sq, l * sq + Q), slice(h * sk, h * sk + K))
            tile_w = w[l, h]                                                # (Q, K)
            if normalize:
                peak = float(tile_w.max()) if tile_w.size else 0.0
                z[block] = tile_w / peak if peak > 0 else tile_w
                raw[block] = tile_w
            else:
                z[block] = tile_w
    row_of, col_of = np.full(R, -1), np.full(C, -1)
    for l in range(L):
        row_of[l * sq:l * sq + Q] = np.arange(Q)
    for h in range(H):
        col_of[h * sk:h * sk + K] = np.arange(K)
    return Tiling(z, raw, row_of, col_of, sq, sk)
