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
environment wins.

Streamlit binds its listening socket itself, as `socket.socket(family)`, whose protocol number is 0;
asyncio turns Nagle's algorithm off only on sockets whose protocol says TCP, so every connection
this server accepted kept it. Its HTTP answers are two writes, the headers then the body, and Nagle
holds the body until the browser acknowledges the headers, which it delays by 40 ms: a fresh tab's
~60 script files took 40 ms each per connection (one keep-alive connection, `curl URL URL`: 2 ms,
then 43 ms for each file after the first). `send_without_delay` sets TCP_NODELAY on the listening
socket, which Linux passes on to every connection accepted from it."""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import socket
import stat

LOG = logging.getLogger("atlas_ui")

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


def listening_tcp_sockets() -> list[int]:
    """File descriptors of this process's listening TCP sockets (Linux's /proc; elsewhere none)."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        return []
    found = []
    for descriptor in descriptors:
        try:
            if not stat.S_ISSOCK(os.fstat(descriptor).st_mode):
                continue
            with socket.socket(fileno=os.dup(descriptor)) as sock:
                if (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                        and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                    found.append(descriptor)
        except OSError:                  # closed meanwhile, or not a socket Python can wrap
            continue
    return found


def send_without_delay() -> int:
    """Turn Nagle's algorithm off on this process's listening TCP sockets, and so on every
    connection they accept from now on; returns how many sockets. Called when the server imports
    app.py, after Streamlit has bound its socket and before it accepts the first connection."""
    count = 0
    for descriptor in listening_tcp_sockets():
        try:
            with socket.socket(fileno=os.dup(descriptor)) as sock:   # a duplicate: the same socket
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            count += 1
        except OSError:
            continue
    LOG.info("TCP_NODELAY on %d listening socket(s)", count)
    return count
