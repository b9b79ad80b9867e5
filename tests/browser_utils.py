"""Helpers for the Playwright tests: a `streamlit run` server on a free port, and page probes."""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CHART = '[data-testid="stPlotlyChart"]'
# CI (CI=true or ATLAS_REQUIRE_BROWSER=1) must run the browser tests: a missing browser fails there.
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ATLAS_REQUIRE_BROWSER") == "1"
NEEDS_BROWSER = pytest.mark.skipif(not Path(CHROMIUM).exists() and not REQUIRED,
                                   reason=f"{CHROMIUM} is not installed (apt-get install -y chromium)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, log_path: Path, extra_args: tuple = ()) -> subprocess.Popen:
    """`streamlit run app.py` from the repository root, environment passed through."""
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true",
               "--browser.gatherUsageStats", "false", *extra_args]
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
    """Click the view radio's option named exactly `name` ("Beam", not "Beam search")."""
    exact = re.compile(rf"^\s*{re.escape(name)}\s*$")
    page.locator('[data-testid="stRadio"] label').filter(has_text=exact).first.click()


def translate(page, text: str) -> None:
    """Type a sentence in the source box and press Translate."""
    box = page.locator('[data-testid="stTextArea"] textarea').first
    box.fill(text)
    page.get_by_role("button", name="Translate").click()


@contextlib.contextmanager
def running_app(log_dir: Path, extra_args: tuple = ()):
    """A healthy `streamlit run` server for the duration of the block; yields its URL."""
    port = free_port()
    process = start_server(port, log_dir / f"server-{port}.log", extra_args)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout=90)
        yield url
    finally:
        stop_server(process)


def open_page(browser, url: str, viewport=(1440, 1100)):
    """A fresh page on `url` whose console and page errors collect in page.problems."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=True)
    page = context.new_page()
    page.problems = []
    page.on("console", lambda msg: page.problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))
    page.set_default_timeout(120_000)
    page.goto(url, wait_until="domcontentloaded")
    return page


def wait_for_text(page, text: str, timeout: float = 120_000) -> None:
    """Wait until `text` appears in the page's visible text."""
    page.wait_for_function("(text) => document.body.innerText.includes(text)", arg=text, timeout=timeout)


def click_point(page, chart_index: int, trace_index: int, point_index: int) -> None:
    """Click a scatter point of a chart at the pixel plotly.js drew it (read from the axes)."""
    box = page.evaluate(
        """([c, t, p]) => {
            const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[c];
            gd.scrollIntoView({block: 'center'});
            const trace = gd._fullData[t], L = gd._fullLayout;
            const xa = L[(trace.xaxis || 'x').replace('x', 'xaxis')], ya = L[(trace.yaxis || 'y').replace('y', 'yaxis')];
            const r = gd.getBoundingClientRect();
            return {x: r.left + xa._offset + xa.l2p(trace.x[p]), y: r.top + ya._offset + ya.l2p(trace.y[p])};
        }""", [chart_index, trace_index, point_index])
    page.mouse.move(box["x"], box["y"])
    page.mouse.click(box["x"], box["y"])
