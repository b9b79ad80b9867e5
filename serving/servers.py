"""Start and stop `streamlit run` servers on free ports (tests, benchmarks, the proxy setup)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The settings every server gets on its command line (the rest comes from .streamlit/config.toml).
SERVER_ARGS = ("--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, log_path: Path, extra_args: tuple = (), env: dict | None = None,
                 app: str = "app.py") -> subprocess.Popen:
    """`streamlit run <app>` from the repository root (so .streamlit/config.toml applies),
    the environment passed through (plus `env`)."""
    command = [sys.executable, "-m", "streamlit", "run", app, "--server.port", str(port), *SERVER_ARGS, *extra_args]
    log = open(log_path, "wb")
    return subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _listeners(port: int) -> set[str]:
    """The socket inodes listening on TCP `port` (Linux /proc/net/tcp)."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {f[9] for f in map(str.split, lines) if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port}


def listening(pid: int, port: int) -> bool:
    """Does process `pid` hold the listening socket on `port`? (its socket inodes against the
    listening ones)"""
    listeners = _listeners(port)
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in listeners:
                return True
    except OSError:
        pass
    return False


class PortTaken(RuntimeError):
    """The server could not listen on its port: another process took it first."""


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90.0, port: int | None = None) -> None:
    """Poll /_stcore/health until it answers "ok" (a server start has no event to wait on). With
    `port`, the answer counts only once `process` itself listens there: free_port() only finds a
    port free, and another server started meanwhile (a second pytest worker) may take it and answer
    in our place. Raises PortTaken when the process exited while another one held its port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            taken = port is not None and bool(_listeners(port))
            raise (PortTaken if taken else RuntimeError)(f"{process.args[0]} exited with code {process.returncode}"
                                                         + (f": port {port} is taken" if taken else ""))
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok" and (port is None or listening(process.pid, port)):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url}/_stcore/health did not answer 'ok' within {timeout:.0f} s")


def stop_server(process: subprocess.Popen) -> None:
    """Terminate the server we started (only that process), then kill it if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def rss_mb(pid: int) -> float:
    """Resident set size of one process, in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pids: list[int], window: float = 0.2, quiet: float = 0.01, timeout: float = 15.0) -> float:
    """Wait until the processes are idle (less than `quiet` CPU seconds over `window`), so that a
    crowd does not start while another server still closes the last crowd's sessions. Returns the
    seconds it waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = sum(cpu_seconds(pid) for pid in pids)
        time.sleep(window)
        if sum(cpu_seconds(pid) for pid in pids) - before < quiet:
            break
    return time.monotonic() - started


class AppServer:
    """One `streamlit run` server on a free port: start(), wait(), stop(), or use as a context."""

    PORT_TRIES = 3                # a port another process took first: start again on a new one

    def __init__(self, app: str = "app.py", extra_args: tuple = (), env: dict | None = None,
                 log_dir: Path | None = None, port: int | None = None):
        self.app, self.extra_args, self.env = app, tuple(extra_args), env
        self.fixed_port = port is not None
        self.log_dir = Path(log_dir or tempfile.gettempdir())
        self._use_port(port or free_port())
        self.process: subprocess.Popen | None = None

    def _use_port(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.log_dir / f"server-{Path(self.app).stem}-{self.port}.log"

    def start(self) -> "AppServer":
        self.process = start_server(self.port, self.log_path, self.extra_args, self.env, self.app)
        return self

    def wait(self, timeout: float = 90.0) -> str:
        """Wait until this server (this process, on its port) is healthy. When another process took
        the port first, start again on a new port (PORT_TRIES in all), unless the port was given."""
        for attempt in range(self.PORT_TRIES):
            try:
                wait_healthy(self.url, self.process, timeout, port=self.port)
                return self.url
            except PortTaken:
                if self.fixed_port or attempt == self.PORT_TRIES - 1:
                    raise
                self._use_port(free_port())
                self.start()
        raise AssertionError("unreachable: the last try returns or raises")

    def rss_mb(self) -> float:
        return rss_mb(self.process.pid)

    def stop(self) -> None:
        if self.process is not None:
            stop_server(self.process)

    def __enter__(self) -> "AppServer":
        self.start()
        try:
            self.wait()
        except BaseException:            # a server that never got healthy is not left running
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
