"""The server process caps glibc's malloc arenas (atlas_ui/server_process.py): one arena per
session thread let a long-lived server's memory creep up with every session it served."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from atlas_ui import server_process

ROOT = Path(__file__).resolve().parents[1]
GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")

# Eight threads each allocate (glibc hands a new thread a new arena while under the limit), then
# malloc_info lists the arenas, one <heap> element each.
COUNT_ARENAS = """
import ctypes, ctypes.util, sys, threading, tempfile, os
sys.path.insert(0, {root!r})
from atlas_ui.server_process import limit_malloc_arenas
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
