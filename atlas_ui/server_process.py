"""Settings of the server process, applied once when the server imports app.py.

glibc's malloc gives each thread that contends for memory an arena of its own, up to eight per
core, and memory freed in one arena is not reused by another. Every session's script run is a
thread of its own, so a long-lived server's resident memory crept up with the number of sessions
it had served although the caches it holds are bounded (`benchmarks/bench_serving.py --skip-crowds
--rss 500`: 714 MB after 500 sessions and still rising; 629-640 MB and flat with two arenas, 613 MB
and flat with four). The usual remedy is MALLOC_ARENA_MAX=2; two made a new sentence's run about 20 ms
slower (threads waiting on an arena's lock: `benchmarks/bench_first_paint.py --env MALLOC_ARENA_MAX=N`,
the click 0.32 s with 2, 0.28-0.30 s with 4 or 16), so four. It is set here with mallopt so that
`streamlit run app.py` gets it without an environment variable. An explicit MALLOC_ARENA_MAX in the
environment wins."""
from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8            # glibc malloc.h
ARENAS = 4


def limit_malloc_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for threads created from now on; True when it took effect.
    Elsewhere (musl, macOS, Windows, or MALLOC_ARENA_MAX already set) it does nothing."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    if not name or "libc.so" not in name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_ARENA_MAX, count) == 1
