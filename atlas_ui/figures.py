"""Figures many sessions share, built once per process (see FigureCache)."""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict


class FigureCache:
    """Figures many sessions share (same run, view and settings), built once per process.

    A figure handed out here is shared: callers draw or export it and never change it
    (presenter mode draws a copy). Least recently used entries go first."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._figures: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, build):
        with self._lock:
            if key in self._figures:
                self._figures.move_to_end(key)
                return self._figures[key]
        figure = build()                 # outside the lock: other figures need not wait
        with self._lock:
            figure = self._figures.setdefault(key, figure)
            self._figures.move_to_end(key)
            while len(self._figures) > self.max_entries:
                self._figures.popitem(last=False)
        return figure

    def __len__(self) -> int:
        return len(self._figures)


@functools.lru_cache(maxsize=None)      # every chart asks: no st.cache hashing per call
def figure_cache(max_entries: int) -> FigureCache:
    """The process's shared figures (FIGURE_CACHE_ENTRIES of them)."""
    return FigureCache(max_entries)
