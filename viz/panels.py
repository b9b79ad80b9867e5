"""Side panels: attention masks, next-token probabilities, a shaded translation."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (COLORBAR_AT_EDGE, MAIN_WIDTH, as_array, as_probabilities, auto_height, check_tokens, figure_title,
                    label_room, matrix_heatmap, tick_font_size, title_room, token_axis)
from ._figure import build_figure
from ._labels import display_tokens, escape_html, show_piece

MASKED, ALLOWED = "#d9d9d9", "#2166ac"   # light grey / dark blue: readable without hue
MASK_COLORSCALE = [[0.0, MASKED], [0.5, MASKED], [0.5, ALLOWED], [1.0, ALLOWED]]
BAR, CHOSEN = "#9ecae1", "#e66101"       # light blue / orange, a CVD-safe pair


def as_mask(mask, name: str = "mask") -> np.ndarray:
    """Bool array from bools or 0/1 numbers; anything else is an error."""
    arr = as_array(mask, name)
    if arr.dtype != bool:
        if not np.all(np.isin(arr, (0, 1))):
            raise ValueError(f"{name} must be boolean (or 0/1), got values other than 0 and 1")
        arr = arr.astype(bool)
    return arr


def binary_heatmap(mask: np.ndarray, *, y_labels, x_labels, y_title: str, x_title: str,
                   title: str, hover: str, width: float = MAIN_WIDTH, legend: bool = True,
                   height: int | None = None) -> go.Figure:
    """Two-colour heatmap of a bool matrix: z is 0/1 ints, 1 = may attend. `width`: see matrix_heatmap.
    `legend=False`: no colour bar naming the two colours (the page says them), the room goes to the cells."""
    z = mask.astype(np.int8)
    return matrix_heatmap(z, y_labels=y_labels, x_labels=x_labels, y_title=y_title,
                          x_title=x_title, zmin=0, zmax=1, colorscale=MASK_COLORSCALE,
                          hovertemplate=hover, title=title, xgap=1, ygap=1,
                          colorbar=dict(title={}, tickmode="array", tickvals=[0.25, 0.75],
                                        ticktext=["masked", "may attend"], **COLORBAR_AT_EDGE),
                          height=height or auto_height(z.shape[0], low=160), width=width,
                          **({} if legend else {"showscale": False}))


def mask_figure(mask, query_tokens, key_tokens, title: str = "", *,
                show_space: bool = False, width: float = MAIN_WIDTH, legend: bool = True,
                height: int | None = None) -> go.Figure:
    """A (Q, K) attention mask (True = may attend), or a (K,) padding mask as 1 × K.

    For a 1-D mask `query_tokens` is ignored (may be None): the row is "any query".
    `legend=False` leaves out the colour bar; `height` overrides the one from the rows.
    """
    arr = as_mask(mask)
    if arr.ndim == 1:
        arr, query_tokens = arr[None, :], ["any query"]
        y_labels = ["any query"]
    elif arr.ndim == 2:
        y_labels = None
    else:
        raise ValueError(f"mask must be 1-D (K,) or 2-D (Q, K), got shape {arr.shape}")
    query, key = check_tokens(arr.shape, query_tokens, key_tokens, "mask")
    y_labels = y_labels or display_tokens(query, show_space=show_space)
    return binary_heatmap(arr, y_labels=y_labels, x_labels=display_tokens(key, show_space=show_space),
                          y_title="Query", x_title="Key", title=title, width=width, legend=legend, height=height,
                          hover="Query %{y}<br>Key %{x}<br>may attend: %{z}<extra></extra>")


def batch_padding_figure(mask, row_labels, key_labels=None, title: str = "") -> go.Figure:
    """A (B, S) batch padding mask: which key positions each sentence may attend."""
    arr = as_mask(mask, "batch mask")
    if arr.ndim != 2:
        raise ValueError(f"batch mask must be 2-D (B, S), got shape {arr.shape}")
    key_labels = [str(j) for j in range(arr.shape[1])] if key_labels is None else key_labels
    rows, keys = check_tokens(arr.shape, row_labels, key_labels, "batch mask")
    return binary_heatmap(arr, y_labels=display_tokens(rows), x_labels=display_tokens(keys),
                          y_title="Sentence in batch", x_title="Key position", title=title,
                          hover="Sentence %{y}<br>Key position %{x}<br>"
                                "may attend: %{z}<extra></extra>")


def topk_bar_figure(top_k: Sequence, chosen=None, title: str = "", *,
                    show_space: bool = False, note: str = "") -> go.Figure:
    """Horizontal bars of the next-token distribution, best on top, chosen in orange.

    `chosen` is a piece, or (piece, prob) so a forced piece outside the top k is
    still drawn (as an extra bar at the bottom). `note`: a second, smaller title line (a
    narrow column cuts one long line).
    """
    items = [(str(p), float(q)) for p, q in top_k]
    chosen_piece, chosen_prob = (chosen if isinstance(chosen, (tuple, list)) else (chosen, None))
    if chosen_piece is not None and chosen_prob is not None \
            and str(chosen_piece) not in {p for p, _ in items}:
        items.append((str(chosen_piece), float(chosen_prob)))
    probs = as_probabilities([q for _, q in items], "top_k")
    labels = display_tokens([p for p, _ in items], show_space=show_space)
    colours = [CHOSEN if chosen_piece is not None and p == str(chosen_piece) else BAR
               for p, _ in items]
    bar = dict(
        type="bar", x=probs, y=list(range(len(items))), orientation="h",
        marker=dict(color=colours), customdata=labels, text=[f"{q:.3f}" for q in probs],
        textposition="auto", cliponaxis=False,
        hovertemplate="%{customdata}<br>p = %{x:.4f}<extra></extra>")
    return build_figure([bar], dict(
        title=figure_title(title, note), showlegend=False, plot_bgcolor="white",
        xaxis=dict(title=dict(text="Probability"), range=[0, 1], tickformat=".1f",
                   tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0], showgrid=True, gridcolor="#eeeeee",
                   automargin=True),                  # room for the title below the ticks
        yaxis=token_axis(labels, "Piece", reverse=True),
        height=auto_height(len(items), per_row=26, base=100, low=200, high=600),
        # room for the labels and the numbers below: automargin then finds nothing to grow and
        # plotly.js draws the chart once (viz._base.matrix_margins)
        margin=dict(l=label_room(labels, tick_font_size(len(labels))), r=24, t=66 if note else 50 if title else 20,
                    b=round(1.3 * 12 + title_room())),
    ))


UNSURE_COLOURS = (np.array([255, 255, 255]), np.array([217, 72, 1]))   # white -> orange: a warning, not attention


def probability_colour(p: float) -> tuple[str, str]:
    """(background, text) colours: white for a confident piece, deep orange for an unsure one.
    Orange is the colour of doubt only; attention keeps its own scale (bright = more weight)."""
    unsure = 1.0 - min(max(p, 0.0), 1.0)
    lo, hi = UNSURE_COLOURS
    r, g, b = (lo + (hi - lo) * unsure).round().astype(int)
    return f"rgb({r},{g},{b})", ("#ffffff" if unsure > 0.6 else "#111111")


UNSUPPORTED = "#7b3294"     # purple: "the source may not support this piece", apart from orange doubt
UNSUPPORTED_MARK = f"border:2px dashed {UNSUPPORTED};"


def token_probability_html(tokens: Sequence[str], probs: Sequence[float], *,
                           show_space: bool = True, current: int | None = None,
                           unsupported: Sequence[float] | None = None, threshold: float = 0.5,
                           note: str = "") -> str:
    """One <div> of <span>s: each output piece shaded by p(piece | prefix), then a legend.

    Unsure pieces are orange, so doubt stands out; the legend says so. `current`: the piece being
    produced at the step a view shows, outlined and underlined. `unsupported`: the diagnosis's
    score of each piece (T,); pieces at or above `threshold` get a dashed purple frame (a second,
    separate question from p: "does the source back this piece?") and the legend an entry. `note`:
    plain text after the legend (the diagnosis's one sentence; on the strip's line when it fits). Every
    piece is escaped (HTML and Markdown) because this goes to st.markdown(unsafe_allow_html=True);
    the snippet has no newline, so Markdown treats it as one raw HTML block.
    """
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of pieces, not a string")
    tokens = [str(t) for t in tokens]
    p = as_probabilities(probs, "probs")
    if len(tokens) != len(p):
        raise ValueError(f"{len(tokens)} tokens but {len(p)} probabilities")
    spans = []
    if current is not None and not (isinstance(current, (int, np.integer)) and 0 <= current < len(tokens)):
        raise ValueError(f"current must be a piece index below {len(tokens)}, got {current!r}")
    scores = None if unsupported is None else as_probabilities(unsupported, "unsupported")
    if scores is not None and len(scores) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(scores)} unsupported scores")
    flagged = set() if scores is None else {i for i, v in enumerate(scores.tolist()) if v >= threshold}
    for i, (tok, prob) in enumerate(zip(tokens, p.tolist())):
        background, colour = probability_colour(prob)
        label = escape_html(show_piece(tok, show_space=show_space))
        mark = "outline:2px solid #111;outline-offset:1px;text-decoration:underline;" if i == current else ""
        title = f"step {i + 1}: {label} p={prob:.3f}"     # counted from 1, as "Step 5 of 17" is
        if scores is not None:
            title += f" · unsupported by the source? {scores[i]:.2f}" if i in flagged else f" · unsupported {scores[i]:.2f}"
        classes = "aa-token" + (" aa-current" if i == current else "") + (" aa-unsupported" if i in flagged else "")
        frame = UNSUPPORTED_MARK if i in flagged else ""
        spans.append(
            f'<span class="{classes}" title="{title}" data-index="{i}" '
            f'style="background-color:{background};color:{colour};padding:1px 3px;{mark}{frame}'
            f'margin:1px;border-radius:3px;white-space:pre;display:inline-block">{label}</span>')
    sure, unsure = probability_colour(1.0)[0], probability_colour(0.0)[0]
    legend = (f'<span class="aa-legend" style="font-size:0.75em;color:#666;margin-left:10px;white-space:nowrap">'
              f'<span style="background:{sure};border:1px solid #ccc;padding:0 6px">sure</span> → '
              f'<span style="background:{unsure};color:#fff;padding:0 6px">unsure</span> (p of each piece)</span>')
    if flagged:
        legend += (f'<span class="aa-legend-unsupported" style="font-size:0.75em;color:#666;margin-left:10px;'
                   f'white-space:nowrap"><span style="{UNSUPPORTED_MARK}padding:0 6px">framed</span> '
                   f'= unsupported by the source? (diagnosis)</span>')
    if note:
        # the theme's own text colour, a little lighter: a fixed grey read as grey on near-black
        legend += (f'<span class="aa-diagnosis" style="font-size:0.8em;color:inherit;opacity:0.85;margin-left:10px;'
                   f'display:inline-block">'
                   f'{escape_html(note)}</span>')
    return f'<div class="aa-tokens" style="line-height:1.9">{"".join(spans)}{legend}</div>'
