"""Hover for the tiled maps (viz/overview.py) from one label per grid row and column.

A hover string per cell was 0.7 MB of an Overview link (9,600 cells) and 0.3 MB of a Layer grid's,
sent to every phone of a room at each move; these labels are a few KB (benchmarks/bench_tiled_hover.py).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ._labels import escape_label
from ._tiling import Tiling


def value_line(value_title: str, weight: str, normalize: bool = False) -> str:
    """The hover's last line: "weight 0.1234" (with `normalize`, the colour's meaning too)."""
    return f"{escape_label(value_title)} {weight}" + (" (colour: share of head max)" if normalize else "")


def overview_labels(t: Tiling, q_labels: Sequence[str], k_labels: Sequence[str], first_layer: int | None,
                    heads_down: bool = False) -> tuple[list[str], list[str]]:
    """One hover label per grid row ("Layer 1 · query 3: ▁a") and per column ("head 2 · key 4: ▁b")
    of the Overview's grid, where tile rows are layers and tile columns heads (`heads_down`: the other
    way round, "head 2 · query 3: ▁a" and "Layer 1 · key 4: ▁b")."""
    def layer(index: int) -> str:
        return "" if first_layer is None else f"Layer {index + first_layer} · "

    def name(tile: int, down: bool) -> str:             # what a tile row (down) or column names
        return f"head {tile} · " if down == heads_down else layer(tile)
    rows = [f"{name(r // t.step_q, True)}query {i}: {q_labels[i]}" if i >= 0 else f"gap {r}"
            for r, i in enumerate(t.row_of)]
    cols = [f"{name(c // t.step_k, False)}key {j}: {k_labels[j]}" if j >= 0 else f"gap {c}"
            for c, j in enumerate(t.col_of)]
    return rows, cols


def label_axes(heat: dict, layout: dict, rows: Sequence[str], cols: Sequence[str]) -> None:
    """A tiled map's hover from one label per grid row and one per column (the module's docstring says why).

    The heatmap moves onto hidden category axes x2, y2 whose categories are these labels, so
    %{y} and %{x} name the cell (on x, y themselves plotly.js would name the nearest tick). Both
    pairs get the same fixed ranges, so they lie exactly over each other and zoom together; x and y
    keep the ticks, the head markers and the outlines, in grid units as before (pin_under_labels
    gives x and y the ranges once their ticks are set)."""
    R, C = len(rows), len(cols)
    if len(set(rows)) < R or len(set(cols)) < C:     # a category axis would merge equal labels
        raise ValueError("a tiled map's row and column labels must be unique")
    heat.update(x=list(cols), y=list(rows), xaxis="x2", yaxis="y2")
    x_range, y_range = [-0.5, C - 0.5], [R - 0.5, -0.5]                # y: row 0 at the top
    # no ticks to compute for axes nobody sees: 3 ms of a 20-piece Overview's draw (bench_tiled_hover.py)
    hidden = dict(type="category", visible=False, autorange=False, constrain="domain", tickmode="array", tickvals=[])
    layout["xaxis2"] = dict(hidden, overlaying="x", range=x_range)
    layout["yaxis2"] = dict(hidden, overlaying="y", range=y_range, scaleanchor="x2")


def pin_under_labels(layout: dict) -> None:
    """x and y take the fixed ranges of the label axes laid over them (label_axes), if any: left to
    autorange, they would grow by the head markers' half size and the cells would shift."""
    for name in ("xaxis", "yaxis"):
        if name + "2" in layout:
            layout[name].update(range=layout[name + "2"]["range"], autorange=False)


def grid_labels(heat: dict, layout: dict, t: Tiling, columns: int, q_labels, k_labels, layer: int | None,
                normalize: bool, value_title: str) -> None:
    """A wrapped head grid's hover: its rows and columns name query and key (label_axes), and each
    cell's head (tile row x columns + tile column) comes from a small typed customdata. The same
    query or key recurs in every tile row or column: a zero-width space per tile row or column
    keeps the categories apart without showing."""
    R, C = t.z.shape
    rows = [f"query {i}: {q_labels[i]}" + "\u200b" * (r // t.step_q) if i >= 0 else f"gap {r}"
            for r, i in enumerate(t.row_of)]
    cols = [f"key {j}: {k_labels[j]}" + "\u200b" * (c // t.step_k) if j >= 0 else f"gap {c}"
            for c, j in enumerate(t.col_of)]
    label_axes(heat, layout, rows, cols)
    head_at = ((np.arange(R) // t.step_q)[:, None] * columns + (np.arange(C) // t.step_k)[None, :]).astype(np.int16)
    if normalize:                                  # [raw weight, head] per cell
        heat["customdata"] = np.stack([heat["customdata"], head_at.astype(np.float32)], axis=-1)
        weight, head = "%{customdata[0]:.4f}", "%{customdata[1]}"
    else:
        heat["customdata"], weight, head = head_at, "%{z:.4f}", "%{customdata}"
    prefix = "" if layer is None else f"Layer {layer} · "
    heat["hovertemplate"] = (f"{prefix}head {head}<br>%{{y}} → %{{x}}<br>"
                             + value_line(value_title, weight, normalize) + "<extra></extra>")
