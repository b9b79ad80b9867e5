"""Building a go.Figure fast: plain dicts in, one unvalidated construction, cheap copies.

Plotly validates every property it is given (and again on each update_layout), and
deep-copies a figure's properties when it builds the figure and again in to_dict(),
which st.plotly_chart calls. For the figures here that costs 10-100x the numpy work,
so builders assemble each trace and the layout as plain dicts, with every value in
the form a validator would store it (colour scales resolved, Python scalars in lists),
and construct once without validation. tests/test_viz.py checks every builder against
a validated rebuild of its own figure.
"""
from __future__ import annotations

import copy
import marshal
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.basedatatypes import BasePlotlyType
from plotly.validator_cache import ValidatorCache


def plain(values) -> list:
    """A list with numpy scalars turned into Python ones, as Plotly's validators store it."""
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def colorscale_value(colorscale) -> list:
    """The colour scale as Plotly stores it: a name resolved to [[position, colour], ...].

    Raises ValueError for an unknown name, as go.Heatmap(colorscale=...) would.
    """
    return ValidatorCache.get_validator("heatmap", "colorscale").validate_coerce(colorscale)


def height_value(height: int) -> int:
    """A layout height, checked as Plotly would (a number >= 10), else ValueError."""
    return ValidatorCache.get_validator("layout", "height").validate_coerce(height)


def copy_lists(values: list) -> list:
    """Copy nested lists, sharing the (immutable) strings and numbers at the leaves."""
    if values and isinstance(values[0], list):
        return [copy_lists(v) for v in values]
    return list(values)


class Cells(list):
    """Nested lists of per-cell hover strings (a list, so orjson serialises it directly).

    Plotly deep-copies trace properties when it builds a figure and again in to_dict();
    copy.deepcopy pays a Python call per string. Strings are immutable, so copying the
    lists alone gives an equal, independent copy at a fraction of the cost.
    """

    def __deepcopy__(self, memo):
        return Cells(copy_lists(self))


class TemplateJSON(dict):
    """The default template's properties (plain JSON values) with a cheap deep copy.

    go.Figure copies the template into every figure, and to_dict() copies it again;
    a marshal round trip gives the same independent copy several times faster.
    """

    def __deepcopy__(self, memo):
        try:
            return TemplateJSON(marshal.loads(marshal.dumps(dict(self))))
        except ValueError:                  # a value marshal cannot take (e.g. an array)
            return TemplateJSON(copy.deepcopy(dict(self), memo))


def default_template() -> TemplateJSON | None:
    """pio.templates.default as go.Figure would put it into the layout, read when called."""
    default = pio.templates.default
    if default is None:
        return None
    template = default if isinstance(default, BasePlotlyType) else pio.templates[default]
    return TemplateJSON(template._props)    # go.Figure deep-copies it (cheaply) on construction


def figure_parts(fig: go.Figure) -> dict:
    """The figure's own data, layout and frames as a dict, each trace's dict a new one (shallow: the
    values are the figure's), for a constructor to copy from without touching the figure."""
    frames = [frame._props for frame in fig._frame_objs]
    return dict(data=[dict(trace) for trace in fig._data], layout=fig._layout, **({"frames": frames} if frames else {}))


def copy_figure(fig: go.Figure) -> go.Figure:
    """A copy of `fig` that leaves `fig` untouched, so many sessions may copy one shared figure at once.

    go.Figure(fig) reads each trace through the trace's own property dict, popping its "type" and
    putting it back (plotly 7.1, BaseDataValidator.validate_coerce): a second thread copying the
    same figure meanwhile reads a heatmap with no type, builds a scatter of it and fails
    ("Invalid property ... Scatter: 'colorbar'"). From figure_parts the figure is only read; unlike
    to_dict(), no deep copy and no arrays turned into base64."""
    return go.Figure(figure_parts(fig))


def build_figure(data: Sequence[dict], layout: dict) -> go.Figure:
    """One go.Figure from plain trace and layout dicts, constructed once without validation.

    Object arrays (hover strings) become Cells: plotly.io hands figures to orjson, which
    cannot take object arrays, and the fallback then walks every value in Python.
    Validation is switched back on afterwards, so the caller's own edits are checked.
    """
    data = [{k: Cells(v.tolist()) if isinstance(v, np.ndarray) and v.dtype == object else v
             for k, v in trace.items()} for trace in data]
    if "template" not in layout and (template := default_template()) is not None:
        layout = {**layout, "template": template}
    fig = go.Figure(dict(data=data, layout=layout), _validate=False)
    fig._validate = fig.layout._validate = True
    for trace in fig.data:
        trace._validate = True
    return fig
