"""Export settings for the Plotly toolbar, and standalone HTML that works offline.

A figure cannot carry its own toolbar config, so the app passes these dicts to
st.plotly_chart(config=...). The camera button then saves PNG at 2× (or SVG).
"""
from __future__ import annotations

import io
import json

import numpy as np
import plotly.graph_objects as go

from ._base import MAIN_WIDTH, check_attention, matrix_margins

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


def presenter_figure(fig: go.Figure, font_size: int = 18) -> go.Figure:
    """A copy with fonts large enough to read from the back of a room (tick labels too)."""
    big = go.Figure(fig)
    big.update_layout(font=dict(size=font_size), title_font=dict(size=font_size + 4))
    big.update_xaxes(tickfont=dict(size=font_size - 2), title_font=dict(size=font_size))
    big.update_yaxes(tickfont=dict(size=font_size - 2), title_font=dict(size=font_size))
    # Colour bars: the title turned along the bar and at most three numbers, so large type does not
    # stack label on label when the chart is short (a one-row heatmap is ~100 px tall).
    bar = dict(tickfont=dict(size=font_size - 4), title=dict(side="right", font=dict(size=font_size - 2)), nticks=3)
    for trace in big.data:
        if getattr(trace, "texttemplate", None):                          # numbers written in the cells
            trace.update(textfont=dict(size=font_size - 4))
        if "colorbar" in trace:                                            # heatmaps
            trace.update(colorbar=bar)
        elif getattr(getattr(trace, "marker", None), "showscale", None):   # a colour-bar carrier
            trace.update(marker=dict(colorbar=bar))
    refit_margins(big, font_size)
    return big


def refit_margins(fig: go.Figure, font_size: int) -> None:
    """Margins grown for the larger type, so plotly.js still draws the figure in one pass: a labelled
    matrix's recomputed (matrix_margins), any other figure's tick-label room scaled with its font
    (tick labels 11-12 px before)."""
    layout, margin = fig.layout, fig.layout.margin
    if margin.l is None:
        return
    old = {side: getattr(margin, side) or 0 for side in ("l", "r", "b")}
    labelled = layout.xaxis.ticktext is not None and layout.yaxis.ticktext is not None
    if fig.data and fig.data[0].type == "heatmap" and labelled and layout.xaxis.automargin and layout.yaxis.automargin:
        width = layout.meta.get("width", MAIN_WIDTH) if isinstance(layout.meta, dict) else MAIN_WIDTH
        fitted = matrix_margins(layout.yaxis.ticktext, layout.xaxis.ticktext, y_size=font_size - 2,
                                x_size=font_size - 2, colorbar=fig.data[0].colorbar.to_plotly_json(),
                                top=margin.t or 0, title_size=font_size, bar_size=font_size - 4, width=width)
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
