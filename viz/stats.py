"""Head statistics and attention rollout, computed live in numpy.

Statistics after Clark et al. (2019) and Dodrio: how spread out a head is
(entropy), how far it looks (distance), how peaked it is (max weight), how much
it parks on boundary tokens (special share), and how much on itself (diagonal).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._base import (DEFAULT_COLORSCALE, as_array, check_attention, head_markers, heatmap_trace, matrix_heatmap,
                    token_axis)
from ._figure import build_figure
from ._labels import BOUNDARY_PIECES, escape_label

STAT_COLUMNS = ("entropy", "mean_distance", "max_weight", "special_share", "diagonal_share")
STAT_TITLES = {
    "entropy": "mean row entropy (nats)",
    "mean_distance": "mean |query − key| distance",
    "max_weight": "mean row max weight",
    "special_share": "mean weight on <s> / </s>",
    "diagonal_share": "mean weight on own position",
}
UNIT_RANGE = {"max_weight", "special_share", "diagonal_share"}   # shares: 0..1 colour range


def head_statistics(weights, query_tokens, key_tokens, *, aligned: bool | None = None
                    ) -> pd.DataFrame:
    """One row per (layer, head) of (L, H, Q, K) weights; every statistic a mean over rows.

    `aligned` says whether query q and key q are the same position (self-attention);
    by default it is assumed when Q == K. diagonal_share is NaN when not aligned.
    """
    w, query, key = check_attention(weights, query_tokens, key_tokens, ndim=4)   # (L, H, Q, K)
    L, H, Q, K = w.shape
    w = w.astype(np.float64)
    aligned = (Q == K) if aligned is None else aligned
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(w > 0, w * np.log(w), 0.0)                               # (L, H, Q, K)
    distance = np.abs(np.arange(Q)[:, None] - np.arange(K)[None, :])             # (Q, K)
    special = np.array([k in BOUNDARY_PIECES for k in key], dtype=np.float64)    # (K,)
    layer, head = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")

    def row_mean(per_row: np.ndarray) -> np.ndarray:                              # (L, H, Q) → (L*H,)
        return per_row.mean(axis=-1).ravel() if Q else np.full(L * H, np.nan)

    diagonal = (row_mean(np.diagonal(w, axis1=-2, axis2=-1)) if aligned and Q == K
                else np.full(L * H, np.nan))
    return pd.DataFrame({
        "layer": layer.ravel(), "head": head.ravel(),
        "entropy": row_mean(-plogp.sum(-1)),
        "mean_distance": row_mean((w * distance).sum(-1)),
        "max_weight": row_mean(w.max(-1) if K else np.zeros((L, H, Q))),
        "special_share": row_mean(w @ special),
        "diagonal_share": diagonal,
    })


def average_statistics(frames) -> pd.DataFrame:
    """Mean of per-sentence head_statistics frames by (layer, head); each sentence weighs the
    same. A 'sentences' column says how many were averaged (NaN cells are skipped)."""
    frames = list(frames)
    if not frames:
        raise ValueError("no statistics to average")
    merged = pd.concat(frames).groupby(["layer", "head"], as_index=False).mean(numeric_only=True)
    merged["sentences"] = len(frames)
    return merged


def _statistic_grid(df: pd.DataFrame, column: str) -> tuple:
    """(z (L, H), layers, heads, zmin, zmax, customdata (L, H, 2), markers trace) of one statistic.
    ValueError: an unknown statistic, or a frame without layer and head."""
    if column not in df.columns or column in ("layer", "head"):
        raise ValueError(f"unknown statistic {column!r}; expected one of {list(STAT_COLUMNS)}")
    if not {"layer", "head"} <= set(df.columns):
        raise ValueError("statistics frame needs 'layer' and 'head' columns")
    z, layers, heads = layer_head_grid(df, column)                                # (L, H)
    if column in UNIT_RANGE:
        zmin, zmax = 0.0, 1.0
    else:
        finite = z[np.isfinite(z)]
        zmin, zmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        zmax = zmax if zmax > zmin else zmin + 1e-9
    cd = np.stack(np.meshgrid(layers, heads, indexing="ij"), axis=-1)            # (L, H, 2)
    ys, xs = np.meshgrid(np.arange(len(layers)), np.arange(len(heads)), indexing="ij")
    notes = [f"{escape_label(column)} {v:.3f}" for v in z.ravel()]
    markers = head_markers(xs.ravel(), ys.ravel(), cd[..., 0].ravel(), cd[..., 1].ravel(),
                           notes=notes)
    return z, layers, heads, zmin, zmax, cd, markers


def statistic_figure(df: pd.DataFrame, column: str, title: str = "", *,
                     colorscale=None) -> go.Figure:
    """Layers × heads heatmap of one statistic; clicking a cell reports [layer, head]."""
    z, layers, heads, zmin, zmax, cd, markers = _statistic_grid(df, column)
    # Bare numbers on the axes (titled Layer / Head), a thin colour bar without a title (the
    # figure's title names the value), and cell values in a font that stays readable; the hover
    # names everything. (The small multiples under it are statistic_maps_figure.)
    fig = matrix_heatmap(
        z, y_labels=[str(l) for l in layers], x_labels=[str(h) for h in heads],
        y_title="Layer", x_title="Head", zmin=zmin, zmax=zmax,
        colorscale=colorscale or DEFAULT_COLORSCALE, customdata=cd,
        title=title or STAT_TITLES.get(column, column), colorbar=dict(thickness=10, len=0.9, tickfont=dict(size=10)),
        hovertemplate="Layer %{customdata[0]} · head %{customdata[1]}<br>"
                      + escape_label(column) + " %{z:.3f}<extra></extra>",
        texttemplate="%{z:.2f}", textfont=dict(size=11), height=130 + 56 * len(layers), xgap=1, ygap=1,
        extra_traces=[markers])
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        axis.tickfont.size = 11
        axis.title.standoff = 4
    fig.layout.xaxis.tickangle = 0
    return fig


def statistic_maps_figure(df: pd.DataFrame, columns, *, per_row: int = 2, colorscale=None) -> go.Figure:
    """Small multiples in one figure: a layers × heads map per statistic, `per_row` to a row, each
    with its own colour range and bar, titled by its statistic; clicking a cell of any of them
    reports [layer, head] (markers' customdata, as in statistic_figure). One chart for the page
    instead of one per statistic: every chart is a widget and messages per run, for every session."""
    columns = list(columns)
    if not columns:
        raise ValueError("no statistic to draw")
    if per_row < 1:
        raise ValueError(f"per_row must be at least 1, got {per_row}")
    cols, rows = min(per_row, len(columns)), -(-len(columns) // per_row)
    n_layers = int(df["layer"].nunique())
    # pixels: a map's rows, and the band under a map for its head numbers, axis title and the next title
    map_px, gap_px = 44 * n_layers + 24, 78
    plot_px = rows * map_px + (rows - 1) * gap_px
    gap_x, gap_y, bar = 0.08, gap_px / plot_px, 0.045                  # bar: the colour bar's share
    width, height = (1.0 - gap_x * (cols - 1)) / cols, map_px / plot_px
    data, layout, titles = [], dict(plot_bgcolor="white", margin=dict(l=10, r=24, t=34, b=48)), []
    for i, column in enumerate(columns):
        z, layers, heads, zmin, zmax, cd, markers = _statistic_grid(df, column)
        row, col = divmod(i, cols)
        left, top = col * (width + gap_x), 1.0 - row * (height + gap_y)
        name = "" if i == 0 else str(i + 1)
        x, y = f"x{name}", f"y{name}"
        data.append(heatmap_trace(
            z, zmin=zmin, zmax=zmax, colorscale=colorscale or DEFAULT_COLORSCALE, customdata=cd,
            hovertemplate="Layer %{customdata[0]} · head %{customdata[1]}<br>" + escape_label(column)
                          + " %{z:.3f}<extra></extra>",
            colorbar=dict(thickness=8, len=height * 0.9, x=left + width - bar + 0.01, xanchor="left",
                          y=top - height / 2, yanchor="middle", tickfont=dict(size=10)),
            texttemplate="%{z:.2f}" if len(heads) <= 12 else None, textfont=dict(size=11), xgap=1, ygap=1,
            xaxis=x, yaxis=y))
        data.append({**markers, "xaxis": x, "yaxis": y})
        x_axis = token_axis([str(h) for h in heads], "Head")
        y_axis = token_axis([str(l) for l in layers], "Layer", reverse=True)
        for axis in (x_axis, y_axis):
            axis["tickfont"] = dict(size=11)
            axis["title"]["standoff"] = 2
        x_axis.update(domain=_unit([left + 0.035, left + width - bar]), tickangle=0, anchor=y)
        y_axis.update(domain=_unit([top - height, top]), anchor=x)
        layout[f"xaxis{name}"], layout[f"yaxis{name}"] = x_axis, y_axis
        if not np.isfinite(z).any():          # e.g. the diagonal of cross-attention: say so in the empty map
            titles.append(dict(text="no value for these heads", x=(left + 0.035 + left + width - bar) / 2,
                               xref="paper", y=top - height / 2, yref="paper", showarrow=False,
                               font=dict(size=12, color="#777")))
        titles.append(dict(text=escape_label(STAT_TITLES.get(column, column)), x=left, xref="paper",
                           xanchor="left", y=top, yref="paper", yanchor="bottom", yshift=6,
                           showarrow=False, font=dict(size=14)))
    layout.update(annotations=titles, height=plot_px + 34 + 48)
    return build_figure(data, layout)


def _unit(span: list) -> list:
    """A domain inside [0, 1] (sums of fractions stray by 1e-17, which plotly refuses)."""
    return [min(1.0, max(0.0, round(v, 9))) for v in span]


def layer_head_grid(df: pd.DataFrame, column: str) -> tuple[np.ndarray, list, list]:
    """(L, H) means of `column` by (layer, head), NaN where a cell has no value, and the sorted
    layers and heads: df.pivot_table(index="layer", columns="head", aggfunc="mean", dropna=False)
    in numpy (pandas took 5 ms a figure, five figures a page, every session of an audience)."""
    layer_of, head_of = df["layer"].to_numpy(), df["head"].to_numpy()
    layers, rows = np.unique(layer_of, return_inverse=True)
    heads, cols = np.unique(head_of, return_inverse=True)
    values = df[column].to_numpy(dtype=float)
    seen = ~np.isnan(values)
    sums, counts = np.zeros((len(layers), len(heads))), np.zeros((len(layers), len(heads)))
    np.add.at(sums, (rows[seen], cols[seen]), values[seen])
    np.add.at(counts, (rows[seen], cols[seen]), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(counts > 0, sums / counts, np.nan)
    return z, list(layers), list(heads)


def rollout(encoder_weights, add_residual: bool = True) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020) through stacked self-attention layers.

    Heads are averaged; with `add_residual` each layer becomes 0.5·A + 0.5·I (the
    skip connection) and rows are renormalised; layers multiply as A_L … A_1.
    Row i of the (S, S) result says how much each input token flows into position i.
    """
    w = as_array(encoder_weights, "encoder_weights", ndim=4).astype(np.float64)  # (L, H, S, S)
    L, H, S, S2 = w.shape
    if S != S2:
        raise ValueError(f"rollout needs square self-attention (L, H, S, S), got {w.shape}")
    result = np.eye(S)
    for layer in w.mean(axis=1):                                                  # (S, S)
        a = 0.5 * layer + 0.5 * np.eye(S) if add_residual else layer
        sums = a.sum(axis=-1, keepdims=True)
        a = np.divide(a, sums, out=np.zeros_like(a), where=sums > 0)
        result = a @ result
    return result
