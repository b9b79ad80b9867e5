"""Helpers for the Playwright tests: a `streamlit run` server on a free port, and page probes."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CHART = '[data-testid="stPlotlyChart"]'


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, log_path: Path) -> subprocess.Popen:
    """`streamlit run app.py` from the repository root, environment passed through."""
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true",
               "--browser.gatherUsageStats", "false"]
    log = open(log_path, "wb")
    return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.5)
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


def plot_state(page, index: int = 0) -> dict:
    """Title, tick labels and trace types of the index-th plotly chart, read from plotly.js itself."""
    return page.evaluate(
        """(index) => {
            const plots = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot');
            const gd = plots[index];
            if (!gd || !gd.layout) return null;
            const title = gd.layout.title;
            return {title: (title && title.text) || '', types: gd.data.map(t => t.type),
                    xticks: Array.from(gd.querySelectorAll('.xtick text')).map(e => e.textContent),
                    yticks: Array.from(gd.querySelectorAll('.ytick text')).map(e => e.textContent)};
        }""", index)


def wait_for_plot(page, predicate_js: str, index: int = 0, timeout: float = 120_000) -> None:
    """Wait until the index-th chart exists and `predicate_js` (an expression of gd) holds."""
    page.wait_for_function(
        f"""() => {{
            const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[{index}];
            if (!gd || !gd.layout || !gd.data) return false;
            try {{ return Boolean({predicate_js}); }} catch (e) {{ return false; }}
        }}""", timeout=timeout)


def wait_idle(page, timeout: float = 120_000) -> None:
    """Wait until Streamlit has no script run in progress."""
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')
                 && !document.querySelector('[data-testid="stSpinner"]')""", timeout=timeout)


def pick_view(page, name: str) -> None:
    page.locator('[data-testid="stRadio"] label').filter(has_text=name).first.click()


def translate(page, text: str) -> None:
    """Type a sentence in the source box and press Translate."""
    box = page.locator('[data-testid="stTextArea"] textarea').first
    box.fill(text)
    page.get_by_role("button", name="Translate").click()
