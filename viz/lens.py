"""The logit lens as a picture (issue 33): what each decoder sublayer would write at every step,
the one sentence that answers "at which layer does the model know the word?", and the DecoderLens
translations (one per encoder layer) aligned by step like the what-if table.

Pure: numpy, pandas and plotly only. The arrays are those of `translate(..., lens=True)`'s
`out.lens` (transformer/lens.py): T output steps, n_sites = 3 x decoder layers, sites named
"L{i}.self|cross|ffn" in model order.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._base import (COLORBAR_AT_EDGE, DEFAULT_COLORSCALE, MAIN_WIDTH, as_array, as_probabilities, matrix_heatmap,
                    text_width, title_room, title_top, x_label_room)
from ._figure import plain
from ._labels import display_tokens, escape_label, show_piece
from ._cell_text import FITTED_TEXT, fit_cell_texts
from ._ticks import keep_labels

SUBLAYER_NAMES = {"self": "self-attn", "cross": "cross-attn", "ffn": "FFN"}
_SITE = re.compile(r"^L(\d+)\.(self|cross|ffn)$")
ROW_PX = 30                 # px per site row: room for one line of cell text
NOTE = "cell: the lens's top piece there · colour: p(piece finally chosen)"


def site_layers(sites: Sequence[str]) -> list[int]:
    """The decoder layer of each site ("L2.cross" -> 2). ValueError for a name of another form."""
    layers = []
    for site in sites:
        match = _SITE.match(str(site))
        if match is None:
            raise ValueError(f"site {site!r} is not of the form 'L<layer>.self|cross|ffn'")
        layers.append(int(match.group(1)))
    return layers


def site_label(site: str) -> str:
    """"L1.cross" -> "layer 1 · cross-attn" (the stream after that sublayer)."""
    match = _SITE.match(str(site))
    if match is None:
        raise ValueError(f"site {site!r} is not of the form 'L<layer>.self|cross|ffn'")
    return f"layer {match.group(1)} · {SUBLAYER_NAMES[match.group(2)]}"


def _check_lens(chosen_prob, top_pieces, top_probs, output_tokens, sites, chosen_rank=None):
    """(chosen_prob (T, n), top pieces [[[str]]] (T, n, k), top probs (T, n, k), tokens, sites, rank or None)."""
    if isinstance(output_tokens, str) or isinstance(sites, str):
        raise ValueError("output_tokens and sites must be lists, not strings")
    tokens, sites = [str(t) for t in output_tokens], [str(s) for s in sites]
    prob = as_array(chosen_prob, "chosen_prob", ndim=2).astype(float)
    if prob.shape != (len(tokens), len(sites)):
        raise ValueError(f"chosen_prob has shape {prob.shape}; expected (steps, sites) = "
                         f"({len(tokens)}, {len(sites)}) to match the output pieces and sites given")
    if np.any(prob < -1e-6) or np.any(prob > 1 + 1e-6):
        raise ValueError("chosen_prob must hold probabilities within [0, 1]")
    probs = as_array(top_probs, "top_probs", ndim=3).astype(float)
    if probs.shape[:2] != prob.shape or probs.shape[2] < 1:
        raise ValueError(f"top_probs has shape {probs.shape}; expected ({len(tokens)}, {len(sites)}, k >= 1)")
    pieces = [[[str(p) for p in cell] for cell in row] for row in top_pieces]
    if len(pieces) != len(tokens) or any(len(row) != len(sites) for row in pieces) or any(
            len(cell) != probs.shape[2] for row in pieces for cell in row):
        raise ValueError(f"top_pieces must be (steps, sites, k) = {probs.shape} like top_probs")
    rank = None
    if chosen_rank is not None:
        rank = as_array(chosen_rank, "chosen_rank", ndim=2)
        if rank.shape != prob.shape:
            raise ValueError(f"chosen_rank has shape {rank.shape}; expected {prob.shape} like chosen_prob")
    site_layers(sites)
    return prob, pieces, probs, tokens, sites, rank


def logit_lens_figure(chosen_prob, top_pieces, top_probs, output_tokens: Sequence[str], sites: Sequence[str],
                      title: str = "", *, chosen_rank=None, show_space: bool = False, cell_font: int = 11,
                      width: float = MAIN_WIDTH, height: int | None = None, selected: tuple | None = None,
                      first_step: int = 0) -> go.Figure:
    """The logit lens as a sites x steps grid: one column per output step (labelled with the piece
    finally chosen there), one row per decoder sublayer (the last layer at the top, the model's own
    output in its top row). Each cell's text is the lens's top-1 piece at that site and step, whole: in
    two lines, in type smaller than `cell_font` px where it must (viz._cell_text); its colour is chosen_prob, the
    probability the lens gives the piece finally chosen (0..1, Viridis). Hover shows the cell's
    top-k with probabilities, p(chosen) and its rank. A near-invisible marker on each cell carries
    customdata [site index, step] for clicks (plotly heatmaps report no selection; lens_selection
    reads it). `selected` (site, step): that cell is framed. first_step: the arrays are a window of
    the steps starting there (a phone's: hover, clicks and `selected` still count every step).

    chosen_prob (T, n_sites); top_pieces / top_probs (T, n_sites, k), best first; chosen_rank
    (T, n_sites) or None. ValueError when the shapes disagree with each other or with the T output
    pieces and n sites given, or a site is not named "L<layer>.self|cross|ffn"."""
    prob, pieces, probs, tokens, sites, rank = _check_lens(chosen_prob, top_pieces, top_probs, output_tokens,
                                                           sites, chosen_rank)
    T, n = prob.shape
    order = list(range(n))[::-1]                                   # the last site on the top row
    y_labels = [escape_label(site_label(sites[j])) for j in order]
    x_labels = display_tokens(tokens, show_space=show_space)
    z = prob.T[order] if T else np.zeros((n, 0))                   # (n_sites, T)
    # the cells' px, as drawn with tick labels about as large as the cells' text (presenter type)
    label_size = max(12, cell_font + 2)
    margin_guess = max((text_width(label, label_size) for label in y_labels), default=0) + 130
    room = max(8.0, (width - margin_guess) / max(T, 1) - 6)
    height = height or max(300, 150 + ROW_PX * n)
    below = x_label_room(x_labels, label_size, width - margin_guess) + title_room(label_size + 2)
    row_px = (height - title_top(title, NOTE) - below) / max(n, 1)
    texts = [show_piece(pieces[t][j][0], show_space=show_space) for j in order for t in range(T)]
    lines, cell_font = fit_cell_texts(texts, cell_font, room, row_px)
    shown = [["<br>".join(escape_label(line) for line in lines[row * T + t]) for t in range(T)] for row in range(n)]
    hover = np.empty((n, T), dtype=object)
    for row, j in enumerate(order):
        for t in range(T):
            best = "<br>".join(f"{i + 1}. {escape_label(show_piece(p, show_space=show_space))}  {q:.3f}"
                               for i, (p, q) in enumerate(zip(pieces[t][j], probs[t, j].tolist())))
            where = f"rank {int(rank[t, j]) + 1}" if rank is not None else ""    # read from 1: the top piece is rank 1
            hover[row, t] = (f"step {t + first_step + 1} → {x_labels[t]} · {escape_label(site_label(sites[j]))}<br>"
                             f"p({x_labels[t]}) = {prob[t, j]:.3f}{' · ' + where if where else ''}<br>{best}")
    steps, rows = np.meshgrid(np.arange(T), np.arange(n))
    markers = dict(type="scatter", x=plain(steps.ravel().tolist()), y=plain(rows.ravel().tolist()), mode="markers",
                   showlegend=False, name="cells", hovertext=hover.ravel(),   # a click needs hover on
                   hovertemplate="%{hovertext}<extra></extra>",
                   customdata=np.column_stack([[order[r] for r in rows.ravel()], steps.ravel() + first_step]).astype(int),
                   marker=dict(size=max(6, min(24, int(room))), opacity=0.01, color="white", symbol="square"))
    frame = None
    if selected is not None and 0 <= selected[0] < n and 0 <= selected[1] - first_step < T:
        row, step = order.index(selected[0]), selected[1] - first_step
        frame = dict(type="rect", x0=step - 0.5, x1=step + 0.5, y0=row - 0.5, y1=row + 0.5, xref="x", yref="y",
                     line=dict(color="#e66101", width=3))
    fig = matrix_heatmap(
        z, y_labels=y_labels, x_labels=x_labels, y_title="Read after", x_title="Output step (piece chosen)",
        zmin=0.0, zmax=1.0, colorscale=DEFAULT_COLORSCALE, title=title,
        note=NOTE,
        colorbar=dict(title=dict(text="p(chosen)"), **COLORBAR_AT_EDGE), text=shown, texttemplate="%{text}",
        textfont=dict(size=cell_font), hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
        xgap=1, ygap=1, height=height, width=width, meta={FITTED_TEXT: True},
        extra_traces=[markers])
    if frame is not None:
        fig.layout.shapes = [frame]
        keep_labels(fig, xaxis=[step], yaxis=[row])          # thinned labels keep the framed cell's
    return fig


def lens_selection(points) -> tuple[int, int] | None:
    """(site index, step) of a click on logit_lens_figure's cell markers; None for anything else."""
    for point in points or ():
        cd = point.get("customdata") if hasattr(point, "get") else None
        if hasattr(cd, "keys"):
            cd = [cd[k] for k in sorted(cd.keys(), key=lambda k: int(k))]
        if isinstance(cd, (list, tuple)) and len(cd) == 2:
            try:
                return int(cd[0]), int(cd[1])
            except (TypeError, ValueError):
                continue
    return None


def decision_sites(chosen_rank) -> np.ndarray:
    """(T,) int: for each step, the first site from which the piece finally chosen stays the lens's
    top piece (rank 0) at every later site up to the last one; -1 when it is not the top piece at
    the last site (a forced reference, or a beam hypothesis that a greedy reading would not pick)."""
    rank = as_array(chosen_rank, "chosen_rank", ndim=2)
    top = rank == 0                                            # (T, n)
    # stays on top to the end: a reversed running AND
    stays = np.flip(np.logical_and.accumulate(np.flip(top, axis=1), axis=1), axis=1)
    first = np.argmax(stays, axis=1)
    return np.where(stays.any(axis=1), first, -1).astype(int)


def _quote(piece: str, show_space: bool) -> str:
    return "'" + show_piece(piece, show_space=show_space) + "'"


def _names(pieces: list[str], show_space: bool, limit: int) -> str:
    pieces = list(dict.fromkeys(pieces))                       # a piece written twice is named once
    quoted = [_quote(p, show_space) for p in pieces[:limit]]
    more = len(pieces) - limit
    if more > 0:
        quoted.append(f"{more} more")
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def lens_sentence(chosen_rank, output_tokens: Sequence[str], sites: Sequence[str], *, show_space: bool = False,
                  limit: int = 3) -> str:
    """One sentence (plain text) answering "at which layer does the model know the word?".

    A piece is *decided* at the first site from which it stays the lens's top piece (rank 0) at
    every later site up to the last (decision_sites); its decision layer is that site's decoder
    layer. "Most pieces are decided by decoder layer L" names the smallest layer L by which more than
    half of all the output pieces are decided (0-based, as the app's layer pickers count); the
    pieces decided later are named with their layer ("only at the last layer" for the last), and
    those never decided (not the top piece at the last site) are named as such; at most `limit`
    pieces per group, then "N more". ValueError when the shapes disagree."""
    rank = as_array(chosen_rank, "chosen_rank", ndim=2)
    if isinstance(output_tokens, str):
        raise ValueError("output_tokens must be a list of pieces, not a string")
    tokens = [str(t) for t in output_tokens]
    layers = np.array(site_layers(sites), dtype=int)
    if rank.shape != (len(tokens), len(layers)):
        raise ValueError(f"chosen_rank has shape {rank.shape}; expected (steps, sites) = ({len(tokens)}, {len(layers)})")
    T = len(tokens)
    if T == 0:
        return "There are no output pieces to read."
    last = int(layers.max())
    decided = decision_sites(rank)
    layer_of = np.where(decided >= 0, layers[np.clip(decided, 0, None)], last + 1)     # never: past the last
    counts = np.array([(layer_of <= L).sum() for L in range(last + 1)])
    majority = np.flatnonzero(counts * 2 > T)
    never = [tokens[t] for t in range(T) if decided[t] < 0]
    if majority.size == 0:
        known = int(counts[-1])
        return (f"Most pieces are never settled: {T - known} of {T} are not the lens's top piece at the last "
                f"site ({_names(never, show_space, limit)}), as with a forced reference or a beam hypothesis.")
    L = int(majority[0])
    where = "the last layer" if L == last else f"decoder layer {L}"
    everything = int(counts[L]) == T
    head = (f"Every piece is decided by {where}" if everything and T > 1 else
            f"The piece is decided by {where}" if everything else
            f"Most pieces ({int(counts[L])} of {T}) are decided by {where}")
    parts = []
    for later in range(L + 1, last + 1):
        late = [tokens[t] for t in range(T) if layer_of[t] == later]
        if late:
            parts.append(f"{_names(late, show_space, limit)} only at "
                         + ("the last layer" if later == last else f"layer {later}"))
    if never:
        parts.append(f"{_names(never, show_space, limit)} never (not the top piece at the last site)")
    return head + ("; " + "; ".join(parts) if parts else "") + "."


def decoder_lens_frame(rows: Sequence[tuple[str, Sequence[str], Sequence[float]]], *,
                       show_space: bool = False, model_row: int = -1) -> pd.DataFrame:
    """DecoderLens translations aligned by step, as the what-if table lines up the original and a
    branch: one row per (label, pieces, probabilities) — e.g. "encoder layer 0" … — with columns
    "from" (the label), "total log p" (Σ log p over its pieces, not length-normalised, as the what-if
    table's), "differs at" (the steps, from 1, where its piece is not the one of row `model_row`, the
    model's own translation; "" where none) and one column per output step ("1", "2", …; a shorter
    translation leaves its last cells empty). Pieces as text (▁ shown as ␣ with show_space), not
    HTML: st.dataframe draws them literally. A plain frame, no Styler: st.dataframe converts a Styler
    cell by cell on every run (60 ms a run here), a plain frame once per run as an Arrow table.
    ValueError: pieces and probabilities of different lengths, probabilities outside [0, 1], or a
    string of pieces."""
    checked = []
    for label, pieces, probs in rows:
        if isinstance(pieces, str):
            raise ValueError(f"{label}: pieces must be a list, not a string")
        pieces = [str(p) for p in pieces]
        p = as_probabilities(list(probs), f"{label} probabilities")
        if len(pieces) != len(p):
            raise ValueError(f"{label}: {len(pieces)} pieces but {len(p)} probabilities")
        checked.append((str(label), pieces, p))
    n = max((len(pieces) for _, pieces, _ in checked), default=0)
    own = checked[model_row][1] if checked else []
    data = []
    for label, pieces, p in checked:
        with np.errstate(divide="ignore"):
            total = float(np.log(p).sum()) if len(p) else 0.0
        differs = [t + 1 for t in range(max(len(pieces), len(own)))
                   if t >= len(pieces) or t >= len(own) or pieces[t] != own[t]]
        data.append([label, round(total, 2), ", ".join(map(str, differs))]
                    + [show_piece(x, show_space=show_space) for x in pieces] + [""] * (n - len(pieces)))
    columns = ["from", "total log p", "differs at"] + [str(t + 1) for t in range(n)]
    return pd.DataFrame(data, columns=columns)


def lens_grid_height(n_sites: int) -> int:
    """The grid's height for n sites (what logit_lens_figure picks when given none)."""
    return max(300, 150 + ROW_PX * n_sites)


__all__ = ["decision_sites", "decoder_lens_frame", "lens_grid_height", "lens_selection",
           "lens_sentence", "logit_lens_figure", "site_label", "site_layers"]
