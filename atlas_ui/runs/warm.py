"""What this process already holds: loaded models and recent translations.

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


@functools.lru_cache(maxsize=1)
def held() -> weakref.WeakValueDictionary:
    """key -> object, for this process (functools, not st.cache_resource: no hashing per call)."""
    return weakref.WeakValueDictionary()


def hold(key, value):
    held()[key] = value
    return value


def holds(key) -> bool:
    return held().get(key) is not None


@dataclass(frozen=True)
class RunKey:
    """Names one cached translate() call and every figure drawn from it. The page makes the run's
    key once (page/main.py); the runs read `digest` (what this process holds it under, and its
    figures' cache key) and a related run's key is `but(...)` of it, never rebuilt from arguments.
    `target`: None, a reference text, or a tuple of pieces; tagged tuples name other kinds of run
    over the same sentence (("prefix", ...) a what-if branch, ("lens", ...), ("decoder_lens", ...),
    ("align", ...))."""
    model: Any
    device: str
    text: str
    beam_size: int
    target: Any = None
    head_mask: tuple = ()
    explain: bool = False

    @functools.cached_property
    def digest(self) -> str:
        call = (self.model, self.device, self.text, self.beam_size, self.target, tuple(self.head_mask)) + (
            (True,) if self.explain else ())
        return hashlib.sha1(repr(call).encode()).hexdigest()

    def but(self, **changes) -> "RunKey":
        return dataclasses.replace(self, **changes)


def tagged(key: RunKey) -> str:
    """What this process holds a tagged run under (runs/branch.py, runs/lens.py, runs/alignment.py;
    target ("prefix", ...), ("lens", ...)): "tag:digest", never a translation's plain digest, even
    for a run forced through pieces that start with one spelling the tag."""
    return f"{key.target[0]}:{key.digest}"


def model_key(ref, device: str) -> tuple:
    return ("model", ref, device)
