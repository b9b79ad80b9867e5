"""Figures for contributions (translate(explain=True)): how much of each output step came from
the source and which pieces, and how the methods (raw attention, norm-based, ALTI+, saliency)
agree for one step. numpy/pandas/plotly only; every map is on a fixed 0..1 colour scale."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (COLORBAR_AT_EDGE, DEFAULT_COLORSCALE, as_array, as_probabilities, auto_height, check_tokens,
                    figure_title, heatmap_trace, matrix_heatmap, matrix_margins, side_by_side_margins, tick_font_size,
                    token_axis)
from ._figure import build_figure
from ._labels import display_tokens
from .heatmaps import pair_customdata

SOURCE_COLOR, PREFIX_COLOR = "#1f77b4", "#ff7f0e"


def _pieces(tokens, name: str) -> list[str]:
    if isinstance(tokens, str):
        raise ValueError(f"{name} must be a list of pieces, not a string")
    return [str(t) for t in tokens]


def _unit_matrix(values, rows: Sequence, cols: Sequence, name: str) -> np.ndarray:
    """A finite 2-D array of shape (len(rows), len(cols)) within [0, 1] (1e-5 slack)."""
    arr = as_array(values, name, ndim=2).astype(float)
    check_tokens(arr.shape, rows, cols, name)
    if arr.size and (arr.min() < -1e-5 or arr.max() > 1 + 1e-5):
        raise ValueError(f"{name} must lie within [0, 1]")
    return arr


def source_share_figure(source_share, output_tokens, title: str = "Source vs prefix share",
                        *, show_space: bool = False, height: int | None = None) -> go.Figure:
    """One stacked bar per output piece: the share from the source (ALTI+) and, on top, the rest
    from the target prefix. The y axis is fixed to 0..1."""
    share = as_probabilities(source_share, "source_share")
    pieces = _pieces(output_tokens, "output_tokens")
    if len(share) != len(pieces):
        raise ValueError(f"source_share has {len(share)} values for {len(pieces)} output pieces")
    labels = display_tokens(pieces, show_space=show_space)
    x = list(range(len(pieces)))
    hover = "%{customdata}<br>%{fullData.name} %{y:.3f}<extra></extra>"
    cd = np.asarray([f"{i} {lab}" for i, lab in zip(x, labels)], dtype=object)
    bars = [dict(type="bar", name=name, x=x, y=values.tolist(), marker=dict(color=color), customdata=cd,
                 hovertemplate=hover)
            for name, values, color in (("source", share, SOURCE_COLOR), ("prefix", 1.0 - share, PREFIX_COLOR))]
    layout = dict(barmode="stack", title=figure_title(title),
                  xaxis=token_axis(labels, "Output piece"),
                  # automargin: the tick numbers get the room they need instead of being cut to ".8"
                  yaxis=dict(title=dict(text="share"), range=[0.0, 1.0], showgrid=True, tickvals=[0, 0.5, 1],
                             ticktext=["0", "½", "1"], automargin=True),
                  height=height or 360,      # room for the labels from the start: plotly.js draws it once
                  margin=matrix_margins(["½"], labels, y_size=12, x_size=tick_font_size(len(labels)), colorbar=None,
                                        top=60 if title else 30),
                  legend=dict(orientation="h", y=1.02, x=1.0, xanchor="right", yanchor="bottom"),
                  plot_bgcolor="white")
    return build_figure(bars, layout)


def contribution_figure(source_contribution, prefix_contribution, output_tokens, source_tokens, target_tokens,
                        title: str = "ALTI+ contributions", *, show_space: bool = False,
                        colorscale=None, height: int | None = None) -> go.Figure:
    """Two heatmaps side by side, rows = output pieces (row 0 at the top): contributions of the
    source pieces (T, S) and of the fed prefix pieces (T, T). One shared 0..1 colour scale, so a
    row reads across both maps (together each row sums to 1)."""
    out, src, tgt = (_pieces(t, n) for t, n in ((output_tokens, "output_tokens"),
                                                (source_tokens, "source_tokens"), (target_tokens, "target_tokens")))
    source = _unit_matrix(source_contribution, out, src, "source_contribution")
    prefix = _unit_matrix(prefix_contribution, out, tgt, "prefix_contribution")
    rows = display_tokens(out, show_space=show_space)
    row_names = [f"{i + 1} {lab}" for i, lab in enumerate(rows)]          # positions count from 1
    traces = []
    for z, keys, axis, part in ((source, src, "", "source"), (prefix, tgt, "2", "prefix")):
        labels = display_tokens(keys, show_space=show_space)
        traces.append(heatmap_trace(
            z, zmin=0.0, zmax=1.0, colorscale=colorscale or DEFAULT_COLORSCALE,
            customdata=pair_customdata(row_names, [f"{j + 1} {lab}" for j, lab in enumerate(labels)]),
            hovertemplate=f"Output %{{customdata[0]}}<br>{part} %{{customdata[1]}}"
                          "<br>contribution %{z:.4f}<extra></extra>",
            colorbar=dict(title=dict(text="contribution"), **COLORBAR_AT_EDGE), showscale=axis == "2",
            xaxis=f"x{axis}", yaxis="y", name=part))
    src_axis = token_axis(display_tokens(src, show_space=show_space), "Source piece")
    tgt_axis = token_axis(display_tokens(tgt, show_space=show_space), "Prefix piece (fed)")
    layout = dict(title=figure_title(title), xaxis={**src_axis, "domain": [0.0, 0.47]},
                  xaxis2={**tgt_axis, "domain": [0.53, 1.0], "anchor": "y"},
                  yaxis=token_axis(rows, "Output piece", reverse=True),
                  height=height or auto_height(len(out)), plot_bgcolor="white")
    # room for both maps' labels and the colour bar from the start: plotly.js draws the figure once
    layout["margin"] = side_by_side_margins(layout["yaxis"], [(src_axis, 0.47), (tgt_axis, 0.47)],
                                            traces[1]["colorbar"], top=60 if title else 30)
    return build_figure(traces, layout)


def _step_scores(scores: dict, source_tokens, step: int | None) -> tuple[list[str], np.ndarray]:
    if not scores:
        raise ValueError("scores is empty: give {method: weights over the source pieces}")
    names, rows = [], []
    for name, values in scores.items():
        arr = as_array(values, f"scores[{name!r}]").astype(float)
        if arr.ndim == 2:
            if step is None or not 0 <= step < arr.shape[0]:
                raise ValueError(f"scores[{name!r}] is (T, S): pass a step within 0..{arr.shape[0] - 1}")
            arr = arr[step]
        if arr.ndim != 1 or arr.shape[0] != len(source_tokens):
            raise ValueError(f"scores[{name!r}] has {arr.shape[-1] if arr.ndim else 0} values for "
                             f"{len(source_tokens)} source pieces")
        names.append(str(name))
        rows.append(arr)
    return names, np.stack(rows)


def method_comparison_figure(scores: dict, source_tokens, step: int | None = None,
                             title: str = "Which source pieces mattered, by method",
                             *, show_space: bool = False, colorscale=None, height: int | None = None) -> go.Figure:
    """Rows = methods (e.g. attention, norm, alti+, saliency: `transformer.explain.explanation.method_scores`),
    columns = source pieces, for one output step. Arrays may be (S,) or (T, S) with `step`.
    Fixed 0..1 colour scale: each method's weights are shown as given (rows summing to 1 compare)."""
    src = _pieces(source_tokens, "source_tokens")
    names, z = _step_scores(scores, src, step)
    if z.size and (z.min() < -1e-5 or z.max() > 1 + 1e-5):
        raise ValueError("scores must lie within [0, 1] (normalise each method's row first)")
    rows, cols = display_tokens(names), display_tokens(src, show_space=show_space)
    return matrix_heatmap(
        z, y_labels=rows, x_labels=cols, y_title="Method", x_title="Source piece", zmin=0.0, zmax=1.0,
        colorscale=colorscale or DEFAULT_COLORSCALE,
        customdata=pair_customdata(rows, [f"{j + 1} {lab}" for j, lab in enumerate(cols)]),
        title=title, note=f"output step {step + 1}" if step is not None else "", colorbar_title="weight",
        hovertemplate="%{customdata[0]}<br>Source %{customdata[1]}<br>weight %{z:.4f}<extra></extra>",
        height=height if height is not None else 140 + 40 * len(names))


def method_table(scores: dict, source_tokens, step: int | None = None):
    """The same comparison as a pandas DataFrame: one row per source piece, one column per method
    (raw pieces, not escaped: for st.dataframe), plus each method's rank (1 = most important)."""
    import pandas as pd
    src = _pieces(source_tokens, "source_tokens")
    names, z = _step_scores(scores, src, step)
    frame = pd.DataFrame({"position": range(len(src)), "piece": src})
    for name, row in zip(names, z):
        frame[name] = row
    for name, row in zip(names, z):
        frame[f"{name} rank"] = pd.Series(-row).rank(method="min").astype(int).to_numpy()
    return frame


__all__ = ["source_share_figure", "contribution_figure", "method_comparison_figure", "method_table"]
