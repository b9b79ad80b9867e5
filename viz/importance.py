"""Which heads matter over a corpus (`python -m transformer analyze`, head_importance.json):
a per-head importance map, the most important heads, and the pruning curve.
numpy/pandas/plotly only; the JSON is read elsewhere (transformer.analysis.head_importance.load_head_importance)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (DEFAULT_COLORSCALE, DIVERGING_COLORSCALE, as_array, check_heads, figure_title, head_markers,
                    matrix_heatmap, symmetric_range)
from ._figure import build_figure, plain
from ._labels import escape_label

BLEU_COLOR, CHRF_COLOR = "#1f77b4", "#ff7f0e"


def _head_table(values, name: str) -> np.ndarray:
    table = as_array(values, name, ndim=2).astype(float)
    if table.size == 0:
        raise ValueError(f"{name} is empty: give (layers, heads) values")
    return table


def top_heads(values, count: int) -> list[tuple[int, int]]:
    """The `count` (layer, head) pairs with the largest values of a (layers, heads) table,
    largest first (ties: lower layer, then lower head)."""
    table = _head_table(values, "values")
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    order = np.argsort(-table.ravel(), kind="stable")[:count]
    H = table.shape[1]
    return [(int(i // H), int(i % H)) for i in order]


def importance_figure(values, title: str = "Head importance", *, value_title: str = "importance",
                      marked: Sequence = (), colorscale=None, height: int | None = None) -> go.Figure:
    """One cell per head (rows = layers, columns = heads) with its value written in it.

    Values with both signs (a loss change can be negative: removing the head helped) get a
    diverging scale centred on 0, otherwise 0..max. `marked` [(layer, head)] get a ★ and a
    hover note. fig.data[0].z holds the values as given; fig.data[1] holds one clickable marker
    per head (customdata [layer, head], as the other head maps)."""
    table = _head_table(values, "values")
    L, H = table.shape
    marked = set(check_heads(marked, L, H))
    if table.min() < 0 < table.max():
        zmin, zmax = symmetric_range(table)
        scale = colorscale or DIVERGING_COLORSCALE
    else:
        zmin, zmax = min(0.0, float(table.min())), max(float(table.max()), 1e-12)
        scale = colorscale or DEFAULT_COLORSCALE
    cd = np.stack(np.meshgrid(np.arange(L), np.arange(H), indexing="ij"), axis=-1)        # (L, H, 2)
    label = escape_label(value_title)
    notes = [f"{label} {table[l, h]:.4g}" + (" · ★ among the most important" if (l, h) in marked else "")
             for l in range(L) for h in range(H)]
    markers = head_markers(cd[..., 1].ravel(), cd[..., 0].ravel(), cd[..., 0].ravel(), cd[..., 1].ravel(),
                           notes=notes)
    text = [["★" if (l, h) in marked else "" for h in range(H)] for l in range(L)]
    return matrix_heatmap(
        table, y_labels=[f"Layer {l}" for l in range(L)], x_labels=[f"Head {h}" for h in range(H)],
        y_title="Layer", x_title="Head", zmin=zmin, zmax=zmax, colorscale=scale, customdata=cd,
        title=title, colorbar_title=value_title, text=text, texttemplate="%{z:.3g}%{text}",
        hovertemplate=f"Layer %{{customdata[0]}} · head %{{customdata[1]}}<br>{label} %{{z:.4g}}<extra></extra>",
        height=height if height is not None else 120 + 60 * L, xgap=1, ygap=1, extra_traces=[markers])


def _series(values, name: str, length: int | None = None) -> np.ndarray:
    arr = as_array(values, name, ndim=1).astype(float)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} has {arr.size} values for {length} points")
    return arr


def pruning_curve_figure(removed, bleu, chrf=None, title: str = "Pruning curve", *,
                         total_heads: int | None = None, height: int | None = None) -> go.Figure:
    """BLEU (and chrF, if given) as heads are removed, least important first.

    removed: (N,) heads switched off at each point, non-decreasing, from 0 or more; bleu and chrf:
    (N,) scores. fig.data[0] is BLEU, fig.data[1] chrF."""
    x = _series(removed, "removed")
    if np.any(x < 0) or np.any(np.diff(x) < 0):
        raise ValueError("removed must be non-negative and non-decreasing (heads removed so far)")
    y = _series(bleu, "bleu", len(x))
    lines = [("BLEU", y, BLEU_COLOR)]
    if chrf is not None:
        lines.append(("chrF", _series(chrf, "chrf", len(x)), CHRF_COLOR))
    traces = [dict(type="scatter", mode="lines+markers", name=name, x=plain(x), y=plain(values),
                   line=dict(color=color), hovertemplate=f"{name} %{{y:.2f}}<br>%{{x:.0f}} heads removed"
                                                         "<extra></extra>")
              for name, values, color in lines]
    axis_title = "heads removed" + (f" (of {int(total_heads)})" if total_heads else "")
    # It sits in half a page: a long "Name: explanation" title goes on two lines, the legend inside
    # the plot's lower left (the scores start high there), the axes get the margin their numbers need.
    head, _, rest = title.partition(": ") if len(title) > 40 else (title, "", "")
    layout = dict(title=figure_title(head, rest), showlegend=True,
                  xaxis=dict(title=dict(text=escape_label(axis_title)), showgrid=True, automargin=True),
                  yaxis=dict(title=dict(text="score"), showgrid=True, rangemode="tozero", automargin=True),
                  height=height or 360, margin=dict(l=10, r=10, t=70 if rest else 60 if title else 30, b=10),
                  legend=dict(x=0.01, y=0.02, xanchor="left", yanchor="bottom", bgcolor="rgba(255,255,255,0.8)"),
                  plot_bgcolor="white")
    return build_figure(traces, layout)


def importance_frame(heads: dict, layers: dict, n_heads: int):
    """head_importance.json's `heads` table as one row per (kind, layer, head): loss_change and
    michel (the normalised Michel et al. importance). `layers`: kind -> layer count of the model;
    a table whose shape differs raises ValueError (the file belongs to another model)."""
    import pandas as pd
    rows = []
    for kind, count in layers.items():
        entry = heads.get(kind) if isinstance(heads, dict) else None
        if not isinstance(entry, dict):
            raise ValueError(f"no importance for {kind}")
        loss = as_array(entry.get("loss_change"), f"{kind} loss_change", ndim=2)
        michel = entry.get("michel_importance")
        michel = as_array(michel.get("normalised") if isinstance(michel, dict) else michel,
                          f"{kind} michel_importance", ndim=2)
        for name, table in (("loss_change", loss), ("michel", michel)):
            if table.shape != (count, n_heads):
                raise ValueError(f"{kind} {name} has shape {table.shape}, the model has ({count}, {n_heads})")
        rows += [dict(kind=kind, layer=l, head=h, loss_change=float(loss[l, h]), michel=float(michel[l, h]))
                 for l in range(count) for h in range(n_heads)]
    return pd.DataFrame(rows, columns=["kind", "layer", "head", "loss_change", "michel"])


__all__ = ["importance_figure", "pruning_curve_figure", "top_heads", "importance_frame"]
