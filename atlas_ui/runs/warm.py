"""What this process already holds (loaded models, recent runs) and the one way a run is cached
(cached_run): under its RunKey, once per process, shared by every session.

A run that needs no work should show no progress widgets: `st.status` sleeps 50 ms on every call
and `st.spinner` starts a timer thread, which with a whole audience on one share link made up
about a third of each session's cost (issue 14). The page asks here first. Entries are weak, so
a model or result the caches have dropped is gone from here too."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import weakref
from dataclasses import dataclass
from typing import Any

import streamlit as st


@functools.lru_cache(maxsize=1)
def held() -> weakref.WeakValueDictionary:
    """key -> object, for this process (functools, not st.cache_resource: no hashing per call)."""
    return weakref.WeakValueDictionary()


def hold(key, value):
    held()[key] = value
    return value


def holds(key) -> bool:
    return held().get(key) is not None


TRANSLATION = "translation"      # RunKey.kind of a plain translate() call


@dataclass(frozen=True)
class RunKey:
    """Names one cached run over a sentence and every figure drawn from it. The page makes its run's
    key once (page/translation.page_run); a related run's key is `but(...)` of it, never rebuilt from
    arguments. `kind` says which cached run it names (TRANSLATION, or the kind an analysis module
    gives its run: "branch", "lens", "alignment", ...; see cached_run); `target` is what that run is
    given beyond the text: for a translation None, a reference text, or a tuple of pieces forced; for
    the others as their module says (a branch's forced prefix, the pieces a lens reads, ...). The
    runs read `digest`: what this process holds the run under, and its figures' cache key."""
    model: Any
    device: str
    text: str
    beam_size: int
    target: Any = None
    head_mask: tuple = ()
    explain: bool = False
    kind: str = TRANSLATION

    @functools.cached_property
    def digest(self) -> str:
        call = (self.model, self.device, self.text, self.beam_size, self.target, tuple(self.head_mask)) + (
            (True,) if self.explain else ()) + (() if self.kind == TRANSLATION else (self.kind,))
        return hashlib.sha1(repr(call).encode()).hexdigest()

    def but(self, **changes) -> "RunKey":
        return dataclasses.replace(self, **changes)


def cached_run(kind: str, max_entries: int):
    """The one way a run is cached (every module of runs/): `build(key, slots)`, which makes the run
    of a RunKey of this `kind` (its model work under translation.translation_slot(slots)), becomes
    `run(key, slots)`, which
      - refuses a key of another kind (TypeError: a lens key never reaches the alignment);
      - hands out what this process holds under key.digest: no st.cache_resource hashing of the key
        (every session of a room on one link asks for the same run, issue 14);
      - else builds it once per process (st.cache_resource, `max_entries` kept; an exception passes
        through uncached, a result that says why there is none is kept like any other);
      - and holds it under key.digest, which is also the figure cache key the result carries.
    `run.kind` is the kind; `run.clear()` empties its cache. A new analysis: its key function
    (`run.but(kind=..., ...)` of the page's run), its build under this decorator, a view, and the
    view's line in views/__init__.py."""
    def decorate(build):
        cached = st.cache_resource(max_entries=max_entries, show_spinner=False)(build)

        @functools.wraps(build)
        def run(key: RunKey, slots: int):
            if key.kind != kind:
                raise TypeError(f"{build.__name__} runs {kind!r} keys, not {key.kind!r} ones")
            ready = held().get(key.digest)
            return ready if ready is not None else hold(key.digest, cached(key, slots))

        run.kind, run.clear = kind, cached.clear
        return run
    return decorate


def model_key(ref, device: str) -> tuple:
    return ("model", ref, device)
