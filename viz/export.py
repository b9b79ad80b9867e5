"""Export settings for the Plotly toolbar, and standalone HTML that works offline.

A figure cannot carry its own toolbar config, so the app passes these dicts to
st.plotly_chart(config=...). The camera button then saves PNG at 2× (or SVG).
"""
from __future__ import annotations

import io
import json

import numpy as np
import plotly.graph_objects as go

from ._base import COLORBAR_AT_EDGE, MAIN_WIDTH, check_attention, matrix_margins, text_width
from ._cell_text import FITTED_TEXT
from ._figure import copy_figure
from ._ticks import kept_values, thinned_tile_ticks, thinned_ticks, tile_period

DEFAULT_FILENAME = "attention-atlas"


def plotly_config(image_format: str = "png", filename: str = DEFAULT_FILENAME,
                  scale: float = 2) -> dict:
    """Toolbar config whose camera button downloads `filename.<image_format>`."""
    if image_format not in ("png", "svg", "jpeg", "webp"):
        raise ValueError(f"unsupported image format {image_format!r}")
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format, "filename": filename,
                                 "scale": scale},
    }


PLOTLY_CONFIG = plotly_config()


def svg_config(filename: str = DEFAULT_FILENAME) -> dict:
    """Same toolbar, but the camera button saves an SVG (vector, for papers)."""
    return plotly_config("svg", filename=filename, scale=1)


# Presenter type: a tick label's box is about 1.3 em tall, so labels this many font sizes apart do
# not overlap; none is drawn under MIN_TICK px (read from the back of a room).
LABEL_PITCH, MIN_TICK = 1.4, 12


def presenter_figure(fig: go.Figure, font_size: int = 18, max_height: int | None = None) -> go.Figure:
    """A copy with fonts large enough to read from the back of a room (tick labels too).

    Each axis of labels gets the largest type up to `font_size - 2` at which its labels do not
    overlap, at least MIN_TICK px; a map with too many rows for that grows taller, up to
    `max_height` (the room a slide has; None: no limit), and past that labels every k-th row.
    A colour bar too short for its numbers or words gets the same treatment. A figure taller
    than `max_height` is drawn that tall."""
    big = copy_figure(fig)
    original = {side: getattr(big.layout.margin, side) for side in ("l", "r", "b")}
    big.update_layout(font=dict(size=font_size), title_font=dict(size=font_size + 4))
    big.update_xaxes(tickfont=dict(size=font_size - 2), title_font=dict(size=font_size))
    big.update_yaxes(tickfont=dict(size=font_size - 2), title_font=dict(size=font_size))
    # Colour bars: the title turned along the bar and at most three numbers, so large type does not
    # stack label on label when the chart is short (a one-row heatmap is ~100 px tall).
    bar = dict(tickfont=dict(size=font_size - 4), title=dict(side="right", font=dict(size=font_size - 2)), nticks=3)
    for trace in big.data:
        fitted = isinstance(trace.meta, dict) and trace.meta.get(FITTED_TEXT)  # its size fits its cells
        if getattr(trace, "texttemplate", None) and not fitted:              # numbers written in the cells
            trace.update(textfont=dict(size=font_size - 4))
        if "colorbar" in trace:                                            # heatmaps
            trace.update(colorbar=bar)
        elif getattr(getattr(trace, "marker", None), "showscale", None):   # a colour-bar carrier
            trace.update(marker=dict(colorbar=bar))
    if max_height is not None and big.layout.height is not None and big.layout.height > max_height:
        big.layout.height = max_height
    refit_margins(big, font_size, original)
    if big.layout.height is not None and big.layout.margin.t is not None:
        fit_ticks(big, "x", font_size - 2, None, upright=matrix_like(big))
        refit_margins(big, font_size, original)
        fit_ticks(big, "y", font_size - 2, max_height)
        fit_colorbars(big, font_size - 4, max_height)
        fit_y_title(big, font_size, max_height)
        refit_margins(big, font_size, original)
        drop_crowded_text(big, font_size)
    return big


def figure_width(fig: go.Figure) -> float:
    meta = fig.layout.meta
    return meta.get("width", MAIN_WIDTH) if isinstance(meta, dict) else MAIN_WIDTH


def plot_size(fig: go.Figure) -> tuple[float, float]:
    """(width, height) in px of the plotting area, as drawn in a 1280 px window."""
    margin = fig.layout.margin
    return (figure_width(fig) - (margin.l or 0) - (margin.r or 0),
            fig.layout.height - (margin.t or 0) - (margin.b or 0))


def labelled_axes(fig: go.Figure, letter: str):
    """(layout name, axis) of each axis of that letter with its own tick labels."""
    for name in fig.layout:
        if name.startswith(letter + "axis"):
            axis = fig.layout[name]
            if axis.tickvals is not None and len(axis.tickvals) > 0:         # pieces, or numbers placed by hand
                yield name, axis


def unit_px(fig: go.Figure, name: str, axis, size: tuple[float, float]) -> float:
    """px per data unit along `axis` (a heatmap cell is one unit), the plot being `size` px."""
    domain = axis.domain or (0, 1)
    values = [float(v) for v in axis.tickvals] if axis.tickvals is not None and len(axis.tickvals) else [0.0]
    if axis.range is not None:
        span = abs(axis.range[1] - axis.range[0])
    else:
        span = max(values) - min(values) + 1.0
        ref = name[0] + name[5:]                                # "yaxis2" -> "y2"
        for trace in fig.data:
            if trace.type == "heatmap" and (getattr(trace, name[0] + "axis", None) or name[0]) == ref \
                    and trace.z is not None and len(trace.z):
                span = max(span, float(len(trace.z) if name[0] == "y" else len(trace.z[0])))
    length = size[0] if name[0] == "x" else size[1]
    return length * (domain[1] - domain[0]) / max(span, 1e-9)


def axis_pitch(fig: go.Figure, name: str, axis) -> float:
    """px between neighbouring tick labels of `axis` as drawn (cells kept square: the tighter side)."""
    size = plot_size(fig)
    px = unit_px(fig, name, axis, size)
    if fig.layout.yaxis.scaleanchor == "x" or fig.layout.xaxis.scaleanchor == "y":
        px = min(unit_px(fig, "xaxis", fig.layout.xaxis, size), unit_px(fig, "yaxis", fig.layout.yaxis, size))
    values = sorted(float(v) for v in axis.tickvals)
    gaps = [b - a for a, b in zip(values, values[1:]) if b > a]
    return px * (min(gaps) if gaps else 1.0)


def matrix_like(fig: go.Figure) -> bool:
    """A labelled matrix, whose margins matrix_margins computes (refit_margins)."""
    layout = fig.layout
    return bool(fig.data and fig.data[0].type == "heatmap" and layout.xaxis.ticktext is not None
                and layout.yaxis.ticktext is not None and layout.xaxis.automargin and layout.yaxis.automargin)


def fit_ticks(fig: go.Figure, letter: str, largest: float, max_height: int | None, upright: bool = False,
              smallest: float = MIN_TICK) -> None:
    """Tick type as large as the pitch allows (<= `largest`, >= `smallest`); rows too close for
    `smallest` grow the figure up to `max_height`, then only every k-th label is kept. `upright`:
    x labels that do not fit side by side are set upright. Labels a figure marks (keep_labels) stay."""
    for name, axis in labelled_axes(fig, letter):
        pitch = axis_pitch(fig, name, axis)
        if pitch < LABEL_PITCH * smallest and letter == "y":
            wanted = fig.layout.height + plot_size(fig)[1] * (LABEL_PITCH * smallest / max(pitch, 1e-9) - 1)
            fig.layout.height = int(min(wanted, max_height or wanted) + 0.999)
            pitch = axis_pitch(fig, name, axis)
        if pitch < LABEL_PITCH * smallest:
            every = int(np.ceil(LABEL_PITCH * smallest / max(pitch, 1e-9)))
            period = tile_period(fig, name)
            kept = (thinned_tile_ticks(list(axis.tickvals), every, period, keep_last=letter == "x") if period
                    else thinned_ticks(list(axis.tickvals), every, kept_values(fig, name)))
            axis.update(tickvals=[axis.tickvals[i] for i in kept],
                        **({} if axis.ticktext is None else {"ticktext": [axis.ticktext[i] for i in kept]}))
            pitch *= every
        size = max(smallest, min(largest, pitch / LABEL_PITCH))
        labels = axis.ticktext if axis.ticktext is not None else [f"{v:g}" for v in axis.tickvals]
        if upright and letter == "x" and max(text_width(str(t), size) for t in labels) + 10 > pitch:
            # upright, never tilted: tilted 30 degrees, a long label's end reached over its
            # neighbour's box ("▁church" on "." with an 18-word sentence)
            axis.update(tickangle=90)
        axis.update(tickfont=dict(size=int(size)))


def drop_crowded_text(fig: go.Figure, font_size: float) -> None:
    """Text written in heatmap cells, or beside scatter markers (a beam tree's pieces), dropped where
    the cells or markers stand closer than the text is wide: it ran word into word (a 22-step beam
    on a projector). A hover or a tap still gives it."""
    size = plot_size(fig)
    for trace in fig.data:
        axis_name = "xaxis" + ((trace.xaxis or "x")[1:] if hasattr(trace, "xaxis") else "")
        axis = fig.layout[axis_name] if axis_name in fig.layout else fig.layout.xaxis
        text_size = trace.textfont.size if getattr(trace, "textfont", None) is not None and trace.textfont.size else font_size
        if trace.type == "heatmap" and (trace.texttemplate or trace.text is not None):
            columns = len(trace.z[0]) if trace.z is not None and len(trace.z) else 1
            cell = size[0] * ((axis.domain[1] - axis.domain[0]) if axis.domain else 1) / max(columns, 1)
            if cell < 2.2 * text_size:                      # room for two characters, at the least
                trace.update(texttemplate="", text=None)
        elif trace.type == "scatter" and trace.mode and "text" in trace.mode and trace.text is not None \
                and trace.x is not None and len(trace.x) > 1:
            steps = sorted({float(x) for x in trace.x})
            gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
            pitch = unit_px(fig, axis_name, axis, size) * (min(gaps) if gaps else 1.0)
            widest = max((text_width(str(t), text_size) for t in trace.text), default=0.0)
            if widest > pitch:
                trace.update(mode=trace.mode.replace("+text", "").replace("text+", "") or "markers")


def colorbars(fig: go.Figure):
    for trace in fig.data:
        if "colorbar" in trace and trace.type == "heatmap" and trace.showscale is not False:
            yield trace, trace.colorbar
        elif getattr(getattr(trace, "marker", None), "showscale", None):
            yield trace, trace.marker.colorbar


def fit_colorbars(fig: go.Figure, size: float, max_height: int | None) -> None:
    """A colour bar as long as its numbers (or words) and title need: the figure grows up to
    `max_height`; past that, its type shrinks to MIN_TICK and it keeps two numbers."""
    for _, bar in colorbars(fig):
        words = len(bar.ticktext) if bar.ticktext is not None else 3
        title = bar.title.text or "" if bar.title is not None else ""
        needed = max(words * LABEL_PITCH * size + 6, text_width(title, size + 2) + 8)
        length = plot_size(fig)[1] * (bar.len if bar.len is not None else 1)
        if length < needed:
            wanted = fig.layout.height + (needed - length) / (bar.len if bar.len is not None else 1)
            fig.layout.height = int(min(wanted, max_height or wanted) + 0.999)
            length = plot_size(fig)[1] * (bar.len if bar.len is not None else 1)
        if length < needed:
            bar.update(tickfont=dict(size=MIN_TICK), nticks=2 if bar.ticktext is None else None)


def fit_y_title(fig: go.Figure, size: float, max_height: int | None) -> None:
    """A plot at least as tall as its y axis's title, which runs along it (up into the figure's
    title otherwise): the figure grows up to `max_height`."""
    axis = fig.layout.yaxis
    text = axis.title.text if axis.title is not None and axis.title.text else ""
    needed = text_width(text, size) * 0.85           # text_width is generous; the title may reach the plot's ends
    height = plot_size(fig)[1] * ((axis.domain[1] - axis.domain[0]) if axis.domain else 1)
    if text and height < needed:
        wanted = fig.layout.height + needed - height
        fig.layout.height = int(min(wanted, max_height or wanted) + 0.999)


def right_label_room(fig: go.Figure, default_size: float) -> int:
    """px the tick labels of y axes drawn on the right need (Compare's edited map), 0 without any."""
    room = 0.0
    for _, axis in labelled_axes(fig, "y"):
        if axis.side == "right" and axis.ticktext is not None and len(axis.ticktext):
            size = axis.tickfont.size if axis.tickfont is not None and axis.tickfont.size else default_size
            room = max(room, max(text_width(str(t), size) for t in axis.ticktext) + 10)
    return round(room)


def refit_margins(fig: go.Figure, font_size: int, original: dict | None = None) -> None:
    """Margins grown for the larger type, so plotly.js still draws the figure in one pass: a labelled
    matrix's recomputed (matrix_margins), any other figure's tick-label room scaled with its font
    (tick labels 11-12 px before). `original`: the margins before presenter type (never shrunk below)."""
    layout, margin = fig.layout, fig.layout.margin
    if margin.l is None:
        return
    old = original or {side: getattr(margin, side) or 0 for side in ("l", "r", "b")}
    old = {side: px or 0 for side, px in old.items()}
    if matrix_like(fig):
        def size(axis):
            return axis.tickfont.size if axis.tickfont is not None and axis.tickfont.size else font_size - 2
        fitted = matrix_margins(layout.yaxis.ticktext, layout.xaxis.ticktext, y_size=size(layout.yaxis),
                                x_size=size(layout.xaxis),        # maps without a bar give its room to the cells
                                colorbar=next((bar.to_plotly_json() for _, bar in colorbars(fig)), None),
                                top=margin.t or 0, title_size=font_size, bar_size=font_size - 4,
                                width=figure_width(fig), x_angle=layout.xaxis.tickangle)
        room = right_label_room(fig, font_size - 2)          # a second map's rows, before the bar
        if room:
            fitted["r"] += 2 * room                            # the bar's xpad counts on both sides
            for _, bar in colorbars(fig):
                bar.update(xpad=COLORBAR_AT_EDGE["xpad"] + room)
    else:                   # 10 px stays 10 px: a figure that keeps its labels inside asks for nothing
        scale = (font_size - 2) / 11.5
        fitted = {side: 10 + (px - 10) * scale if px > 10 else px for side, px in old.items()}
    fig.update_layout(margin={side: round(max(fitted[side], old[side])) for side in old})


def figure_html(fig: go.Figure, *, config: dict | None = None) -> str:
    """A standalone HTML page with plotly.js embedded (a CDN link fails offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True,
                       config=config if config is not None else PLOTLY_CONFIG)


TRACE_SCHEMA = (
    "Attention Atlas trace. Pieces are sentencepiece pieces (▁ marks a word start). "
    "source_tokens: S pieces the encoder saw (ending in </s>). target_tokens: T pieces the decoder "
    "was fed (<s>, then output_tokens[:-1]). output_tokens: T pieces produced. "
    "encoder_self (layers, heads, S, S), decoder_self (layers, heads, T, T), cross (layers, heads, T, S): "
    "softmax weights, rows = queries, columns = keys, each row sums to 1; row t of decoder_self and "
    "cross is the step that fed target_tokens[t] and produced output_tokens[t]. step_probs (T,): "
    "p(output_tokens[t] | prefix). source_padding (S,) and target_causal (T, T): True where a key "
    "may be attended. positional_encoding (max(S, T), d_model): the values added to the embeddings. "
    "source_embeddings (S, d_model): token embeddings × sqrt(d_model), before the positional encoding. "
    "meta: model, decoding settings and ablated heads of the run."
)
TRACE_ARRAYS = ("encoder_self", "decoder_self", "cross", "step_probs", "source_padding", "target_causal",
                "positional_encoding", "source_embeddings")
TRACE_TOKENS = ("source_tokens", "target_tokens", "output_tokens")


def trace_payload(*, source_tokens, target_tokens, output_tokens, attention: dict, step_probs,
                  source_padding, target_causal, positional_encoding, source_embeddings,
                  meta: dict | None = None) -> dict:
    """Check one run's arrays against its pieces and gather them for export."""
    S, T = len(source_tokens), len(output_tokens)
    if len(target_tokens) != T:
        raise ValueError(f"{len(target_tokens)} fed pieces for {T} output pieces")
    arrays = {
        "encoder_self": check_attention(attention["encoder_self"], source_tokens, source_tokens, 4)[0],
        "decoder_self": check_attention(attention["decoder_self"], output_tokens, target_tokens, 4)[0],
        "cross": check_attention(attention["cross"], output_tokens, source_tokens, 4)[0],
        "step_probs": np.asarray(step_probs, dtype=np.float32),
        "source_padding": np.asarray(source_padding, dtype=bool),
        "target_causal": np.asarray(target_causal, dtype=bool),
        "positional_encoding": np.asarray(positional_encoding, dtype=np.float32),
        "source_embeddings": np.asarray(source_embeddings, dtype=np.float32),
    }
    expected = {"step_probs": (T,), "source_padding": (S,), "target_causal": (T, T)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise ValueError(f"{name} has shape {arrays[name].shape}, expected {shape}")
    return {"schema": TRACE_SCHEMA, "meta": dict(meta or {}),
            "source_tokens": [str(t) for t in source_tokens], "target_tokens": [str(t) for t in target_tokens],
            "output_tokens": [str(t) for t in output_tokens], **arrays}


def trace_json(payload: dict) -> bytes:
    """The trace as UTF-8 JSON: pieces as strings, arrays as nested lists (float32 values)."""
    document = {key: (value.tolist() if isinstance(value, np.ndarray) else value)
                for key, value in payload.items()}
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def trace_npz(payload: dict) -> bytes:
    """The trace as a compressed .npz that loads with allow_pickle=False (pieces as unicode arrays)."""
    arrays = {name: payload[name] for name in TRACE_ARRAYS}
    arrays.update({name: np.array(payload[name], dtype=str) for name in TRACE_TOKENS})
    arrays["schema"] = np.array(payload["schema"])
    arrays["meta_json"] = np.array(json.dumps(payload["meta"], ensure_ascii=False))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
