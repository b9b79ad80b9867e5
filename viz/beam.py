"""Beam search as a lattice: which hypotheses each step kept, which ended, which one won.

`history[t]` lists step t's hypotheses (alive beams first, then those that finished
at t), each `(pieces, score, parent, finished)` or an object with those attributes
(transformer.decoding.Hypothesis). `final` = (step, index) of the returned one.

The tree figure's traces are fixed: fig.data[0] edges, fig.data[1] the final path,
fig.data[2] == fig.data[-1] the clickable nodes (name "nodes", customdata [step, index]).
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._base import (COLORBAR_AT_EDGE, DEFAULT_COLORSCALE, auto_height, color_range, figure_title, matrix_margins,
                    point_customdata, token_axis)
from ._figure import build_figure, colorscale_value, height_value
from ._labels import display_tokens

EDGE, PATH = "#bbbbbb", "#e66101"     # light grey tree, orange winner (as panels.CHOSEN)
NODE_TRACE = -1                       # index of the node trace in fig.data


class Hyp(NamedTuple):
    pieces: list[str]
    score: float
    parent: int | None
    finished: bool


def _hyp(h: Any, t: int, i: int, previous: int) -> Hyp:
    """One checked hypothesis; `previous` = how many entries step t-1 has."""
    where = f"history[{t}][{i}]"
    if all(hasattr(h, a) for a in Hyp._fields):
        pieces, score, parent, finished = (getattr(h, a) for a in Hyp._fields)
    elif isinstance(h, (tuple, list)) and len(h) == 4:
        pieces, score, parent, finished = h
    else:
        raise ValueError(f"{where} must be (pieces, score, parent, finished), got {h!r}")
    if isinstance(pieces, str) or not isinstance(pieces, (list, tuple)) or not pieces:
        raise ValueError(f"{where}: pieces must be a non-empty list of pieces")
    if isinstance(score, (bool, np.bool_)) or not isinstance(score, (int, float, np.number)) \
            or np.isnan(score):
        raise ValueError(f"{where}: score must be a number, got {score!r}")
    if not isinstance(finished, (bool, np.bool_)):
        raise ValueError(f"{where}: finished must be a bool, got {finished!r}")
    if t == 0:
        if parent is not None:
            raise ValueError(f"{where}: step 0 has no parent, got {parent!r}")
    elif isinstance(parent, (bool, np.bool_)) or not isinstance(parent, (int, np.integer)) \
            or not 0 <= parent < previous:
        raise ValueError(f"{where}: parent {parent!r} is not an index into history[{t - 1}] "
                         f"({previous} entries)")
    return Hyp([str(p) for p in pieces], float(score), None if t == 0 else int(parent),
               bool(finished))


def check_history(history: Sequence) -> list[list[Hyp]]:
    """Every hypothesis as a Hyp, else ValueError naming the first bad one."""
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence) or not history:
        raise ValueError("history must be a non-empty list of steps")
    steps: list[list[Hyp]] = []
    for t, step in enumerate(history):
        if isinstance(step, (str, bytes)) or not isinstance(step, Sequence) or not step:
            raise ValueError(f"history[{t}] must be a non-empty list of hypotheses")
        previous = len(steps[-1]) if steps else 0
        steps.append([_hyp(h, t, i, previous) for i, h in enumerate(step)])
    return steps


def _path(steps: list[list[Hyp]], final) -> list[tuple[int, int]]:
    if not isinstance(final, (tuple, list)) or len(final) != 2 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in final):
        raise ValueError(f"final must be (step, index) integers, got {final!r}")
    t, i = int(final[0]), int(final[1])
    if not (0 <= t < len(steps) and 0 <= i < len(steps[t])):
        raise ValueError(f"final {(t, i)} is outside the history")
    path = [(t, i)]
    while t > 0:                      # parents were range-checked by check_history
        t, i = t - 1, steps[t][i].parent
        path.append((t, i))
    return path[::-1]


def beam_path(history: Sequence, final) -> list[tuple[int, int]]:
    """(step, index) from step 0 to `final`, following parents: the returned hypothesis's ancestry."""
    return _path(check_history(history), final)


UNSELECTED_OPACITY = 0.6     # nodes other than the one clicked: dimmer, still readable
UNSELECTED_TEXT = "#555"      # their piece labels (plotly.js's default fades them to near white)


def beam_tree_figure(history: Sequence, final=None, *, title: str = "Beam search",
                     show_space: bool = False, height: int | None = None) -> go.Figure:
    """The beam lattice: x = step, y = position in the step's list (row 0 on top).

    Node colour is the length-normalised score (Σ log p ÷ the search's length penalty; the hover
    says so, beside the what-if table's plain Σ log p), diamonds ended with </s>, the orange
    line and ringed nodes are `final`'s path. Click a node: customdata [step, index]
    comes back through `beam_selection`.
    """
    steps = check_history(history)
    on_path = set(_path(steps, final)) if final is not None else set()
    nodes = [(t, i, h) for t, step in enumerate(steps) for i, h in enumerate(step)]   # N nodes
    xs = [t + 1 for t, _, _ in nodes]                                                   # (N,)
    ys = [i for _, i, _ in nodes]
    ex, ey = [], []                   # parent → child segments, None-separated
    for t, i, h in nodes:
        if t > 0:
            ex += [t, t + 1, None]
            ey += [h.parent, i, None]
    route = sorted(on_path)           # one node per step, so sorting orders it by step
    labels = display_tokens([h.pieces[-1] for _, _, h in nodes], show_space=show_space)
    hover = []
    for t, i, h in nodes:
        status = "finished (ended)" if h.finished else "alive: kept in the beam"
        hover.append(f"step {t + 1} · #{i + 1}<br>{' '.join(display_tokens(h.pieces, show_space=show_space))}"
                     f"<br>score {h.score:.3f} (length-normalised: Σ log p ÷ a length penalty)<br>{status}"
                     + ("<br>on the returned path" if (t, i) in on_path else ""))
    scores = np.array([h.score for _, _, h in nodes])                                # (N,)
    finite = np.isfinite(scores)
    lo, hi = color_range(scores[finite], normalize=True)
    colour = np.where(finite, scores, lo)                 # -inf drawn as the lowest score
    highlight = [(t, i) in on_path for t, i, _ in nodes]
    bar = dict(title=dict(text="score"), **COLORBAR_AT_EDGE)
    edges = dict(type="scatter", x=ex, y=ey, mode="lines", name="edges", showlegend=False,
                 hoverinfo="skip", line=dict(color=EDGE, width=1.5))
    path = dict(type="scatter", x=[t + 1 for t, _ in route], y=[i for _, i in route],
                mode="lines", name="final path", showlegend=False, hoverinfo="skip",
                line=dict(color=PATH, width=5))
    node = dict(
        type="scatter", x=xs, y=ys, mode="markers+text", name="nodes", showlegend=False,
        customdata=np.array([[t, i] for t, i, _ in nodes], dtype=int).reshape(-1, 2),
        text=labels, textposition="top center", cliponaxis=False, hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        # after a click plotly.js fades every other node to 0.2 and its label with it: the tree must
        # stay readable around the node that was picked
        unselected=dict(marker=dict(opacity=UNSELECTED_OPACITY), textfont=dict(color=UNSELECTED_TEXT)),
        marker=dict(color=colour.tolist(), cmin=lo, cmax=hi,
                    colorscale=colorscale_value(DEFAULT_COLORSCALE), showscale=True,
                    colorbar=bar,
                    size=[18 if on else 12 for on in highlight],
                    symbol=["diamond" if h.finished else "circle" for _, _, h in nodes],
                    line=dict(color=[PATH if on else "white" for on in highlight],
                              width=[3 if on else 1 for on in highlight])))
    rows = max(len(step) for step in steps)
    # hypotheses counted from 1, as steps are
    x_labels, y_labels = [f"step {t + 1}" for t in range(len(steps))], [str(i + 1) for i in range(rows)]
    layout = dict(
        title=figure_title(title), plot_bgcolor="white", clickmode="event+select", hovermode="closest",
        # drawn in one pass: the labels' and the colour bar's room is there from the start
        margin=matrix_margins(y_labels, x_labels, y_size=11, x_size=11, top=60 if title else 30,
                              colorbar={**bar, "ticktext": [f"{lo:.2f}", f"{hi:.2f}"]}),
        xaxis=token_axis(x_labels, "Decoding step", values=list(range(1, len(steps) + 1))),
        yaxis=token_axis(y_labels, "Hypothesis", reverse=True),
        height=height_value(height) if height is not None
        else auto_height(rows, per_row=50, base=160, low=300, high=900))
    return build_figure([edges, path, node], layout)


def _integral(v: Any) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and float(v).is_integer() and v >= 0)


def beam_selection(points: Any) -> tuple[int, int] | None:
    """(step, index) of the first clicked node in a Plotly selection payload, else None.

    Takes the point list, or a dict with it under "points" / "selection" → "points"
    (as `st.plotly_chart(on_select="rerun")` returns). Only 2-element customdata
    counts, so cells of the other figures (4+ fields) are never taken for nodes.
    """
    if isinstance(points, Mapping):
        inner = points.get("selection", points)
        points = inner.get("points", []) if isinstance(inner, Mapping) else []
    for point in points or []:
        cd = point_customdata(point) if isinstance(point, Mapping) else None
        if cd is not None and len(cd) == 2 and all(map(_integral, cd)):
            return int(cd[0]), int(cd[1])
    return None


def beam_table(history: Sequence, final=None) -> pd.DataFrame:
    """One row per hypothesis, raw (unescaped) pieces: st.dataframe shows text, not HTML."""
    steps = check_history(history)
    on_path = set(_path(steps, final)) if final is not None else set()
    rows = [dict(step=t + 1, rank=i + 1, piece=h.pieces[-1], prefix=" ".join(h.pieces),
                 score=h.score, finished=h.finished, on_final_path=(t, i) in on_path)
            for t, step in enumerate(steps) for i, h in enumerate(step)]
    return pd.DataFrame(rows, columns=["step", "rank", "piece", "prefix", "score", "finished",
                                       "on_final_path"])
