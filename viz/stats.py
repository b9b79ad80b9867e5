"""Head statistics and attention rollout, computed live in numpy.

Statistics after Clark et al. (2019) and Dodrio: how spread out a head is
(entropy), how far it looks (distance), how peaked it is (max weight), how much
it parks on boundary tokens (special share), and how much on itself (diagonal).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._base import DEFAULT_COLORSCALE, as_array, check_attention, head_markers, matrix_heatmap
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


def statistic_figure(df: pd.DataFrame, column: str, title: str = "", *,
                     colorscale=None) -> go.Figure:
    """Layers × heads heatmap of one statistic; clicking a cell reports [layer, head]."""
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
    # Small multiples share a third of the page: bare numbers on the axes (titled Layer / Head),
    # a thin colour bar without a title (the figure's title names the value), and cell values
    # in a font that stays readable; the hover names everything.
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
