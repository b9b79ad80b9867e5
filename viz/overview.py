"""Every head at a glance: all tiles in ONE heatmap trace, separated by NaN gaps.

One trace with NaN gaps draws far faster than a subplot per head at 128 tokens
(BertViz's per-pair SVG lines are what freeze long inputs).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import plotly.graph_objects as go

from ._base import (DEFAULT_COLORSCALE, HOVER_TEXT_CELLS, MAIN_WIDTH, check_attention, check_heads, figure_title,
                    fixed_range, head_markers, heatmap_trace, matrix_margins, point_customdata, tick_font_size,
                    token_axis)
from ._figure import build_figure
from ._png import png_data_uri
from ._labels import display_tokens, escape_label
from ._tiling import Tiling, default_gap, tile
from ._tile_labels import grid_labels, label_axes, overview_labels, pin_under_labels, value_line
from ._ticks import thinned_tile_ticks, tile_ticks
from .export import LABEL_PITCH

TILED_MARGINS = 110          # px of a tiled figure's height for its title and axes (top + bottom margins)
# the Overview's ticks name layers and heads; its axis titles say what each tile's rows and columns are
TILE_QUERY, TILE_KEY = "Query (in each tile)", "Key (in each tile)"


def tiled_parts(w: np.ndarray, query: list[str], key: list[str], *, title: str,
                normalize: bool, show_space: bool, kind_label: str, gap: int | None,
                colorscale, first_layer: int | None = 0, zmax: float | None = None,
                value_title: str = "weight", row_gap: int | None = None,
                labels_on_axes: bool = False, heads_down: bool = False) -> tuple[list[dict], dict, Tiling]:
    """The shared body of overview_figure and head_grid_figure (w is (L, H, Q, K); with `heads_down`,
    (H, L, Q, K): heads as tile rows, layers as tile columns).

    Returns the traces, the layout (the caller adds the axis ticks) and the tiling.
    `first_layer=None` means the layer is unknown: hover then names only the head.
    With `labels_on_axes` (the Overview), hover names the cell below HOVER_TEXT_CELLS cells from a
    label per grid row and column (label_axes); above it, and for the head grid until grid_labels
    names its cells, the tile-centre markers name the head.
    `zmax` (ignored with `normalize`) gives values that are not probabilities one fixed 0..zmax
    scale; `value_title` names the value in hover and colour bar.
    """
    L, H, Q, K = w.shape
    t = tile(w, gap=default_gap(Q, K) if gap is None else gap, normalize=normalize, row_gap=row_gap)
    q_labels, k_labels = display_tokens(query, show_space=show_space), display_tokens(key, show_space=show_space)
    named = labels_on_axes and t.z.size <= HOVER_TEXT_CELLS
    top = 1.0 if normalize or zmax is None else fixed_range(zmax)[1]
    weight = "%{customdata:.4f}" if normalize else "%{z:.4f}"
    prefix = f"{escape_label(kind_label)}<br>" if kind_label else ""
    cell = "%{y}<br>%{x}<br>" if named else ""
    hover = (prefix + cell + value_line(value_title, weight, normalize)
             + ("" if cell else "<br>(the tile's centre names its head)") + "<extra></extra>")
    heat = heatmap_trace(t.z, customdata=t.raw, hovertemplate=hover,
                         zmin=0.0, zmax=top, colorscale=colorscale or DEFAULT_COLORSCALE,
                         colorbar=dict(title=dict(text=escape_label(value_title))))
    n_layers, n_heads = (H, L) if heads_down else (L, H)
    # marker i is head divmod(i, n_heads) either way (overview_selection's fallback)
    layers, heads = (a.ravel() for a in np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij"))
    tile_rows, tile_cols = (heads, layers) if heads_down else (layers, heads)
    marks = head_markers(tile_cols * t.step_k + (K - 1) / 2, tile_rows * t.step_q + (Q - 1) / 2,
                         layers + (first_layer or 0), heads, kind_label=kind_label)
    # Height from the grid's aspect at ~1000 px plot width; cells kept square.
    plot_h = float(np.clip(1000 * t.z.shape[0] / max(t.z.shape[1], 1), 120, 900))
    layout = dict(title=figure_title(title), height=int(plot_h + TILED_MARGINS),
                  margin=dict(l=10, r=10, t=60 if title else 40, b=10),
                  plot_bgcolor="white", clickmode="event+select", hovermode="closest",
                  yaxis=dict(scaleanchor="x", constrain="domain"), xaxis=dict(constrain="domain"))
    if named:
        label_axes(heat, layout, *overview_labels(t, q_labels, k_labels, first_layer, heads_down))
    return [heat, marks], layout, t


def tile_outlines(t: Tiling, Q: int, K: int, marked, n_layers: int, n_heads: int,
                  color: str = "#d62728", heads_down: bool = False) -> list[dict]:
    """Layout rectangles around the tiles of the heads in `marked` [(layer, head), ...]."""
    shapes = []
    for layer, head in check_heads(marked, n_layers, n_heads):
        row, col = (head, layer) if heads_down else (layer, head)
        shapes.append(dict(type="rect", xref="x", yref="y", x0=col * t.step_k - 0.5, x1=col * t.step_k + K - 0.5,
                           y0=row * t.step_q - 0.5, y1=row * t.step_q + Q - 0.5, fillcolor="rgba(0,0,0,0)",
                           line=dict(color=color, width=3)))
    return shapes


def as_image(data: list[dict], z: np.ndarray, colorscale) -> list[dict]:
    """The tiles drawn as one PNG <image> (a third of the heatmap's time at 128 tokens).

    The heatmap stays as fig.data[0], hidden, so z still holds the weights; the markers stay
    fig.data[1]; the image and a colour-bar carrier follow.
    """
    heat, marks = data
    heat = {**heat, "visible": False}
    top = heat["zmax"]
    image = dict(type="image", source=png_data_uri(z, colorscale, 0.0, top), x0=0, dx=1, y0=0, dy=1,
                 hoverinfo="skip", name="tiles")
    colorbar = dict(type="scatter", x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                    marker=dict(colorscale=heat["colorscale"], cmin=0.0, cmax=top, color=[0.0],
                                showscale=True, colorbar=heat["colorbar"]))
    return [heat, marks, image, colorbar]


def overview_figure(weights, query_tokens, key_tokens, title: str = "", *,
                    normalize: bool = False, kind_label: str = "", show_space: bool = False,
                    gap: int | None = None, colorscale=None, render: str = "auto", zmax: float | None = None,
                    value_title: str = "weight", marked=(), heads_down: bool = False) -> go.Figure:
    """All heads of one kind (L, H, Q, K): layers as tile rows, heads as tile columns (`heads_down`:
    heads as rows, layers as columns, for a phone's narrow column: 3 tiles across instead of 8).

    fig.data[0] is the tiled heatmap (NaN between tiles); fig.data[1] holds one
    clickable marker per head for `overview_selection`. Below HOVER_TEXT_CELLS cells
    the hover names layer, head, positions and pieces. Above it (`render="auto"`) the
    tiles are drawn as one PNG image after the hidden heatmap, and the tile centres name
    their head; `render` forces "heatmap" or "image". `zmax`/`value_title`: see tiled_parts.
    `marked` [(layer, head), ...] outlines those tiles (layout shapes), e.g. the important heads.
    """
    w, query, key = check_attention(weights, query_tokens, key_tokens, ndim=4)  # (L, H, Q, K)
    L, H, Q, K = w.shape
    data, layout, t = tiled_parts(w.transpose(1, 0, 2, 3) if heads_down else w, query, key, title=title or kind_label,
                                  normalize=normalize, show_space=show_space,
                                  kind_label=kind_label, gap=gap, colorscale=colorscale, zmax=zmax,
                                  value_title=value_title, labels_on_axes=render != "image", heads_down=heads_down)
    if render not in ("auto", "heatmap", "image"):
        raise ValueError(f"render must be 'auto', 'heatmap' or 'image', got {render!r}")
    if render == "image" or (render == "auto" and t.z.size > HOVER_TEXT_CELLS):
        data = as_image(data, t.z, colorscale or DEFAULT_COLORSCALE)
    row_names, col_names = [f"Layer {l}" for l in range(L)], [f"Head {h}" for h in range(H)]
    if heads_down:
        row_names, col_names = col_names, row_names
    layout["yaxis"].update(token_axis(row_names, TILE_QUERY, reverse=True,
                                      values=[r * t.step_q + (Q - 1) / 2 for r in range(len(row_names))]))
    layout["xaxis"].update(token_axis(col_names, TILE_KEY,
                                      values=[c * t.step_k + (K - 1) / 2 for c in range(len(col_names))]))
    # Fixed margins that fit "Layer n" / "Head n", the axis titles and the colour bar: with
    # automargin (or margin autoexpand) plotly.js measures after drawing and draws the whole
    # figure again, which cost a third of the time (benchmarks/bench_overview_browser.py).
    for axis in ("xaxis", "yaxis"):
        layout[axis]["automargin"] = False
    layout["margin"] = dict(l=80, r=110, t=60 if (title or kind_label) else 30, b=55, autoexpand=False)
    if len(marked):
        layout["shapes"] = tile_outlines(t, Q, K, marked, L, H, heads_down=heads_down)
    pin_under_labels(layout)
    return build_figure(data, layout)


def head_grid_figure(weights, query_tokens, key_tokens, title: str = "", *,
                     normalize: bool = False, show_space: bool = False,
                     layer: int | None = None, gap: int | None = None, columns: int = 4,
                     colorscale=None, zmax: float | None = None, value_title: str = "weight") -> go.Figure:
    """All heads of one layer (H, Q, K) in rows of at most `columns` tiles, so each tile is large
    enough to read (eight 65 px tiles in one row were not); head h sits in tile row h // columns,
    tile column h % columns. Token ticks label every tile row and column.

    `layer` labels the hover and the clickable markers' customdata [layer, head].
    """
    w, query, key = check_attention(weights, query_tokens, key_tokens, ndim=3)  # (H, Q, K)
    H, Q, K = w.shape
    if columns < 1:
        raise ValueError(f"columns must be at least 1, got {columns}")
    cols = min(columns, H)
    rows = -(-H // cols)
    grid = np.full((rows * cols, Q, K), np.nan, dtype=np.result_type(w.dtype, np.float32))
    grid[:H] = w
    grid = grid.reshape(rows, cols, Q, K)                                        # (rows, cols, Q, K)
    gap = default_gap(Q, K) if gap is None else gap
    # room above each tile row for its "Head h" titles (about a line of text at the view's heights),
    # so a title never sits on the tile above it
    row_gap = max(gap, 2, -(-Q * 3 // 20)) if rows > 1 else gap
    data, layout, t = tiled_parts(grid, query, key, title=title, normalize=normalize,
                                  show_space=show_space, kind_label="", gap=gap,
                                  colorscale=colorscale, first_layer=layer, zmax=zmax, value_title=value_title,
                                  row_gap=row_gap)
    q_labels, k_labels = display_tokens(query, show_space=show_space), display_tokens(key, show_space=show_space)
    if t.z.size <= HOVER_TEXT_CELLS:
        grid_labels(data[0], layout, t, cols, q_labels, k_labels, layer, normalize, value_title)
    tile_row, tile_col = np.divmod(np.arange(H), cols)
    data[1] = head_markers(tile_col * t.step_k + (K - 1) / 2, tile_row * t.step_q + (Q - 1) / 2,
                           np.full(H, layer or 0), np.arange(H))
    layout["annotations"] = [dict(x=c * t.step_k + (K - 1) / 2, y=r * t.step_q - 0.5, yref="y",
                                  yanchor="bottom", text=f"Head {h}", showarrow=False)
                             for h, (r, c) in enumerate(zip(tile_row, tile_col))]
    layout["yaxis"].update(token_axis(q_labels * rows, "Query", reverse=True,
                                      values=[r * t.step_q + q for r in range(rows) for q in range(Q)]))
    layout["xaxis"].update(token_axis(k_labels * cols, "Key",
                                      values=[c * t.step_k + k for c in range(cols) for k in range(K)]))
    size = tick_font_size(max(Q, K))
    layout["yaxis"]["tickfont"] = layout["xaxis"]["tickfont"] = dict(size=size)
    data[0]["colorbar"] = {**data[0]["colorbar"], "x": 1.0, "xpad": 14}     # its room does not grow with the width
    layout["margin"] = matrix_margins(q_labels, k_labels * cols, y_size=size, x_size=size,
                                      colorbar=data[0]["colorbar"], top=layout["margin"]["t"])
    layout["height"] += layout["margin"]["t"] + layout["margin"]["b"] - TILED_MARGINS   # the tiles keep their height
    # keys closer than their upright labels are tall (21 in a quarter of the page): every k-th of each tile
    pitch = (MAIN_WIDTH - layout["margin"]["l"] - layout["margin"]["r"]) / max(cols * t.step_k - gap, 1)
    every = int(np.ceil(LABEL_PITCH * size / pitch))
    if every > 1:
        x = layout["xaxis"]
        kept = thinned_tile_ticks(x["tickvals"], every, t.step_k)
        x.update(ticktext=[x["ticktext"][i] for i in kept], tickvals=[x["tickvals"][i] for i in kept])
    tile_ticks(layout, xaxis=t.step_k, yaxis=t.step_q)          # a projector or a phone thins each tile alike
    pin_under_labels(layout)
    return build_figure(data, layout)


def overview_selection(points: Any, *, n_heads: int | None = None) -> tuple[int, int] | None:
    """(layer, head) of the first clicked tile in a Plotly selection payload, else None.

    Accepts the list of point dicts, or a dict holding it under "points" (or
    "selection" → "points", as `st.plotly_chart(on_select="rerun")` returns).
    Reads customdata [layer, head, ...]; without it, a point index on the marker
    trace (curve 1) maps to divmod(index, n_heads) when n_heads is given.
    """
    if isinstance(points, Mapping):
        inner = points.get("selection", points)
        points = inner.get("points", []) if isinstance(inner, Mapping) else []
    for point in points or []:
        if not isinstance(point, Mapping):
            continue
        cd = point_customdata(point)
        if cd is not None and len(cd) >= 2:
            try:
                layer, head = int(cd[0]), int(cd[1])
            except (TypeError, ValueError):
                layer = head = -1
            if layer >= 0 and head >= 0:
                return layer, head
        curve = point.get("curve_number", point.get("curveNumber"))
        index = point.get("point_index", point.get("point_number", point.get("pointIndex")))
        if curve == 1 and n_heads and isinstance(index, (int, np.integer)) and index >= 0:
            layer, head = divmod(int(index), int(n_heads))
            return layer, head
    return None
