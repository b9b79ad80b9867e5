"""Head ablation: compare a translation with heads switched off against the original.

Two views: a piece-level diff of the two translations (HTML for st.markdown), and,
for one forced output, how each step's probability moved when the heads went off.
"""
from __future__ import annotations

import difflib
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._base import as_probabilities, figure_title, matrix_margins, token_axis
from ._figure import build_figure, height_value, plain
from ._labels import display_tokens, escape_html, show_piece

ORIGINAL, ABLATED, CHANGE = "#4393c3", "#e66101", "#333333"   # blue / orange: a CVD-safe pair
# (background, text) per side; explicit text colour so both read in light and dark themes
REMOVED = ("#f8c9c4", "#5c0a0a")
ADDED = ("#c7e9c0", "#00441b")


def _pieces(pieces: Sequence, name: str) -> list[str]:
    """A list of str pieces; a bare string would be diffed character by character."""
    if isinstance(pieces, str):
        raise ValueError(f"{name} must be a list of pieces, not a string")
    return [str(p) for p in pieces]


def piece_diff(old: Sequence[str], new: Sequence[str]) -> list[tuple[str, list[str], list[str]]]:
    """(tag, old_pieces, new_pieces) blocks, tag in equal/replace/delete/insert.

    autojunk is off: on long outputs it would treat frequent pieces (▁a, ▁der) as junk
    and report spurious changes.
    """
    old, new = _pieces(old, "old"), _pieces(new, "new")
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return [(tag, old[i1:i2], new[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def changed_count(old: Sequence[str], new: Sequence[str]) -> int:
    """How many pieces of `new` lie outside an unchanged block (0 when identical)."""
    return sum(len(b) for tag, _, b in piece_diff(old, new) if tag != "equal")


def _span(piece: str, show_space: bool, style: str = "", note: str | None = None) -> str:
    label = escape_html(show_piece(piece, show_space=show_space))
    if note is None:
        return f'<span class="atlas-piece" style="white-space:pre;padding:1px 2px">{label}</span>'
    return (f'<span class="atlas-piece atlas-changed" title="{escape_html(note)}" '
            f'style="white-space:pre;padding:1px 2px;border-radius:3px;{style}">{label}</span>')


def diff_html(old: Sequence[str], new: Sequence[str], *, side: str,
              show_space: bool = False) -> str:
    """One side of the comparison as a <div> of <span>s, changed pieces marked.

    Old side: removed or replaced pieces struck through on red; new side: inserted or
    replaced pieces underlined on green (the line styles carry the meaning without hue).
    Escaped for HTML and Markdown, and without newlines, as token_probability_html.
    """
    if side not in ("old", "new"):
        raise ValueError(f'side must be "old" or "new", got {side!r}')
    background, colour = REMOVED if side == "old" else ADDED
    line = "line-through" if side == "old" else "underline"
    style = f"background-color:{background};color:{colour};text-decoration:{line}"
    spans = []
    for tag, a, b in piece_diff(old, new):
        mine, other = (a, b) if side == "old" else (b, a)
        other_text = "".join(show_piece(p, show_space=show_space) for p in other)
        if tag == "equal":
            note = None
        elif tag == "replace":
            note = f"replaced by: {other_text}" if side == "old" else f"replaces: {other_text}"
        else:
            note = "removed" if side == "old" else "inserted"
        spans += [_span(p, show_space, style, note) for p in mine]
    return f'<div class="atlas-diff atlas-diff-{side}" style="line-height:1.9">{"".join(spans)}</div>'


def _check_probabilities(pieces, before, after) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Pieces and two equal-length 1-D probability arrays, else ValueError."""
    pieces = _pieces(pieces, "pieces")
    b, a = as_probabilities(before, "before"), as_probabilities(after, "after")
    if not len(pieces) == len(b) == len(a):
        raise ValueError(f"{len(pieces)} pieces but {len(b)} original and {len(a)} ablated "
                         "probabilities: all three must match")
    return pieces, b, a


def probability_change_figure(pieces: Sequence[str], before, after, *, title: str = "",
                              show_space: bool = False, height: int | None = None) -> go.Figure:
    """p(forced piece | prefix) per step, original vs ablated, and their difference.

    The change sits in its own panel below (shared x axis, zero in the middle) so the
    probability axis keeps its fixed 0..1 range and drops stay visible.
    """
    pieces, b, a = _check_probabilities(pieces, before, after)
    change = a - b
    labels = display_tokens(pieces, show_space=show_space)
    x = list(range(len(pieces)))
    custom = [[i + 1, lab, p, q, d] for i, (lab, p, q, d)
              in enumerate(zip(labels, plain(b), plain(a), plain(change)))]
    hover = ("Step %{customdata[0]}: %{customdata[1]}<br>original p = %{customdata[2]:.4f}"
             "<br>ablated p = %{customdata[3]:.4f}<br>change = %{customdata[4]:+.4f}"
             "<extra>%{fullData.name}</extra>")
    traces = [dict(type="bar", name=name, x=x, y=y, marker=dict(color=colour),
                   customdata=custom, hovertemplate=hover)
              for name, y, colour in (("original", b, ORIGINAL), ("ablated", a, ABLATED))]
    traces.append(dict(type="scatter", name="change", x=x, y=change, yaxis="y2",
                       mode="lines+markers", line=dict(color=CHANGE, width=1),
                       marker=dict(color=CHANGE, size=7), customdata=custom, hovertemplate=hover))
    m = 1.1 * max(float(np.max(np.abs(change))) if change.size else 0.0, 0.05)
    xaxis = token_axis(labels, "Output piece (forced)")
    xaxis["anchor"] = "y2"
    return build_figure(traces, dict(
        title=figure_title(title), barmode="group", plot_bgcolor="white",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        xaxis=xaxis,
        yaxis=dict(title=dict(text="Probability"), range=[0, 1], domain=[0.36, 1], anchor="x",
                   tickformat=".1f", showgrid=True, gridcolor="#eeeeee", automargin=True),
        yaxis2=dict(title=dict(text="Change"), range=[-m, m], domain=[0, 0.28], anchor="x",
                    zeroline=True, zerolinecolor="#999999", showgrid=True, gridcolor="#eeeeee",
                    automargin=True),
        height=height_value(height) if height is not None else 460,
        # room for the labels from the start: plotly.js draws the figure once
        margin=matrix_margins([f"−{m:.2f}"], labels, y_size=12, x_size=xaxis["tickfont"]["size"], colorbar=None,
                              top=70 if title else 40),
    ))


def probability_change_table(pieces: Sequence[str], before, after) -> pd.DataFrame:
    """The figure's numbers as a table (step is 1-based), for sorting and export."""
    pieces, b, a = _check_probabilities(pieces, before, after)
    return pd.DataFrame({"step": np.arange(1, len(pieces) + 1), "piece": pieces,
                         "original": b, "ablated": a, "change": a - b})
