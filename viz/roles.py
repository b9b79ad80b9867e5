"""Head roles and word alignment as pictures (issue 34, item 2): for each attention kind a layers x
heads map whose cells name each head's role and score, and the word alignment of one sentence
(source words above, output words below, one line per link).

Pure: numpy and plotly only. The scores are those of a model's head_roles.json
(`python -m transformer heads`, docs/head_roles.md): per head of each kind `role` ("none",
"positional -1", "rare word", "sink", ...), `positional` (share of rows peaking at offset -1, 0, +1),
`rare_word`, `sink`, and for cross-attention `aer` per rule and half. The links are word links
(source word i, output word j), 0-based, as Pharaoh files write them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import DEFAULT_COLORSCALE, MAIN_WIDTH, as_array, figure_title, text_width, title_top
from ._figure import build_figure, plain
from ._labels import escape_label

KIND_TITLES = {"encoder_self": "Encoder self-attention", "decoder_self": "Decoder self-attention",
               "cross": "Cross-attention"}
OFFSET_NAMES = {"-1": "prev", "0": "self", "+1": "next"}       # positional offsets as short words
ROW_PX = 34                  # px per layer row of a role map: one line of cell text
SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
LINK, HIT, MISS, MISSED = "#3b528b", "#1a7f37", "#d95f02", "#9a9a9a"   # line colours (CVD-safe pairs)


def head_scores(entry: dict, kind: str, rule: str = "mutual") -> tuple[str, float, str]:
    """One head_roles.json entry -> (cell label, colour value in [0, 1], hover line).

    A head with a role is labelled with it and its score ("positional -1 94%"). A head whose role is
    "none" (every head of the shipped models) is labelled with its strongest score: for self-attention
    the largest of prev / self / next / rare / sink ("prev 38%"); for cross-attention its held-out AER
    under `rule` ("AER 36"), coloured 1 - AER (brighter aligns better)."""
    shares = {OFFSET_NAMES.get(k, k): float(v) for k, v in (entry.get("positional") or {}).items()}
    shares["rare"] = float(entry.get("rare_word", 0.0))
    shares["sink"] = float(entry.get("sink", 0.0))
    role = str(entry.get("role", "none"))
    hover = " · ".join(f"{name} {value:.0%}" for name, value in shares.items())
    if kind == "cross" and entry.get("aer"):
        by_rule = entry["aer"].get(rule) or next(iter(entry["aer"].values()))
        aer = float(by_rule.get("held_out", by_rule.get("fit", 100.0)))
        hover = f"AER {aer:.1f} ({rule}, held-out half) · " + hover
        if role == "none":
            return f"AER {aer:.0f}", max(0.0, 1.0 - aer / 100.0), hover
    if role != "none":
        score = (shares.get(OFFSET_NAMES.get(role.split()[-1], ""), 0.0) if role.startswith("positional")
                 else shares["rare"] if role == "rare word" else shares["sink"] if role == "sink"
                 else max(shares.values()))
        return f"{role} {score:.0%}", score, f"role: {role} · " + hover
    name = max(shares, key=lambda k: shares[k])
    return f"{name} {shares[name]:.0%}", shares[name], hover


def role_table(entries: Sequence[dict], kind: str, n_layers: int, n_heads: int,
               rule: str = "mutual") -> tuple[np.ndarray, list[list[str]], list[list[str]]]:
    """A kind's head_roles.json entries -> (values (L, H), labels [L][H], hovers [L][H]) by
    head_scores. ValueError when an entry names a head outside (n_layers, n_heads) or one is missing."""
    values = np.full((n_layers, n_heads), np.nan)
    labels = [[""] * n_heads for _ in range(n_layers)]
    hovers = [[""] * n_heads for _ in range(n_layers)]
    for entry in entries:
        layer, head = int(entry["layer"]), int(entry["head"])
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"{kind} head {layer}.{head} is outside {n_layers} layers x {n_heads} heads")
        labels[layer][head], values[layer, head], hovers[layer][head] = head_scores(entry, kind, rule)
    if np.isnan(values).any():
        raise ValueError(f"head_roles has no entry for some {kind} heads of {n_layers} x {n_heads}")
    return values, labels, hovers


def _check_map(values, labels, hovers) -> tuple[np.ndarray, list, list]:
    v = as_array(values, "values", ndim=2).astype(float)
    L, H = v.shape
    labels = [[str(x) for x in row] for row in labels]
    hovers = [[str(x) for x in row] for row in hovers] if hovers is not None else [[""] * H for _ in range(L)]
    for name, table in (("labels", labels), ("hovers", hovers)):
        if len(table) != L or any(len(row) != H for row in table):
            raise ValueError(f"{name} must be layers x heads = {L} x {H} like values")
    return v, labels, hovers


def head_roles_figure(maps: Sequence[tuple[str, object, Sequence, Sequence | None]], title: str = "", *,
                      note: str = "", selected: tuple | None = None, cell_font: int = 12,
                      width: float = MAIN_WIDTH) -> go.Figure:
    """One layers x heads map per kind, stacked (the first kind on top), each head's cell holding
    its label (role_table's) on a colour of its score (0..1, Viridis, no colour bar: the label
    carries the number). `maps`: (kind, values (L, H), labels [L][H], hovers [L][H] or None); the
    kinds may have different layer counts but share the head count. Near-invisible markers carry
    customdata [kind index, layer, head] for clicks (roles_selection reads them); `selected`
    (kind index, layer, head) frames that cell. ValueError when a map's labels disagree with its
    values, or the kinds have different head counts."""
    checked = [(str(kind), *_check_map(v, lab, hov)) for kind, v, lab, hov in maps]
    if not checked:
        raise ValueError("no maps to draw")
    H = checked[0][1].shape[1]
    if any(v.shape[1] != H for _, v, _, _ in checked):
        raise ValueError("every kind's map must have the same number of heads")
    top = title_top(title, note) + 30                            # the first kind's name under the title
    gap = 44                                                      # px between maps: the next map's title
    rows = [v.shape[0] for _, v, _, _ in checked]
    plot = sum(ROW_PX * r for r in rows) + gap * (len(rows) - 1)
    left = round(max(text_width(f"layer {r - 1}", 12) for r in rows) + 20)
    bottom = 50
    height = top + plot + bottom
    traces, layout = [], dict(title=figure_title(title, note), plot_bgcolor="white", height=height,
                              margin=dict(l=left, r=20, t=top, b=bottom), annotations=[], shapes=[])
    y_from = plot
    for n, (kind, v, labels, hovers) in enumerate(checked):
        L = v.shape[0]
        span = ROW_PX * L
        y_to, y_from = y_from, y_from - span
        suffix = "" if n == 0 else str(n + 1)
        domain = [y_from / plot, y_to / plot]
        y_from -= gap
        name = KIND_TITLES.get(kind, kind)
        hover = [[f"{escape_label(name)} · layer {layer} · head {h}<br>{escape_label(hovers[layer][h])}"
                  for h in range(H)] for layer in range(L)]
        traces.append(dict(type="heatmap", z=plain(v.tolist()), zmin=0.0, zmax=1.0, colorscale=DEFAULT_COLORSCALE,
                           showscale=False, text=[[escape_label(x) for x in row] for row in labels],
                           texttemplate="%{text}", textfont=dict(size=cell_font), hovertext=hover,
                           hovertemplate="%{hovertext}<extra></extra>", xgap=2, ygap=2,
                           xaxis=f"x{suffix}", yaxis=f"y{suffix}", name=kind))
        heads, layers = np.meshgrid(np.arange(H), np.arange(L))
        traces.append(dict(type="scatter", x=plain(heads.ravel().tolist()), y=plain(layers.ravel().tolist()),
                           mode="markers", showlegend=False, name=f"{kind} heads", xaxis=f"x{suffix}",
                           yaxis=f"y{suffix}", hovertext=[hover[a][b] for a, b in zip(layers.ravel(), heads.ravel())],
                           hovertemplate="%{hovertext}<br>click to open this head<extra></extra>",
                           customdata=np.column_stack([np.full(L * H, n), layers.ravel(), heads.ravel()]).astype(int),
                           marker=dict(size=22, opacity=0.01, color="white", symbol="square")))
        last = n == len(checked) - 1
        layout[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", domain=[0, 1], range=[-0.5, H - 0.5], showgrid=False,
                                        zeroline=False, tickmode="array", tickvals=list(range(H)),
                                        ticktext=[f"head {h}" if last else str(h) for h in range(H)],
                                        showticklabels=last, tickfont=dict(size=12))
        layout[f"yaxis{suffix}"] = dict(anchor=f"x{suffix}", domain=domain, range=[L - 0.5, -0.5], showgrid=False,
                                        zeroline=False, tickmode="array", tickvals=list(range(L)),
                                        ticktext=[f"layer {layer}" for layer in range(L)], tickfont=dict(size=12))
        layout["annotations"].append(dict(text=f"<b>{escape_label(name)}</b>", xref="paper", yref="paper",
                                          x=0, y=domain[1], xanchor="left", yanchor="bottom", showarrow=False,
                                          font=dict(size=13)))
        if selected is not None and selected[0] == n and 0 <= selected[1] < L and 0 <= selected[2] < H:
            layer, head = int(selected[1]), int(selected[2])
            layout["shapes"].append(dict(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                                         xref=f"x{suffix}", yref=f"y{suffix}", line=dict(color="#e66101", width=3)))
    if width != MAIN_WIDTH:
        layout["meta"] = {"width": width}
    return build_figure(traces, layout)


def roles_selection(points) -> tuple[int, int, int] | None:
    """(kind index, layer, head) of a click on head_roles_figure's markers; None for anything else."""
    for point in points or ():
        cd = point.get("customdata") if hasattr(point, "get") else None
        if hasattr(cd, "keys"):
            cd = [cd[k] for k in sorted(cd.keys(), key=lambda k: int(k))]
        if isinstance(cd, (list, tuple)) and len(cd) == 3:
            try:
                return int(cd[0]), int(cd[1]), int(cd[2])
            except (TypeError, ValueError):
                continue
    return None


def word_positions(n: int) -> list[float]:
    """Where n words sit along the drawing's width, 0..1 (centres of n equal slots)."""
    return [(i + 0.5) / n for i in range(n)] if n else []


def _word_labels(word_list: Sequence[str]) -> list[str]:
    """"man" -> "man₁": the word and its 0-based index (what a Pharaoh link names)."""
    return [escape_label(w) + str(i).translate(SUBSCRIPTS) for i, w in enumerate(word_list)]


def alignment_figure(source_words: Sequence[str], output_words: Sequence[str], links, title: str = "", *,
                     gold_sure=None, gold_possible=None, aer: float | None = None, height: int = 400,
                     width: float = MAIN_WIDTH) -> go.Figure:
    """A word alignment: source words along the top, output words along the bottom (each with its
    0-based index as a subscript), one straight line per link (i, j) = (source word i, output word
    j), its hover naming the pair. With a gold alignment (`gold_sure` / `gold_possible`, sets of
    (i, j); a sure link is also possible) a link in the gold is green, one outside it orange, and
    each sure link the alignment missed is a grey dotted line; `aer` (0..100) goes in the note.
    The lines are one trace each, named "link i-j" (and "missed i-j"), in sorted order.
    ValueError for a link outside the words, or words given as one string."""
    if isinstance(source_words, str) or isinstance(output_words, str):
        raise ValueError("source_words and output_words must be lists of words, not strings")
    src, out = [str(w) for w in source_words], [str(w) for w in output_words]
    links = sorted({(int(i), int(j)) for i, j in links})
    sure = {(int(i), int(j)) for i, j in (gold_sure or ())}
    possible = {(int(i), int(j)) for i, j in (gold_possible or ())} | sure
    for i, j in links + sorted(possible):
        if not (0 <= i < len(src) and 0 <= j < len(out)):
            raise ValueError(f"link {i}-{j} is outside {len(src)} source words x {len(out)} output words")
    xs, xt = word_positions(len(src)), word_positions(len(out))
    gold = gold_sure is not None or gold_possible is not None
    traces = []

    def line(i: int, j: int, name: str, colour: str, dash: str, what: str) -> dict:
        return dict(type="scatter", x=[xs[i], xt[j]], y=[1.0, 0.0], mode="lines", name=name, showlegend=False,
                    line=dict(color=colour, width=3 if dash == "solid" else 2, dash=dash),
                    hovertemplate=(f"{what}: source {i} {escape_label(src[i])} ↔ output {j} "
                                   f"{escape_label(out[j])}<extra></extra>"))
    for i, j in links:
        colour = (HIT if (i, j) in possible else MISS) if gold else LINK
        what = ("link (in the gold)" if (i, j) in possible else "link (not in the gold)") if gold else "link"
        traces.append(line(i, j, f"link {i}-{j}", colour, "solid", what))
    for i, j in sorted(sure - set(links)):
        traces.append(line(i, j, f"missed {i}-{j}", MISSED, "dot", "gold link missed"))
    if not traces:                                           # the axes still need a trace to draw on
        traces.append(dict(type="scatter", x=[], y=[], mode="lines", name="no links", showlegend=False))
    traces[0]["xaxis"] = "x"
    note = f"AER {aer:.1f} against the gold given" if aer is not None else ""
    note = note + (" · " if note else "") + f"{len(links)} links · source words above, output words below"
    top_labels, bottom_labels = _word_labels(src), _word_labels(out)
    top = title_top(title, note) + 30                        # the source words above the plot
    widths = [text_width(label, 12) for label in top_labels]
    room = (width - 40) / max(len(widths), 1)                # px between two neighbouring words
    if widths and max(widths) + 6 > room:
        # too many to stand side by side: plotly tilts them (30 degrees; upright when even that is too
        # tight) and their height grows into the margin, where the title and its note are: move the
        # plot down by that height
        top += int((0.5 if room >= 30 else 1.0) * max(widths)) + 6
    axis = dict(range=[0, 1], showgrid=False, zeroline=False, tickmode="array", tickfont=dict(size=12),
                automargin=True, fixedrange=True)
    layout = dict(
        title=figure_title(title, note), plot_bgcolor="white", height=height, showlegend=False,
        margin=dict(l=20, r=20, t=top, b=40),
        xaxis=dict(axis, tickvals=plain(xt), ticktext=bottom_labels, side="bottom"),
        xaxis2=dict(axis, tickvals=plain(xs), ticktext=top_labels, side="top", overlaying="x"),
        yaxis=dict(range=[-0.02, 1.02], visible=False, fixedrange=True),
    )
    # the top axis is drawn only when a trace uses it: an empty one does
    traces.append(dict(type="scatter", x=[], y=[], xaxis="x2", mode="lines", name="source axis", showlegend=False,
                       hoverinfo="skip"))
    if width != MAIN_WIDTH:
        layout["meta"] = {"width": width}
    return build_figure(traces, layout)


def figure_links(fig: go.Figure) -> list[tuple[int, int]]:
    """The (i, j) of alignment_figure's link lines, in drawing order (tests and exports read them)."""
    out = []
    for trace in fig.data:
        name = str(trace.name or "")
        if name.startswith("link "):
            i, j = name[5:].split("-")
            out.append((int(i), int(j)))
    return out
