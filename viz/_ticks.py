"""Which tick labels survive when an axis has too many for its length (presenter type, a phone).

Every k-th label is kept; the labels a figure marks as highlighted (the current step's row, the
column of the cell a picture points at) are always among them, so a bright or framed cell never
stands on an unlabelled column. A figure marks them with keep_labels; presenter_figure and
phone_figure thin through thinned_ticks.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

KEEP = "keep_ticks"             # layout.meta's entry: {"xaxis": [tick values], "yaxis": [...]}
TILES = "tile_ticks"            # layout.meta's entry: {"xaxis": period, ...} of ticks repeated per tile


def keep_labels(fig: go.Figure, **axes: Sequence[float]) -> go.Figure:
    """Mark tick values whose labels thinning must keep, per axis: keep_labels(fig, xaxis=[3]).
    The first value of an axis wins where two marked labels stand too close for both."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    marked = {**meta.get(KEEP, {}), **{name: [float(v) for v in values] for name, values in axes.items()}}
    fig.update_layout(meta={**meta, KEEP: marked})
    return fig


def kept_values(fig: go.Figure, axis_name: str) -> list[float]:
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    return list((meta.get(KEEP) or {}).get(axis_name, ()))


def tile_ticks(layout: dict, **periods: float) -> None:
    """Mark axes whose ticks repeat tile after tile (a grid of maps, the same pieces in each), by
    their period in axis units: tile_ticks(layout, xaxis=step). Thinning then keeps the same
    labels in every tile (thinned_tile_ticks), not a different every-k-th in each."""
    meta = layout.get("meta") if isinstance(layout.get("meta"), dict) else {}
    layout["meta"] = {**meta, TILES: {**meta.get(TILES, {}), **{name: float(p) for name, p in periods.items()}}}


def tile_period(fig: go.Figure, axis_name: str) -> float | None:
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    return (meta.get(TILES) or {}).get(axis_name)


def thinned_tile_ticks(values: Sequence[float], every: int, period: float, keep_last: bool = True) -> list[int]:
    """thinned_ticks for an axis whose ticks repeat every `period` units: the labels kept in the
    first tile (every `every`-th of its ticks), and the same positions in every other tile.
    `keep_last=False`: a tile's last tick loses its label when others are dropped (a grid's bottom row
    label sat on the axis, on the first upright x label, and on the next row's head titles)."""
    local = [float(v) - np.floor(float(v) / period) * period for v in values]
    positions = sorted(set(local))
    kept = [positions[i] for i in thinned_ticks(positions, every)]
    if not keep_last and every > 1 and len(kept) > 1 and kept[-1] == positions[-1]:
        kept.pop()
    # a tile's last label and the next tile's first stand as far apart as any two (else "</s>Two")
    spacing = every * min((b - a for a, b in zip(positions, positions[1:])), default=period)
    several = len({np.floor(float(v) / period) for v in values}) > 1
    while several and len(kept) > 1 and period + kept[0] - kept[-1] < spacing - 1e-9:
        kept.pop()
    kept_set = set(kept)
    return [i for i, at in enumerate(local) if at in kept_set]


def thinned_ticks(values: Sequence[float], every: int, kept: Sequence[float] = ()) -> list[int]:
    """Indices into `values` (tick values, in order) of the labels to keep: the marked ones that are
    ticks here, then every `every`-th of the rest, each at least `every` ticks from any label kept."""
    if every <= 1:
        return list(range(len(values)))
    position = {float(v): i for i, v in enumerate(values)}
    chosen: list[int] = []
    for value in kept:
        i = position.get(float(value))
        if i is not None and all(abs(i - j) >= every for j in chosen):
            chosen.append(i)
    # the regular grid, shifted so that it runs through the first marked label (fewest dropped)
    start = chosen[0] % every if chosen else 0
    chosen += [i for i in range(start, len(values), every) if all(abs(i - j) >= every for j in chosen)]
    return sorted(chosen)


def keep_peak_labels(fig: go.Figure) -> go.Figure:
    """Mark the row and column of the first heatmap's brightest cell (keep_labels): the cell a
    one-step map points at (Decoding steps) keeps its piece's label when the others are thinned."""
    heat = next((trace for trace in fig.data if trace.type == "heatmap" and trace.z is not None), None)
    z = np.asarray(heat.z, dtype=float) if heat is not None else np.zeros((0, 0))
    if z.ndim != 2 or not z.size or np.all(np.isnan(z)):
        return fig
    row, column = np.unravel_index(int(np.nanargmax(z)), z.shape)
    return keep_labels(fig, xaxis=[int(column)], yaxis=[int(row)])
