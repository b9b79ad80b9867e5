"""Shared figure plumbing: input checks, token axes, colour ranges, a matrix heatmap.

Every builder uses integer positions on both axes with tokens as tick text:
Plotly's categorical axes would merge repeated pieces (`▁a` ... `▁a`).
"""
from __future__ import annotations

from typing import Sequence

import html
import unicodedata

import numpy as np
import plotly.graph_objects as go

from ._figure import build_figure, colorscale_value, height_value, plain
from ._labels import escape_label

DEFAULT_COLORSCALE = "Viridis"      # perceptually uniform, readable with colour-blindness
DIVERGING_COLORSCALE = "RdBu_r"     # blue (negative) / red (positive), CVD-safe pair
# Per-cell hover strings cost ~0.7 us a cell to build and serialise; above this many
# cells the tiled figures fall back to numeric hover (positions, no pieces) to stay fast.
HOVER_TEXT_CELLS = 250_000


def as_array(values, name: str, *, ndim: int | None = None, min_ndim: int = 0,
             finite: bool = True) -> np.ndarray:
    """np.asarray with a clear ValueError for wrong rank or non-finite values."""
    arr = np.asarray(values)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {arr.shape}")
    if finite and arr.dtype != bool and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def as_probabilities(values, name: str) -> np.ndarray:
    """A finite 1-D float array within [0, 1] (1e-6 slack for rounding), else ValueError."""
    p = as_array(values, name, ndim=1).astype(float)
    if np.any(p < -1e-6) or np.any(p > 1 + 1e-6):
        raise ValueError(f"{name} probabilities must be finite and within [0, 1]")
    return p


def check_tokens(shape: tuple, query_tokens: Sequence, key_tokens: Sequence,
                 name: str = "weights") -> tuple[list[str], list[str]]:
    """Check that the last two dims are (len(query_tokens), len(key_tokens))."""
    if isinstance(query_tokens, str) or isinstance(key_tokens, str):
        raise ValueError("query_tokens and key_tokens must be lists of pieces, not strings")
    query, key = [str(t) for t in query_tokens], [str(t) for t in key_tokens]
    if tuple(shape[-2:]) != (len(query), len(key)):
        raise ValueError(
            f"{name} has shape {tuple(shape)}: its last two dims must be (queries, keys) = "
            f"({len(query)}, {len(key)}) to match the tokens given")
    return query, key


def check_attention(weights, query_tokens, key_tokens, ndim: int | None,
                    name: str = "weights") -> tuple[np.ndarray, list[str], list[str]]:
    """Validate an attention array (..., Q, K) against its query and key pieces."""
    arr = as_array(weights, name, ndim=ndim, min_ndim=2)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    query, key = check_tokens(arr.shape, query_tokens, key_tokens, name)
    return arr, query, key


def color_range(z: np.ndarray, normalize: bool) -> tuple[float, float]:
    """(zmin, zmax): fixed 0..1 for probabilities, or the map's own range."""
    if not normalize or z.size == 0 or np.all(np.isnan(z)):
        return 0.0, 1.0
    lo, hi = float(np.nanmin(z)), float(np.nanmax(z))
    return lo, (hi if hi > lo else lo + 1e-9)


def fixed_range(zmax) -> tuple[float, float]:
    """(0, zmax): one colour scale for values that are not probabilities (norm-weighted maps)."""
    if not np.isfinite(zmax) or zmax <= 0:
        raise ValueError(f"zmax must be a positive number, got {zmax!r}")
    return 0.0, float(zmax)


def check_heads(marked, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """[(layer, head), ...] as ints; ValueError for a head outside the model."""
    heads = [(int(layer), int(head)) for layer, head in marked]
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"marked head ({layer}, {head}) is outside {n_layers} layers × {n_heads} heads")
    return heads


def symmetric_range(z: np.ndarray) -> tuple[float, float]:
    """(-m, m) with m = max |z|, so zero sits at the diverging scale's midpoint."""
    m = float(np.nanmax(np.abs(z))) if z.size else 0.0
    m = m if m > 0 else 1.0
    return -m, m


def tick_font_size(count: int) -> int:
    return 11 if count <= 48 else 9 if count <= 96 else 7


# x labels that do not fit side by side stand upright: plotly.js's default tilt of 30 degrees put
# a long label's end over its neighbour ("▁church" on "."); a y axis never turns its labels
UPRIGHT_OR_LEVEL = [0, 90]


def token_axis(labels: Sequence[str] | None, title: str, *, reverse: bool = False,
               values: Sequence[float] | None = None) -> dict:
    """Axis dict: integer positions, every label shown, optional top-to-bottom order."""
    axis = dict(title=dict(text=escape_label(title)), showgrid=False, zeroline=False,
                automargin=True)
    if labels is not None:
        labels = list(labels)
        axis.update(tickmode="array", ticktext=labels,
                    tickvals=plain(values) if values is not None else list(range(len(labels))),
                    tickfont=dict(size=tick_font_size(len(labels))),
                    autotickangles=UPRIGHT_OR_LEVEL)
    if reverse:
        axis["autorange"] = "reversed"
    return axis


def figure_title(title: str, note: str = "") -> dict:
    """Escaped title; an optional small note on a second line."""
    text = escape_label(title)
    if note:
        text = f"{text}<br><sup>{escape_label(note)}</sup>" if text else f"<sup>{escape_label(note)}</sup>"
    return dict(text=text, x=0.01, xanchor="left")


def title_top(title: str, note: str = "") -> int:
    """Top margin for a figure's title: one line, two with a note, or just the plot's edge room."""
    return 60 if note else 44 if title else 30


def auto_height(rows: int, *, per_row: float = 18.0, base: int = 140,
                low: int = 300, high: int = 900) -> int:
    return int(np.clip(base + per_row * rows, low, high))


# Pixel widths for margins, on the generous side: plotly.js's default font is 0.45-0.55 em per
# Latin letter in the fonts a browser falls back to, wide (East Asian) characters about 1 em.
LETTER_EM, WIDE_EM = 0.62, 1.05


def text_width(text: str, size: float) -> float:
    """A generous estimate of `text`'s width in px at font size `size` (HTML entities as one character)."""
    return size * sum(WIDE_EM if unicodedata.east_asian_width(c) in "WF" else LETTER_EM for c in html.unescape(text))


def title_room(title_size: float = 14) -> float:
    """An axis title, its standoff (Y_TITLE_STANDOFF on a matrix's rows) and the tick labels' gap."""
    return 2 * title_size + 14


# px between a matrix's widest row label and its y title. With a standoff plotly.js puts the title
# that far beyond the axis's measured depth (its widest tick label); without one the title sits a
# fixed 38 px from the axis and steps aside only for the labels level with it, so a long label a
# row above ran into it ("▁klettert" into "Query", the README tour's Heatmap at 1280x720).
Y_TITLE_STANDOFF = 10
X_TITLE_EXTRA = 4           # px an x title below its labels needs beyond title_room (plotly.js's depth)


def label_room(labels, size: float, title_size: float = 14) -> int:
    """Margin for an axis of tick labels `labels` at `size` px drawn beside the plot, with its title."""
    return round(max((text_width(label, size) for label in labels or ()), default=0.0) + title_room(title_size))


# A colour bar at the plot's right edge: its room is then the same at every width, which
# matrix_margins' estimate of the right margin assumes (plotly.js's default x=1.02 grows with it).
COLORBAR_AT_EDGE = dict(x=1.0, xpad=14)

# px a view's main chart gets in a 1280x720 window; a chart in a column gets its share of it
# (atlas_ui.page.common.column_width)
MAIN_WIDTH = 1120


def x_label_room(labels, size: float, plot_width: float, angle: float | None = None) -> float:
    """Height of a row of x tick labels as plotly.js will draw them in `plot_width` px: side by side
    when they fit, else upright (token_axis's autotickangles). Widths are overestimated, so a close
    call gets more room."""
    widths = [text_width(label, size) for label in labels or ()]
    if not widths:
        return 0.0
    if angle is not None and abs(angle) == 90:                 # set upright by the figure (presenter type)
        return max(widths)
    widest, spacing = max(widths), max(plot_width, 1.0) / len(widths)
    return 1.3 * size if widest + 10 <= spacing else widest


def matrix_margins(y_labels, x_labels, *, y_size: float, x_size: float, colorbar: dict | None, top: int,
                   title_size: float = 14, bar_size: float = 12, width: float = MAIN_WIDTH,
                   y_title: bool = True, x_title: bool = True, x_angle: float | None = None) -> dict:
    """Margins that already hold the tick labels, axis titles and colour bar of a labelled matrix.
    The axes keep automargin (a label is never cut), but plotly.js draws a figure a second time
    whenever the room it measures after the first pass exceeds the margins it was given: with the
    10 px margins before, every heatmap was drawn twice, a third of its drawing time
    (benchmarks/bench_one_pass.py). `width` is the figure's width in a 1280 px window (a side
    column's is less): the x labels' angle depends on it. `colorbar=None`: the figure has none;
    `y_title`/`x_title` False: that axis has no title. Numeric axes pass their widest tick text.
    Checked against plotly.js: tests/test_browser_features.py::test_every_view_link_shows_its_picture_first_drawn_in_one_pass."""
    room = title_room(title_size)
    y_room = max((text_width(label, y_size) for label in y_labels or ()), default=0.0)
    if colorbar is None:
        bar = 24
    else:
        title = colorbar.get("title") or {}
        ticks = max((text_width(str(text), bar_size) for text in colorbar.get("ticktext") or ()),
                    default=3.6 * bar_size)
        bar = colorbar.get("thickness", 30) + ticks + 28                     # bar, tick labels, padding
        if title.get("side", "top") == "top":
            bar = max(bar, text_width(title.get("text", ""), title_size) + 24)
        else:
            bar += 1.5 * (title.get("font") or {}).get("size", title_size)
    gap = 10                                                   # between the tick labels and the plot
    left = y_room + (room if y_title else gap)
    x_room = x_label_room(x_labels, x_size, width - left - bar, x_angle)
    # an x title stands off from the labels (matrix_heatmap): a few px more than a y title's
    bottom = (x_room or 1.3 * x_size) + (room + X_TITLE_EXTRA if x_title else gap)
    return dict(l=round(left), r=round(bar), t=top, b=round(bottom))


def side_by_side_margins(y_axis: dict, x_axes: Sequence[tuple[dict, float]], colorbar: dict | None, *,
                         top: int, width: float = MAIN_WIDTH) -> dict:
    """matrix_margins for maps side by side on one row: the left map's y labels, the colour bar, and
    the bottom room of the x axis (given with its share of the plot's width) that needs the most."""
    def size(axis: dict) -> float:
        return (axis.get("tickfont") or {}).get("size", 12)
    margin = matrix_margins(y_axis.get("ticktext"), None, y_size=size(y_axis), x_size=12, colorbar=colorbar,
                            top=top, width=width)
    plot_width = width - margin["l"] - margin["r"]
    margin["b"] = round(max((x_label_room(axis.get("ticktext"), size(axis), share * plot_width) or 1.3 * size(axis))
                            for axis, share in x_axes) + title_room())
    return margin


def heatmap_trace(z: np.ndarray, *, zmin: float, zmax: float, colorscale, hovertemplate: str,
                  colorbar: dict, **props) -> dict:
    """A heatmap trace dict; gaps (NaN) get no hover."""
    return dict(type="heatmap", z=z, zmin=zmin, zmax=zmax, colorscale=colorscale_value(colorscale),
                hovertemplate=hovertemplate, hoverongaps=False, colorbar=colorbar,
                **{k: v for k, v in props.items() if v is not None})


MIN_CELL = 6                # px per row a matrix keeps once the margins have taken their room


def matrix_heatmap(z: np.ndarray, *, y_labels: Sequence[str] | None, x_labels: Sequence[str] | None,
                   y_title: str, x_title: str, zmin: float, zmax: float, colorscale,
                   hovertemplate: str, customdata=None, title: str = "", note: str = "",
                   colorbar: dict | None = None, colorbar_title: str = "",
                   height: int | None = None, annotations: Sequence[dict] = (),
                   extra_traces: Sequence[dict] = (), width: float = MAIN_WIDTH, **trace_props) -> go.Figure:
    """One heatmap trace, row 0 at the top, tokens as tick text on integer axes. `width`: the
    figure's width in a 1280 px window, kept in layout.meta for presenter mode's margins."""
    trace = heatmap_trace(
        z, zmin=zmin, zmax=zmax, colorscale=colorscale, customdata=customdata,
        hovertemplate=hovertemplate,
        colorbar=colorbar if colorbar is not None
        else dict(title=dict(text=escape_label(colorbar_title)), **COLORBAR_AT_EDGE),
        **trace_props)
    xaxis, yaxis = token_axis(x_labels, x_title), token_axis(y_labels, y_title, reverse=True)
    if y_title:                                  # matrix_margins' title_room holds it
        yaxis["title"]["standoff"] = Y_TITLE_STANDOFF
    if x_title:                # below upright labels, not level with the ends of the shorter ones
        xaxis["title"]["standoff"] = Y_TITLE_STANDOFF
    layout = dict(
        title=figure_title(title, note),
        xaxis=xaxis,
        yaxis=yaxis,
        # unlabelled axes get plotly.js's own numbers, at most as wide as the last index
        margin=matrix_margins(y_labels if y_labels is not None else [str(z.shape[0] - 1)],
                              x_labels if x_labels is not None else [str(z.shape[-1] - 1)],
                              y_size=yaxis.get("tickfont", {}).get("size", 12),
                              x_size=xaxis.get("tickfont", {}).get("size", 12),
                              colorbar=None if trace.get("showscale") is False else trace["colorbar"],
                              top=title_top(title, note), width=width),
        plot_bgcolor="white",
    )
    if width != MAIN_WIDTH:
        layout["meta"] = {"width": width}
    height = height_value(height) if height is not None else auto_height(z.shape[0])
    # at least 60 px of cells in all: a one-row mask's colour bar still holds its two words
    layout["height"] = max(height, layout["margin"]["t"] + layout["margin"]["b"] + max(60, MIN_CELL * z.shape[0]))
    if annotations:
        layout["annotations"] = list(annotations)
    return build_figure([trace, *extra_traces], layout)


def point_customdata(point) -> list | None:
    """A selected point's customdata as a list. Streamlit hands typed-array customdata back as
    {"0": a, "1": b, ...}; plain lists come back as lists."""
    cd = point.get("customdata") if hasattr(point, "get") else None
    if hasattr(cd, "keys") and all(str(k).isdigit() for k in cd.keys()):
        cd = [cd[k] for k in sorted(cd.keys(), key=lambda k: int(k))]
    return list(cd) if isinstance(cd, (list, tuple, np.ndarray)) else None


def head_markers(x: Sequence[float], y: Sequence[float], layers: Sequence[int],
                 heads: Sequence[int], *, kind_label: str = "",
                 notes: Sequence[str] | None = None) -> dict:
    """Near-invisible clickable points at tile centres (a scatter trace dict).

    Plotly heatmaps report no point selection, so `st.plotly_chart(on_select=...)`
    learns which head was clicked from these markers' customdata [layer, head].
    `notes` (already escaped) add a hover line per marker.
    """
    prefix = f"{escape_label(kind_label)}<br>" if kind_label else ""
    trace = dict(
        type="scatter", x=plain(x), y=plain(y), mode="markers", showlegend=False, name="heads",
        customdata=np.column_stack([layers, heads]).astype(int),
        marker=dict(size=18, opacity=0.01, color="white", symbol="square"),
        hovertemplate=prefix + "Layer %{customdata[0]} · head %{customdata[1]}"
                      + ("<br>%{text}" if notes is not None else "")
                      + "<br>click to open this head<extra></extra>",
    )
    if notes is not None:
        trace["text"] = list(notes)
    return trace
