"""The server process caps glibc's malloc arenas (atlas_ui/server/server_process.py): one arena per
session thread let a long-lived server's memory creep up with every session it served."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from atlas_ui.server import server_process

ROOT = Path(__file__).resolve().parents[1]
GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")

# Eight threads each allocate (glibc hands a new thread a new arena while under the limit), then
# malloc_info lists the arenas, one <heap> element each.
COUNT_ARENAS = """
import ctypes, ctypes.util, sys, threading, tempfile, os
sys.path.insert(0, {root!r})
from atlas_ui.server.server_process import limit_malloc_arenas
print(limit_malloc_arenas() if sys.argv[1] == "limit" else "unlimited")
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    blocks = [bytearray(50_000) for _ in range(20)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
path = os.path.join(tempfile.mkdtemp(), "info.xml")
handle = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, handle); libc.fclose(handle)
print(open(path).read().count("<heap nr="))
"""


def arenas(mode: str, env: dict) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", COUNT_ARENAS.format(root=str(ROOT)), mode], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    took, count = out.stdout.split()
    return took, int(count)


@pytest.mark.skipif(not GLIBC, reason="arenas are glibc's; elsewhere the function does nothing (tested below)")
def test_session_threads_share_a_few_arenas_instead_of_one_each():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert arenas("unlimited", env)[1] > server_process.ARENAS     # main + one per thread, up to 8 per core
    assert arenas("limit", env) == ("True", server_process.ARENAS)


def test_an_explicit_malloc_arena_max_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert server_process.limit_malloc_arenas() is False


def test_without_glibc_it_does_nothing(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(server_process.ctypes.util, "find_library", lambda name: "libSystem.B.dylib")
    assert server_process.limit_malloc_arenas() is False


def accepted_nodelay(listener: socket.socket) -> int:
    with socket.create_connection(listener.getsockname()[:2]):
        connection, _ = listener.accept()
        with connection:
            return connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="found through /proc/self/fd")
def test_connections_accepted_from_a_socket_bound_like_streamlits_send_without_delay():
    # socket.socket(family) as Streamlit binds it: protocol 0, so asyncio leaves Nagle on
    with socket.socket(socket.AF_INET) as listener, socket.socket(socket.AF_INET) as client_only:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert listener.proto == 0 and accepted_nodelay(listener) == 0
        assert listener.fileno() in server_process.listening_tcp_sockets()
        assert client_only.fileno() not in server_process.listening_tcp_sockets()
        assert server_process.send_without_delay() >= 1
        assert accepted_nodelay(listener) == 1
        assert client_only.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0   # not a listener: untouched


# app.py in the server's role turning Nagle off on a socket Streamlit bound: checked in
# tests/test_asgi.py (test_app_py_is_the_servers_application_when_imported_and_the_page_in_a_script_run),
# in the one interpreter that imports the app there.
