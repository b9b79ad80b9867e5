"""Figures many sessions share, built once per process (see FigureCache), and sent as the JSON
made once for them (see SharedFigure)."""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import plotly.graph_objects as go
import plotly.io

from viz import figure_parts


class SpecDict(dict):
    """What SharedFigure.to_dict returns: the figure's dict, plus `spec`, its JSON."""

    def __init__(self, spec: str, **parts):
        super().__init__(**parts)
        self.spec = spec


class SharedFigure(go.Figure):
    """A figure many sessions draw, never changed once shared, with its JSON made once.

    st.plotly_chart turns each figure into a dict (a deep copy) and then into JSON
    (`plotly.io.to_json`) on every call: with an audience on one Overview link that was a third of
    each session's time, for the same 0.5 MB every time (issue 21). Here to_dict() hands out the
    figure's own parts (shallow: nobody may change them) and to_json() the JSON made once."""

    _spec: str = ""

    @classmethod
    def adopt(cls, figure: go.Figure) -> "SharedFigure":
        """`figure` itself (no copy), made a SharedFigure, its JSON made now."""
        if type(figure) is go.Figure:
            spec = _to_json(figure, validate=False)     # plotly's own dict (typed arrays) and JSON
            figure.__class__ = cls       # a subclass with no state of its own: the same object
            figure._spec = spec
        return figure

    def to_dict(self) -> SpecDict:
        # the trace dicts are new (to_json pops their "uid"); the values are the figure's own
        return SpecDict(self._spec, **figure_parts(self))


def shared_version(fig: go.Figure, key, make) -> go.Figure:
    """`make(fig)`, made once per shared figure and `key` ("phone": viz.phone_figure; ("slide",
    height): presenter mode's): an audience's phones open one link at once, and a room's followers
    draw the presenter's slide, and each would copy, refit and serialise the same figure again
    (refitting a slide's labels was most of a follower's run). A figure nobody shares gets its own."""
    if not isinstance(fig, SharedFigure):
        return make(fig)
    versions = fig.__dict__.setdefault("_versions", {})
    version = versions.get(key)
    if version is None:              # two sessions may both make it: the same figure either way
        version = versions[key] = SharedFigure.adopt(make(fig))
    return version


_to_json = plotly.io.to_json


@functools.wraps(_to_json)
def to_json(fig, validate=True, pretty=False, remove_uids=True, engine=None):
    """plotly.io.to_json, answering from the JSON made once for a SharedFigure's dict (what
    st.plotly_chart asks for: validate=False, compact, no uids, the default engine)."""
    if not validate and not pretty and remove_uids and engine is None:
        if isinstance(fig, SpecDict):
            return fig.spec
        if isinstance(fig, SharedFigure):
            return fig._spec
    return _to_json(fig, validate=validate, pretty=pretty, remove_uids=remove_uids, engine=engine)


plotly.io.to_json = to_json      # same answers for every figure; only faster for shared ones


class FigureCache:
    """Figures many sessions share (same run, view and settings), built once per process.

    A figure handed out here is shared: callers draw or export it and never change it
    (presenter mode draws a copy). Sessions that ask for a figure being built wait for that build
    (an audience opening one link arrives at once: one build, not forty). Least recently used
    entries go first."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._figures: OrderedDict = OrderedDict()
        self._building: dict = {}        # key -> the lock its builder holds
        self._lock = threading.Lock()

    def get(self, key: tuple, build):
        while True:
            with self._lock:
                if key in self._figures:
                    self._figures.move_to_end(key)
                    return self._figures[key]
                building = self._building.get(key)
                if building is None:
                    building = self._building[key] = threading.Lock()
                    building.acquire()
                    break
            with building:               # another session builds it: wait, then look again
                pass
        try:
            figure = SharedFigure.adopt(build())       # outside the cache's lock: other figures need not wait
            with self._lock:
                self._figures[key] = figure
                while len(self._figures) > self.max_entries:
                    self._figures.popitem(last=False)
        finally:
            with self._lock:
                del self._building[key]
            building.release()
        return figure

    def __len__(self) -> int:
        return len(self._figures)


@functools.lru_cache(maxsize=None)      # every chart asks: no st.cache hashing per call
def figure_cache(max_entries: int) -> FigureCache:
    """The process's shared figures (FIGURE_CACHE_ENTRIES of them)."""
    return FigureCache(max_entries)
