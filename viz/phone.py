"""A figure refit for a phone's ~360 px column (issue 31: the audience opens a speaker's link there).

Every figure is built for a 1280 px window (MAIN_WIDTH); a phone's browser draws it a third as wide,
so labels sat on labels, titles ran off the right edge and a colour bar took a quarter of the
width. phone_figure() is to a phone what presenter_figure() is to a projector: a copy with the
colour bars left out (a tap on a cell still gives its value), the title wrapped, numbers and
words written in cells or beside markers dropped where they would overlap, and every k-th tick
label kept, in type no smaller than PHONE_MIN_TICK.
"""
from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go

from ._base import matrix_margins, text_width, title_room
from ._figure import copy_figure
from .export import colorbars, drop_crowded_text, fit_ticks, matrix_like, plot_size, right_label_room, unit_px

PHONE_WIDTH = 358              # a 390 px phone's chart: the window less the page's 16 px sides
PHONE_TICK, PHONE_MIN_TICK = 11, 9
PHONE_TITLE = 14               # px of a title's first line
TITLE_LINE = 1.35              # a title line's height, in font sizes
PHONE_GROWTH = 1.25            # how much taller a figure may grow for its rows' labels
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


def wrap_title(text: str, width: float, size: float) -> tuple[str, int]:
    """`text` (plotly's HTML subset) with each line broken at spaces to fit `width` px at `size`;
    also how many lines were added. A line's tags (<sup> for a note) stay with it."""
    out, added = [], 0
    for line in _BREAK.split(text):
        plain = _TAG.sub("", line)
        line_size = size * (0.7 if "<sup>" in line else 1.0)
        if text_width(plain, line_size) <= width:
            out.append(line)
            continue
        opening = re.match(r"^(<[^>]+>)*", line).group(0)
        closing = re.search(r"(</[^>]+>)*$", line).group(0)
        rows, row = [], ""
        for word in plain.split(" "):
            candidate = f"{row} {word}" if row else word
            if row and text_width(candidate, line_size) > width:
                rows.append(row)
                row = word
            else:
                row = candidate
        rows.append(row)
        out.extend(f"{opening}{r}{closing}" for r in rows)
        added += len(rows) - 1
    return "<br>".join(out), added


def _wrap_figure_title(fig: go.Figure, width: float) -> None:
    """The title wrapped to the phone's width, hung from the figure's top edge (plotly.js centres
    a title's first line in the top margin, so added lines ran into the plot), the margin grown for it."""
    title = fig.layout.title
    if title is None or not title.text:
        return
    text, added = wrap_title(title.text, width - 16, PHONE_TITLE)
    lines = len(_BREAK.split(text))
    fig.update_layout(title=dict(text=text, font=dict(size=PHONE_TITLE), yref="container", y=1.0,
                                 yanchor="top", pad=dict(t=14)))
    if fig.layout.height is not None and fig.layout.margin.t is not None:
        extra = round(added * TITLE_LINE * PHONE_TITLE)
        # the title's pad and lines, with room to spare: plotly.js draws its lines 12-20 px above this
        needed = round(14 + lines * TITLE_LINE * PHONE_TITLE + 6)
        # a margin that held only the title shrinks to it (the Overview kept a 40 px band); one that
        # holds more above the plot (a legend, the names of a grid's top maps) keeps that room
        top = max(fig.layout.margin.t + extra, needed) if _top_margin_holds_more(fig) else needed
        fig.update_layout(height=fig.layout.height + top - fig.layout.margin.t, margin=dict(t=top))


def _top_margin_holds_more(fig: go.Figure) -> bool:
    """Whether anything but the title is drawn above the plot: a note or legend placed over it, or
    an axis labelled along the top."""
    layout = fig.layout
    for note in layout.annotations or ():       # a subplot's title sits at y = 1, anchored at its bottom
        if note.y is None:
            continue
        if note.yref == "paper" and note.y >= 1 and not (note.y == 1 and note.yanchor == "top"):
            return True
        if note.yref not in (None, "paper") and note.yanchor == "bottom" and _at_top(layout, note.yref, note.y):
            return True                         # the names over a grid's top row of maps (Layer grid)
    if layout.showlegend is not False and layout.legend.y is not None and layout.legend.y > 1 and \
            any(trace.showlegend is not False for trace in fig.data):
        return True
    return any(name.startswith("xaxis") and layout[name] is not None and layout[name].side == "top"
               and layout[name].showticklabels is not False and layout[name].visible is not False
               and not (layout[name].tickmode == "array" and not len(layout[name].tickvals or ()))
               for name in layout)


def _at_top(layout, yref: str, y: float) -> bool:
    """Whether `y` on the axis `yref` names is the plot's top edge (or the axis has no fixed range)."""
    axis = layout["yaxis" + yref.split(" ")[0][1:]]
    if axis is None or axis.range is None:
        return True
    low, high = sorted(axis.range)
    top = low if axis.range[0] > axis.range[1] or axis.autorange == "reversed" else high
    return abs(y - top) <= 1e-6 * max(1.0, high - low)


def _fit_annotations(fig: go.Figure) -> None:
    """Titles written over subplots (a grid of maps, each named): small type, wrapped to the width
    of the subplot they name, instead of running into the next one's."""
    plot_width = plot_size(fig)[0]
    domains = sorted({tuple(fig.layout[name].domain or (0, 1)) for name in fig.layout
                      if name.startswith("xaxis") and fig.layout[name] is not None})
    for note in fig.layout.annotations or ():
        if not note.text or note.xref != "paper" or note.x is None:
            continue
        inside = [d for d in domains if d[0] - 0.05 <= note.x <= d[1]]     # a name may start left of its map
        if not inside or len(domains) < 2:
            continue
        start, end = min(inside, key=lambda d: d[1] - d[0])
        room = 0.85 * (end - (note.x if note.xanchor == "left" else start)) * plot_width   # estimates run wide
        size = min(PHONE_TICK, note.font.size if note.font is not None and note.font.size else 12)
        text, _ = wrap_title(note.text, max(room, 40), size)
        note.update(text=text, font=dict(size=size))


def _fit_axis_titles(fig: go.Figure) -> None:
    """An x axis title wider than its map (two maps side by side) wrapped to it, the bottom margin
    grown for the added line; titles kept clear of their tick labels (plotly.js draws a title without
    a standoff a fixed distance from the axis, over labels that are wider or stand upright)."""
    plot_width = plot_size(fig)[0]
    added = 0
    for name in list(fig.layout):
        axis = fig.layout[name] if name[1:5] == "axis" else None
        if axis is None or axis.title is None or not axis.title.text:
            continue
        if axis.title.standoff is None and axis.automargin:      # below upright x labels too ("Head 3" on "Key")
            axis.title.standoff = 6
        if name.startswith("y"):
            continue
        size = axis.title.font.size if axis.title.font is not None and axis.title.font.size else 14
        domain = axis.domain or (0, 1)
        text, more = wrap_title(axis.title.text, 0.9 * plot_width * (domain[1] - domain[0]), size)
        if more:
            axis.title.text = text
            added = max(added, round(more * TITLE_LINE * size))
    if added and fig.layout.margin.b is not None:
        fig.update_layout(height=fig.layout.height + added, margin=dict(b=fig.layout.margin.b + added))


def _pin_heatmap_ranges(fig: go.Figure) -> None:
    """Axes that a map fills end at its outer cells' edges. Left to autorange they grow by half of
    each clickable marker's px on every side (a map's cell centres carry them): a few units more on
    a phone's 150 px, so ticks stood closer than fit_ticks had counted (the Logit lens)."""
    for trace in fig.data:
        if trace.type != "heatmap" or trace.z is None or not len(trace.z):
            continue
        for letter, count, values in (("x", len(trace.z[0]), trace.x), ("y", len(trace.z), trace.y)):
            name = letter + "axis" + (getattr(trace, letter + "axis") or letter)[1:]
            axis = fig.layout[name] if name in fig.layout else None
            if axis is None or axis.range is not None or axis.type not in (None, "linear", "-"):
                continue
            if values is not None and len(values) and all(isinstance(v, (int, float, np.integer, np.floating)) for v in values):
                low, high = float(min(values)) - 0.5, float(max(values)) + 0.5
            elif values is None:
                low, high = -0.5, count - 0.5
            else:
                continue                                   # category labels: plotly's own extent
            axis.update(range=[high, low] if axis.autorange == "reversed" else [low, high], autorange=False)


def _square_cells_height(fig: go.Figure) -> None:
    """A map whose cells stay square (scaleanchor) is as tall as a phone's width makes its cells:
    the height a 1120 px figure had left blank bands above and below a grid of small maps."""
    if fig.layout.yaxis.scaleanchor != "x" and fig.layout.xaxis.scaleanchor != "y":
        return
    size = plot_size(fig)
    across, down = unit_px(fig, "xaxis", fig.layout.xaxis, size), unit_px(fig, "yaxis", fig.layout.yaxis, size)
    if down > across:
        fig.update_layout(height=round(fig.layout.height - size[1] * (1 - across / down)) + 1)


def _refit_matrix(fig: go.Figure, width: float) -> None:
    """A labelled matrix's margins for its (phone-sized) tick labels and no colour bar."""
    layout = fig.layout
    if not matrix_like(fig) or "xaxis2" in layout:        # one map: maps side by side keep theirs
        return

    def size(axis):
        return axis.tickfont.size if axis.tickfont is not None and axis.tickfont.size else PHONE_TICK
    fitted = matrix_margins(layout.yaxis.ticktext, layout.xaxis.ticktext, y_size=size(layout.yaxis),
                            x_size=size(layout.xaxis), colorbar=None, top=layout.margin.t or 0, width=width,
                            x_angle=layout.xaxis.tickangle)
    fig.update_layout(margin=dict(l=fitted["l"], r=fitted["r"], b=fitted["b"]))


def _room_for_upright_labels(fig: go.Figure) -> None:
    """A bottom margin that holds x labels fit_ticks set upright, where plotly.js may not grow it
    (automargin off: the Overview's grid keeps its own margins; "Head 3" ran into "Key")."""
    axis = fig.layout.xaxis
    if axis.automargin or axis.tickangle != 90 or axis.ticktext is None or fig.layout.margin.b is None:
        return
    size = axis.tickfont.size if axis.tickfont is not None and axis.tickfont.size else PHONE_TICK
    title = axis.title is not None and bool(axis.title.text)
    needed = round(max(text_width(str(t), size) for t in axis.ticktext) + (title_room() if title else 10))
    if needed > fig.layout.margin.b:
        fig.update_layout(height=fig.layout.height + needed - fig.layout.margin.b, margin=dict(b=needed))


def phone_figure(fig: go.Figure, width: float = PHONE_WIDTH) -> go.Figure:
    """A copy of `fig` for a phone's `width` px: see the module's docstring."""
    small = copy_figure(fig)
    meta = small.layout.meta if isinstance(small.layout.meta, dict) else {}
    small.update_layout(meta={**meta, "width": width})
    had_bar = False
    for trace, _ in list(colorbars(small)):
        had_bar = True
        if trace.type == "heatmap":
            trace.update(showscale=False)
        else:
            trace.update(marker=dict(showscale=False))
    _wrap_figure_title(small, width)
    if small.layout.margin.l is None:
        return small
    if had_bar:                      # the bar's room goes to the plot; a right-hand map's rows keep theirs
        small.update_layout(margin=dict(r=10 + right_label_room(small, PHONE_TICK)))
    _refit_matrix(small, width)
    if small.layout.height is not None and small.layout.margin.t is not None:
        _pin_heatmap_ranges(small)
        _square_cells_height(small)
        drop_crowded_text(small, 12)
        _fit_annotations(small)
        _fit_axis_titles(small)
        # rows too close grow the figure a little (a phone scrolls; square cells would not follow),
        # then every k-th label stays
        square = small.layout.yaxis.scaleanchor == "x" or small.layout.xaxis.scaleanchor == "y"
        tallest = small.layout.height if square else round(small.layout.height * PHONE_GROWTH)
        for letter in ("x", "y"):
            fit_ticks(small, letter, PHONE_TICK, tallest, upright=letter == "x",
                      smallest=PHONE_MIN_TICK)
        _refit_matrix(small, width)
        _room_for_upright_labels(small)
    return small

