"""Two translations of one sentence side by side: the model's own and a what-if branch that took
another piece at some step and decoded on (issue 23). Pieces line up by step, the step where the
two part is marked, each cell is shaded by the piece's probability (white: sure, orange: unsure,
as the translation strip), and each row names its total log-probability.

Also the small tree of what-ifs: which branch grew out of which, as text rows (`branch_tree`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import as_probabilities, figure_title
from ._figure import build_figure
from ._labels import display_tokens, escape_html, show_piece
from .panels import probability_colour

PART = "#7b3294"                                                   # the parting step's frame


def parting_step(a: Sequence[str], b: Sequence[str]) -> int:
    """The first step where the two piece lists differ (min length when one extends the other)."""
    for t, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return t
    return min(len(a), len(b))


# the row's number is not the beam tree's score, which is divided by a length penalty (issue 31)
TOTAL_LOG_P_HELP = "Σ log p over the whole translation, not length-normalised (the beam tree's score is)"


def total_log_prob(probs: Sequence[float]) -> float:
    """Σ log p over the pieces (the whole output's log-probability; -inf if a piece had p = 0)."""
    p = np.asarray(probs, dtype=float)
    with np.errstate(divide="ignore"):
        return float(np.log(p).sum())


def _checked_rows(original, original_probs, branch, branch_probs, labels) -> list[tuple]:
    """[(name, pieces, probabilities)] for the two runs. ValueError: pieces and probabilities of
    different lengths, probabilities outside [0, 1], an empty translation, or a string of pieces."""
    rows = []
    for name, tokens, probs in ((labels[0], original, original_probs), (labels[1], branch, branch_probs)):
        if isinstance(tokens, str):
            raise ValueError(f"{name}: tokens must be a list of pieces, not a string")
        tokens = [str(t) for t in tokens]
        p = as_probabilities(list(probs), f"{name} probabilities")
        if len(tokens) != len(p):
            raise ValueError(f"{name}: {len(tokens)} pieces but {len(p)} probabilities")
        if not tokens:
            raise ValueError(f"{name}: the translation has no pieces")
        rows.append((name, tokens, p))
    return rows


def branch_compare_html(original: Sequence[str], original_probs: Sequence[float], branch: Sequence[str],
                        branch_probs: Sequence[float], *, forced: int | None = None,
                        title: str = "Original and branch", labels: tuple = ("Original", "Branch"),
                        show_space: bool = False) -> str:
    """The side-by-side as an HTML table (for st.markdown): rows original and branch, one column per output step, each cell the piece on the strip's colours
    (white: sure, orange: unsure; hover for p), the parting step framed, the branch's forced pieces
    underlined, each row's total log-probability by its name. A table, not a chart: a click on a
    candidate drew a new plotly chart in the browser, a third of the click's time
    (benchmarks/bench_whatif.py). Every piece and label is escaped (HTML and Markdown); one line,
    so Markdown keeps it one raw HTML block. ValueError: pieces and probabilities of different
    lengths, probabilities outside [0, 1], an empty translation, or a string of pieces."""
    rows = _checked_rows(original, original_probs, branch, branch_probs, labels)
    n = max(len(rows[0][1]), len(rows[1][1]))
    part = parting_step(rows[0][1], rows[1][1])
    frame = f"box-shadow:0 0 0 2px {PART};"
    header = "".join(f'<th style="font-weight:normal;color:#666;font-size:0.8em;text-align:center;padding:0 2px;border:none;'
                     f'{"color:" + PART + ";font-weight:600;" if t == part else ""}">{t + 1}</th>' for t in range(n))
    body = []
    for r, (name, tokens, p) in enumerate(rows):
        cells = []
        for t in range(n):
            if t >= len(tokens):
                cells.append('<td class="aa-piece" style="border:none;padding:0"></td>')
                continue
            piece = escape_html(show_piece(tokens[t], show_space=show_space))
            background, colour = probability_colour(float(p[t]))
            was_forced = r == 1 and forced is not None and t < forced
            hover = f"{escape_html(name)} · step {t + 1}{' · forced' if was_forced else ''} · p = {p[t]:.3f}"
            cells.append(f'<td class="aa-piece" title="{hover}" style="background:{background};color:{colour};'
                         f'padding:1px 4px;border:none;border-radius:3px;white-space:pre;text-align:center;'
                         f'{"text-decoration:underline dotted;" if was_forced else ""}'
                         f'{frame if t == part else ""}">{piece}</td>')
        label = (f'<th class="aa-row" style="text-align:left;font-weight:normal;white-space:nowrap;padding:0 8px 0 0;'
                 f'border:none;line-height:1.15">'
                 f'{escape_html(name)}<br><span style="font-size:0.8em;color:#666" title="{TOTAL_LOG_P_HELP}">'
                 f'total log p = {total_log_prob(p):.2f}</span></th>')
        body.append(f"<tr>{label}{''.join(cells)}</tr>")
    note = f"they part at step {part + 1}" if part < n else "the same pieces"
    sure, unsure = probability_colour(1.0)[0], probability_colour(0.0)[0]
    legend = (f'<div style="font-size:0.75em;color:#666;margin-top:2px"><span style="background:{sure};'
              f'border:1px solid #ccc;padding:0 6px">sure</span> → <span style="background:{unsure};color:#fff;'
              f'padding:0 6px">unsure</span> (p of each piece; hover for the value) · '
              f'<span style="{frame}padding:0 4px">framed</span>: where they part · '
              f'<span style="text-decoration:underline dotted">underlined</span>: forced</div>')
    return (f'<div class="aa-branch" style="overflow-x:auto;margin:4px 0 6px 0">'
            f'<div class="aa-branch-title" style="font-size:1.05em;margin-bottom:2px">{escape_html(title)}'
            f' <span style="color:#666;font-size:0.9em">· {note}</span></div>'
            f'<table style="border-collapse:separate;border-spacing:2px 3px;border:none;width:auto;font-size:0.9em;'
            f'margin:0">'
            f'<tr><th style="border:none"></th>{header}</tr>{"".join(body)}</table>{legend}</div>')


def branch_tree(prefixes: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
    """(depth, parent index or -1) per prefix, in the order given: a branch's parent is the longest
    other prefix that starts it (-1: grown from the original). Pure bookkeeping for a compact tree."""
    prefixes = [tuple(p) for p in prefixes]
    out = []
    for i, p in enumerate(prefixes):
        parents = [j for j, q in enumerate(prefixes) if j != i and len(q) < len(p) and p[: len(q)] == q]
        parent = max(parents, key=lambda j: len(prefixes[j])) if parents else -1
        out.append(parent)
    depth = []
    for i in range(len(prefixes)):
        d, j = 0, out[i]
        while j != -1:
            d, j = d + 1, out[j]
        depth.append(d)
    return list(zip(depth, out))


def contrast_figure(source_scores, prefix_scores, source_tokens: Sequence[str], prefix_tokens: Sequence[str],
                    chosen: str, alternative: str, *, show_space: bool = False,
                    height: int | None = None) -> go.Figure:
    """Contrastive saliency of one step as two one-row maps (source | fed prefix) on one diverging
    scale centred on 0: red favours `chosen` over `alternative`, blue the alternative. The scale
    is symmetric (±max |score|), so a colour means the same on both sides. ValueError: scores
    and pieces of different lengths, or non-finite scores."""
    parts = []
    for name, scores, tokens in (("source", source_scores, source_tokens), ("prefix", prefix_scores, prefix_tokens)):
        if isinstance(tokens, str):
            raise ValueError(f"{name}_tokens must be a list of pieces, not a string")
        s = np.asarray(scores, dtype=float)
        if s.ndim != 1 or len(s) != len(tokens):
            raise ValueError(f"{name}_scores has shape {s.shape}; expected ({len(tokens)},) to match its pieces")
        if not np.all(np.isfinite(s)):
            raise ValueError(f"{name}_scores contains NaN or infinite values")
        parts.append((name, s, display_tokens([str(t) for t in tokens], show_space=show_space)))
    top = max(float(np.abs(np.concatenate([p[1] for p in parts])).max(initial=0.0)), 1e-12)
    favour = display_tokens([chosen, alternative], show_space=show_space)
    n_source, n_prefix = max(len(parts[0][1]), 1), max(len(parts[1][1]), 1)
    split = min(0.8, max(0.3, n_source / (n_source + n_prefix)))
    traces, layout = [], {}
    for k, (name, s, labels) in enumerate(parts):
        axis = "" if k == 0 else "2"
        traces.append(dict(
            type="heatmap", z=[s.tolist()], x=list(range(len(s))), y=[0], zmin=-top, zmax=top,
            colorscale="RdBu_r", xaxis=f"x{axis}", yaxis="y", showscale=k == 1, name=name,
            customdata=[labels], xgap=1,
            hovertemplate=f"{name} %{{customdata}}<br>score %{{z:.4f}}<extra></extra>",
            colorbar=dict(title=dict(text="favours"), thickness=12, tickvals=[-top, 0, top],
                          ticktext=[f"“{favour[1]}”", "0", f"“{favour[0]}”"])))
        layout[f"xaxis{axis}"] = dict(
            tickmode="array", tickvals=list(range(len(s))), ticktext=labels, showgrid=False, zeroline=False,
            automargin=True, title=dict(text="Source piece" if k == 0 else "Prefix piece (fed)"),
            domain=[0.0, split - 0.03] if k == 0 else [split + 0.03, 1.0], **({"anchor": "y"} if k else {}))
    title = f"Why “{favour[0]}” rather than “{favour[1]}”: contrastive gradient × input"
    return build_figure(traces, dict(
        title=figure_title(title, "red: favours the chosen piece, blue: the alternative"), plot_bgcolor="white",
        yaxis=dict(showticklabels=False, showgrid=False, zeroline=False), height=height or 210,
        margin=dict(l=10, r=10, t=60, b=10), **layout))
