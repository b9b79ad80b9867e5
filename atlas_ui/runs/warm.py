"""What this process already holds: loaded models and recent translations.

A run that needs no work should show no progress widgets: `st.status` sleeps 50 ms on every call
and `st.spinner` starts a timer thread, which with a whole audience on one share link made up
about a third of each session's cost (issue 14). The page asks here first. Entries are weak, so
a model or result the caches have dropped is gone from here too."""
from __future__ import annotations

import functools
import hashlib
import weakref


@functools.lru_cache(maxsize=1)
def held() -> weakref.WeakValueDictionary:
    """key -> object, for this process (functools, not st.cache_resource: no hashing per call)."""
    return weakref.WeakValueDictionary()


def hold(key, value):
    held()[key] = value
    return value


def holds(key) -> bool:
    return held().get(key) is not None


def translation_key(model, device: str, text: str, beam_size: int, target, head_mask: tuple = (),
                    explain: bool = False) -> str:
    """Names one cached translate() call; also the key of its figures."""
    call = (model, device, text, beam_size, target, tuple(head_mask)) + ((True,) if explain else ())
    return hashlib.sha1(repr(call).encode()).hexdigest()


def model_key(ref, device: str) -> tuple:
    return ("model", ref, device)
