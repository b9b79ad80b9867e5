"""Two translations side by side: a sentence and its edited copy (one word swapped, or typed anew).

Read at a glance: which source pieces were edited, which output pieces changed and how sure the
model was of each (`swap_pieces_figure`); what each output piece read from the source in both
runs, with the edited source columns and the changed output rows outlined (`swap_map_figure`);
and, per changed output piece, how much of it came from the edited source pieces (`changed_table`).
numpy/pandas/plotly only. Rows are queries (output pieces), columns keys (source pieces).
"""
from __future__ import annotations

import difflib
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (COLORBAR_AT_EDGE, DEFAULT_COLORSCALE, as_array, as_probabilities, check_tokens, figure_title,
                    heatmap_trace, matrix_margins, side_by_side_margins, text_width, token_axis)
from ._figure import build_figure
from ._labels import display_tokens

EDIT_COLOR, CHANGE_COLOR, SAME_COLOR = "#ff7f0e", "#d62728", "#eeeeee"
Column = tuple  # (index in a or None, index in b or None, same: bool)


def _pieces(tokens, name: str) -> list[str]:
    if isinstance(tokens, str):
        raise ValueError(f"{name} must be a list of pieces, not a string")
    return [str(t) for t in tokens]


def align_pieces(a: Sequence[str], b: Sequence[str]) -> list[Column]:
    """Columns pairing the pieces of a and b (difflib's longest matching blocks): (i, j, same).
    A replaced run pairs position by position; what is left over has None on the other side."""
    a, b = _pieces(a, "a"), _pieces(b, "b")
    columns: list[Column] = []
    for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            columns += [(i, j, True) for i, j in zip(range(i0, i1), range(j0, j1))]
            continue
        for offset in range(max(i1 - i0, j1 - j0)):
            i, j = i0 + offset, j0 + offset
            columns.append((i if i < i1 else None, j if j < j1 else None, False))
    return columns


def changed_positions(columns: Sequence[Column]) -> tuple[list[int], list[int]]:
    """(positions in a, positions in b) of the pieces that differ."""
    return ([i for i, _, same in columns if not same and i is not None],
            [j for _, j, same in columns if not same and j is not None])


def _strip(columns, tokens_a, tokens_b, values_a, values_b, show_space: bool):
    """(z (2, C), text (2, C)) of one aligned pair of rows; gaps are NaN / ""."""
    labels = display_tokens(tokens_a, show_space=show_space), display_tokens(tokens_b, show_space=show_space)
    z = np.full((2, len(columns)), np.nan)
    text = np.full((2, len(columns)), "", dtype=object)
    for c, pair in enumerate(columns):
        for row, (index, values) in enumerate(zip(pair[:2], (values_a, values_b))):
            if index is not None:
                z[row, c], text[row, c] = values[index], labels[row][index]
    return z, text


def _outline(columns, row_offset: float, axis: str) -> list[dict]:
    """Rectangles around the cells that differ (both rows of a column)."""
    return [dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=c - 0.5, x1=c + 0.5, y0=row_offset - 0.5,
                 y1=row_offset + 1.5, line=dict(color=CHANGE_COLOR, width=2), fillcolor="rgba(0,0,0,0)")
            for c, (_, _, same) in enumerate(columns) if not same]


def swap_pieces_figure(source_a, source_b, output_a, output_b, probs_a, probs_b,
                       title: str = "Original and edited, piece by piece", *, show_space: bool = False,
                       height: int | None = None) -> go.Figure:
    """Top: the two source sentences aligned, edited pieces orange. Bottom: the two translations
    aligned, each piece coloured by its probability (0..1) in its own run; the pieces that differ
    are outlined red."""
    src_a, src_b = _pieces(source_a, "source_a"), _pieces(source_b, "source_b")
    out_a, out_b = _pieces(output_a, "output_a"), _pieces(output_b, "output_b")
    p_a, p_b = as_probabilities(probs_a, "probs_a"), as_probabilities(probs_b, "probs_b")
    if len(p_a) != len(out_a) or len(p_b) != len(out_b):
        raise ValueError(f"probabilities ({len(p_a)}, {len(p_b)}) must match the output pieces "
                         f"({len(out_a)}, {len(out_b)})")
    source_columns, output_columns = align_pieces(src_a, src_b), align_pieces(out_a, out_b)
    marks = [np.zeros(len(src_a)), np.zeros(len(src_b))]         # 1: an edited source piece
    for side, positions in enumerate(changed_positions(source_columns)):
        marks[side][positions] = 1.0
    z_src, text_src = _strip(source_columns, src_a, src_b, *marks, show_space)
    z_out, text_out = _strip(output_columns, out_a, out_b, p_a, p_b, show_space)
    rows = ["original", "edited"]
    bar = dict(title=dict(text="p"), len=0.6, y=0.3, **COLORBAR_AT_EDGE)
    traces = [
        heatmap_trace(z_src, zmin=0.0, zmax=1.0, colorscale=[[0, SAME_COLOR], [1, EDIT_COLOR]],
                      hovertemplate="%{y} source: %{text}<extra></extra>", colorbar={}, showscale=False,
                      text=text_src, texttemplate="%{text}", textfont=dict(size=12), xaxis="x", yaxis="y",
                      xgap=2, ygap=2,
                      y=rows, name="source"),
        heatmap_trace(z_out, zmin=0.0, zmax=1.0, colorscale=DEFAULT_COLORSCALE, text=text_out,
                      texttemplate="%{text}<br>%{z:.2f}", textfont=dict(size=12), hovertemplate="%{y} output: %{text}<br>p = %{z:.3f}"
                                                                          "<extra></extra>",
                      colorbar=bar, xaxis="x2", yaxis="y2", xgap=2, ygap=2, y=rows, name="output"),
    ]
    hidden = dict(showticklabels=False, showgrid=False, zeroline=False)
    layout = dict(
        title=figure_title(title, "orange: edited source pieces · red outline: output pieces that changed"),
        xaxis={**hidden, "domain": [0, 1]}, yaxis=dict(domain=[0.68, 1.0], autorange="reversed",
                                                         title=dict(text="source"), automargin=True),
        xaxis2={**hidden, "domain": [0, 1], "anchor": "y2"},
        yaxis2=dict(domain=[0.0, 0.6], autorange="reversed", title=dict(text="output · p"), automargin=True),
        shapes=_outline(output_columns, 0, "2"), height=height or 330, plot_bgcolor="white",
        margin=matrix_margins(rows, None, y_size=12, x_size=12, colorbar=bar, top=60, x_title=False))
    return build_figure(traces, layout)


def _map(values, rows, cols, name: str) -> np.ndarray:
    arr = as_array(values, name, ndim=2).astype(float)
    check_tokens(arr.shape, rows, cols, name)
    return arr


def swap_map_figure(values_a, values_b, output_a, output_b, source_a, source_b,
                    title: str = "What each output piece read from the source", *, value_title: str = "weight",
                    zmax: float | None = None, show_space: bool = False, height: int | None = None) -> go.Figure:
    """Two (T, S) maps side by side, original left and edited right, one colour scale (0..zmax,
    default the larger maximum): cross-attention or ALTI+ contributions. Edited source columns and
    changed output rows (found by aligning the pieces) are outlined."""
    out_a, out_b = _pieces(output_a, "output_a"), _pieces(output_b, "output_b")
    src_a, src_b = _pieces(source_a, "source_a"), _pieces(source_b, "source_b")
    a, b = _map(values_a, out_a, src_a, "values_a"), _map(values_b, out_b, src_b, "values_b")
    top = zmax if zmax is not None else max(float(a.max(initial=0.0)), float(b.max(initial=0.0)), 1e-9)
    edited_a, edited_b = changed_positions(align_pieces(src_a, src_b))
    changed_a, changed_b = changed_positions(align_pieces(out_a, out_b))
    traces, shapes, layout = [], [], {}
    for side, (z, out, src, edited, changed, name, axis, domain) in enumerate((
            (a, out_a, src_a, edited_a, changed_a, "original", "", [0.0, 0.46]),
            (b, out_b, src_b, edited_b, changed_b, "edited", "2", [0.54, 1.0]))):
        rows = [("≠ " if i in changed else "") + lab for i, lab in enumerate(display_tokens(out, show_space=show_space))]
        cols = [("✎ " if j in edited else "") + lab for j, lab in enumerate(display_tokens(src, show_space=show_space))]
        cd = np.array([[f"{r}", f"{c}"] for r in rows for c in cols], dtype=object).reshape(len(rows), len(cols), 2)
        traces.append(heatmap_trace(z, zmin=0.0, zmax=top, colorscale=DEFAULT_COLORSCALE, customdata=cd,
                                    hovertemplate=f"{name}: output %{{customdata[0]}}<br>source %{{customdata[1]}}"
                                                  f"<br>{value_title} %{{z:.3f}}<extra></extra>",
                                    colorbar=dict(title=dict(text=value_title), **COLORBAR_AT_EDGE),
                                    showscale=side == 1,
                                    xaxis=f"x{axis}", yaxis=f"y{axis}", name=name))
        layout[f"xaxis{axis}"] = {**token_axis(cols, f"{name} source"), "domain": domain,
                                  **({"anchor": "y2"} if axis else {})}
        layout[f"yaxis{axis}"] = {**token_axis(rows, "output piece" if not axis else "", reverse=True),
                                  **({"anchor": "x2"} if axis else {})}
        shapes += [dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=j - 0.5, x1=j + 0.5, y0=-0.5,
                        y1=len(out) - 0.5, line=dict(color=EDIT_COLOR, width=3)) for j in edited]
        shapes += [dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=-0.5, x1=len(src) - 0.5, y0=i - 0.5,
                        y1=i + 0.5, line=dict(color=CHANGE_COLOR, width=2, dash="dot")) for i in changed]
    # the edited map's row labels on its right, between it and the colour bar: on its left they ran
    # into the original map ("▁Fußballspieler" over its cells, issue 31)
    right = layout["yaxis2"]
    right_room = round(max((text_width(r, right["tickfont"]["size"]) for r in right["ticktext"]), default=0.0) + 10)
    right["side"] = "right"
    traces[1]["colorbar"] = {**traces[1]["colorbar"], "xpad": COLORBAR_AT_EDGE["xpad"] + right_room}
    # margins that hold both maps' labels and the colour bar: plotly.js draws the figure once
    margin = side_by_side_margins(layout["yaxis"], [(layout["xaxis"], 0.46), (layout["xaxis2"], 0.46)],
                                  traces[1]["colorbar"], top=34)
    margin["r"] += 2 * right_room             # plotly.js pads a colour bar by xpad on both of its sides
    rows = max(len(out_a), len(out_b))
    legend = " · ✎ orange: edited source · ≠ red: changed output"        # one title line: the map starts higher
    layout.update(title={**figure_title(title + legend), "font": dict(size=14)}, shapes=shapes,
                  plot_bgcolor="white", height=height or int(np.clip(200 + 24 * rows, 380, 900)), margin=margin)
    return build_figure(traces, layout)


def changed_table(output_a, output_b, probs_a, probs_b, values_a, values_b, source_a, source_b):
    """One row per output piece that changed (aligned as in swap_pieces_figure): the pieces, their
    probabilities, the share of the row's source values on the edited source pieces in each run,
    and the source piece it read most in the edited run. Raw pieces (for st.dataframe)."""
    import pandas as pd
    out_a, out_b = _pieces(output_a, "output_a"), _pieces(output_b, "output_b")
    src_a, src_b = _pieces(source_a, "source_a"), _pieces(source_b, "source_b")
    p_a, p_b = as_probabilities(probs_a, "probs_a"), as_probabilities(probs_b, "probs_b")
    if len(p_a) != len(out_a) or len(p_b) != len(out_b):
        raise ValueError("probabilities must match the output pieces")
    a, b = _map(values_a, out_a, src_a, "values_a"), _map(values_b, out_b, src_b, "values_b")
    edited_a, edited_b = changed_positions(align_pieces(src_a, src_b))

    def share(z, i, cols):
        total = float(z[i].sum())
        return float(z[i, cols].sum()) / total if cols and total > 0 else 0.0

    rows = []
    for i, j, same in align_pieces(out_a, out_b):
        if same:
            continue
        rows.append({
            "original": out_a[i] if i is not None else "", "p original": p_a[i] if i is not None else np.nan,
            "edited": out_b[j] if j is not None else "", "p edited": p_b[j] if j is not None else np.nan,
            "from edited source (original)": share(a, i, edited_a) if i is not None else np.nan,
            "from edited source (edited)": share(b, j, edited_b) if j is not None else np.nan,
            "read most (edited)": src_b[int(np.argmax(b[j]))] if j is not None and len(src_b) else ""})
    columns = ["original", "p original", "edited", "p edited", "from edited source (original)",
               "from edited source (edited)", "read most (edited)"]
    return pd.DataFrame(rows, columns=columns)
