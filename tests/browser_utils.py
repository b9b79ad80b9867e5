"""Helpers for the Playwright tests: a `streamlit run` server on a free port, and page probes."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
from pathlib import Path

import pytest

from serving.servers import AppServer

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CHART = '[data-testid="stPlotlyChart"]'
# CI (CI=true or ATLAS_REQUIRE_BROWSER=1) must run the browser tests: a missing browser fails there.
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ATLAS_REQUIRE_BROWSER") == "1"
NEEDS_BROWSER = pytest.mark.skipif(not Path(CHROMIUM).exists() and not REQUIRED,
                                   reason=f"{CHROMIUM} is not installed (apt-get install -y chromium)")


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


# ---- one reliable wait: "the script run my action started has ended" ---------------------------
# Streamlit's app root says `data-test-script-state` = running / notRunning, but a click is not seen
# there for the first ~0.2 s, and a short run can be drawn in one React commit that never shows
# "running" at all. So each page counts, from before the app's own scripts run:
# * rerun requests it sends (BackMsg.rerun_script) and script runs the server starts and finishes
#   (ForwardMsg.new_session / script_finished), read off the websocket;
# * React commits (through the DevTools hook that react-dom calls on every commit).
# A run requested by an action has ended when the server finished the run that started after the
# last request, React has committed since that message arrived, the root says notRunning, and no
# element is still a placeholder (stSkeleton) while its widget's script loads: a new tab imports
# plotly.js first (atlas_ui/server/asgi.py), so its chart can be drawn before its widgets are.
RUN_TRACKER_JS = """(() => {
  if (window.__atlasRuns) return;
  const runs = window.__atlasRuns = {sent: 0, startedFor: 0, finishedFor: 0, finished: 0,
                                      commits: 0, commitsAtFinish: 0, socketCreated: null};
  window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
    supportsFiber: true, isDisabled: false, renderers: new Map(),
    inject() { return 1; }, checkDCE() {}, onScheduleFiberRoot() {}, onCommitFiberUnmount() {},
    onPostCommitFiberRoot() {}, onCommitFiberRoot() { runs.commits += 1; },
  };
  // top-level protobuf fields of a message: {fieldNumber: varint value or true}
  function fields(data) {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data)
                : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    const found = {};
    if (!bytes) return found;
    let i = 0;
    const varint = () => { let value = 0, scale = 1, b;
      do { b = bytes[i++]; value += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80 && i < bytes.length);
      return value; };
    while (i < bytes.length) {
      const tag = varint(), field = Math.floor(tag / 8), wire = tag % 8;
      if (wire === 0) found[field] = varint();
      else if (wire === 2) { const n = varint(); i += n; found[field] = true; }
      else if (wire === 1) { i += 8; found[field] = true; }
      else if (wire === 5) { i += 4; found[field] = true; }
      else break;
    }
    return found;
  }
  const NativeWebSocket = window.WebSocket;
  class TrackedWebSocket extends NativeWebSocket {
    constructor(...args) {
      super(...args);
      if (runs.socketCreated === null) runs.socketCreated = performance.now();
      // registered before the app sets onmessage, so it sees each message first
      this.addEventListener('message', (event) => {
        const msg = fields(event.data);
        if (msg[NEW_SESSION]) runs.startedFor = runs.sent;
        if (SCRIPT_FINISHED in msg) {
          runs.finished += 1;
          runs.finishedFor = runs.startedFor;
          runs.commitsAtFinish = runs.commits;
        }
      });
    }
    send(data) {
      if (fields(data)[RERUN_SCRIPT]) runs.sent += 1;
      return super.send(data);
    }
  }
  window.WebSocket = TrackedWebSocket;
})();"""

RUN_ENDED_JS = """([sentBefore, runs]) => {
  const r = window.__atlasRuns, root = document.querySelector('[data-testid="stApp"]');
  return Boolean(r && root) && r.sent >= sentBefore + runs && r.finishedFor === r.sent
         && r.commits > r.commitsAtFinish && root.getAttribute('data-test-script-state') === 'notRunning'
         && !root.querySelector('[data-testid="stSkeleton"]');
}"""


def drive(coroutine):
    """asyncio.run in a thread of its own: in a full run, the session's Playwright browser (sync
    API) keeps an event loop running in the main thread, where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_tracker_js() -> str:
    """RUN_TRACKER_JS with the protocol's field numbers, read from Streamlit's own protobufs."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    forward, back = ForwardMsg.DESCRIPTOR.fields_by_name, BackMsg.DESCRIPTOR.fields_by_name
    return (RUN_TRACKER_JS.replace("NEW_SESSION", str(forward["new_session"].number))
            .replace("SCRIPT_FINISHED", str(forward["script_finished"].number))
            .replace("RERUN_SCRIPT", str(back["rerun_script"].number)))


def sent_reruns(page) -> int:
    return page.evaluate("() => window.__atlasRuns ? window.__atlasRuns.sent : 0")


@contextlib.contextmanager
def script_run(page, runs: int = 1, timeout: float = 120_000):
    """Wait, after the block's action, until the script run(s) it started have ended.

    `runs` is how many rerun requests the action sends (one per click, key press or committed
    widget); a different count fails, since a second request could start a run after the wait.
    """
    before = sent_reruns(page)
    yield
    page.wait_for_function(RUN_ENDED_JS, arg=[before, runs], timeout=timeout)
    sent = sent_reruns(page) - before
    assert sent == runs, f"the action sent {sent} rerun requests, expected {runs}"


TRANSLATION = '.st-key-translation [data-testid="stText"]'       # keyed containers of the app
SHARE_LINK = '.st-key-share_link [data-testid="stMarkdownContainer"] a'


def pick_view(page, name: str) -> None:
    """Click the view radio's option named exactly `name` ("Beam", not "Beam search"), and wait
    for the run it starts."""
    exact = re.compile(rf"^\s*{re.escape(name)}\s*$")
    option = page.locator('[data-testid="stRadio"] label').filter(has_text=exact).first
    if option.locator("input").is_checked():
        return                                   # already open: a click would start no run
    with script_run(page):
        option.click()


def translate(page, text: str) -> None:
    """Type a sentence in the source box, apply it (Ctrl+Enter), then press Translate, each step
    waited for: one action, one script run."""
    box = page.locator('[data-testid="stTextArea"] textarea').first
    box.fill(text)
    with script_run(page):
        box.press("Control+Enter")
    with script_run(page):
        page.get_by_role("button", name="Translate").click()


@contextlib.contextmanager
def running_app(log_dir: Path, extra_args: tuple = (), env: dict | None = None):
    """A healthy `streamlit run` server for the duration of the block; yields its URL."""
    with AppServer("app.py", extra_args, env, log_dir) as server:
        yield server.url


# A phone's browser (Chrome on Android): what the app reads to refit charts (ui.common.on_a_phone)
PHONE_AGENT = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
               "Chrome/131.0.0.0 Mobile Safari/537.36")


def new_page(browser, viewport=(1440, 1100), phone: bool = False, dark: bool = False):
    """A blank page in a context of its own, with the run tracker; console and page errors collect
    in page.problems. `phone`: a phone's browser (its User-Agent and touch). `dark`: a system set to
    dark mode (prefers-color-scheme: dark): the app names no theme (.streamlit/config.toml), so
    Streamlit's "Use system setting" draws it in its dark theme, as a visitor in dark mode sees it.
    Open a link with load."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=True,
                                  color_scheme="dark" if dark else "light",
                                  **(dict(user_agent=PHONE_AGENT, has_touch=True) if phone else {}))
    context.add_init_script(run_tracker_js())
    page = context.new_page()
    page.problems = []
    page.on("console", lambda msg: page.problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))
    page.set_default_timeout(120_000)
    return page


def load(page, url: str, viewport=None) -> None:
    """Open `url` in `page` (a new document, so a new Streamlit session and a new run tracker) and
    wait for its first script run; page.problems starts empty. `viewport`: the window's size for
    this link, set while the page is empty (nothing of the last link redraws). Reusing a page keeps
    its renderer: 1.1 s a link against 2.4 s for a fresh page (six presenter links, a warm server,
    runs of 2026-11-27; Pages)."""
    page.goto("about:blank")         # the last document unloads here, so nothing it logs on the way out
    page.problems.clear()            # counts against this link; and the run count starts from 0 again
    if viewport is not None:
        page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    with script_run(page):
        page.goto(url, wait_until="domcontentloaded")


class Pages:
    """One page per (viewport, phone) for the whole session (conftest's `pages`): each `open` is a
    new document and a new Streamlit session on a page that keeps its renderer (load), 1.1 s a link
    against 2.4 s for a fresh context, and starts as a fresh context would: no storage, no cookies.
    A test that needs a context of its own (several sessions at once, its own settings) uses
    new_page and load."""

    def __init__(self, browser):
        self._browser, self._pages = browser, {}

    def open(self, url: str, viewport=(1440, 1100), phone: bool = False, dark: bool = False):
        """The pooled page for this window (and system colour scheme, new_page), at its size again (a
        test may have resized it), on `url` after its first script run."""
        key = (tuple(viewport), phone, dark)
        page = self._pages.get(key)
        if page is None or page.is_closed():
            page = self._pages[key] = new_page(self._browser, viewport, phone, dark)
        else:
            # what a fresh context would not have: the last link's storage (Streamlit keeps the
            # sidebar's state and the theme in localStorage, per origin) and cookies
            page.evaluate("() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }")
            page.context.clear_cookies()
        load(page, url, viewport)
        return page

    def close(self) -> None:
        for page in self._pages.values():
            if not page.is_closed():
                page.context.close()
        self._pages.clear()


def wait_for_text(page, text: str, timeout: float = 120_000) -> None:
    """Wait until `text` appears in the page's visible text."""
    page.wait_for_function("(text) => document.body.innerText.includes(text)", arg=text, timeout=timeout)


def click_point(page, chart_index: int, trace_index: int, point_index: int) -> None:
    """Click a scatter point of a chart at the pixel plotly.js drew it (read from the axes), and
    wait for the run the selection starts.

    The point's pixel is read only once the page has stopped moving: after a run, charts above
    this one may still be drawn (lazily, at their final height) and push it down, and a click
    computed before that lands beside the point, selects nothing and starts no run. The mouse
    first hovers the pixel, and plotly.js must report that very point under it before the click."""
    wait_charts_drawn(page, chart_index + 1)
    # plotly.js counts a press within doubleClickDelay (500 ms) of the chart's last click as a
    # double click, on which Streamlit clears the selection: a second, unasked-for rerun. Two quick
    # clicks on a warm server came 486 ms apart; a person's second click is another single click.
    page.wait_for_function(
        """(c) => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[c];
                    return Date.now() - (gd._mouseDownTime || 0) > gd._context.doubleClickDelay; }""",
        arg=chart_index, timeout=10_000)
    page.evaluate("""(c) => document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[c]
                             .scrollIntoView({block: 'center', behavior: 'instant'})""", chart_index)
    # the point's pixel, the same over three polls 100 ms apart: nothing above it is still moving
    box = page.wait_for_function(
        """([c, t, p]) => {
            const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[c];
            const trace = gd._fullData[t], L = gd._fullLayout;
            const xa = L[(trace.xaxis || 'x').replace('x', 'xaxis')], ya = L[(trace.yaxis || 'y').replace('y', 'yaxis')];
            const r = gd.getBoundingClientRect();
            const at = {x: r.left + xa._offset + xa.l2p(trace.x[p]), y: r.top + ya._offset + ya.l2p(trace.y[p])};
            const seen = window.__atlasPointSeen || [];
            window.__atlasPointSeen = [...seen.slice(-2), `${c},${t},${p}:${at.x.toFixed(1)},${at.y.toFixed(1)}`];
            const same = window.__atlasPointSeen.length === 3 && new Set(window.__atlasPointSeen).size === 1;
            if (same) window.__atlasPointSeen = [];
            return same ? at : null;
        }""", arg=[chart_index, trace_index, point_index], polling=100, timeout=30_000).json_value()
    page.mouse.move(box["x"], box["y"])
    page.wait_for_function(
        """([c, t, p]) => {
            const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[c];
            return (gd._hoverdata || []).some(d => d.curveNumber === t && d.pointNumber === p);
        }""", arg=[chart_index, trace_index, point_index], timeout=10_000)
    with script_run(page):          # a selection sends one rerun
        page.mouse.click(box["x"], box["y"])


def chart_share(page) -> float:
    """How much of the window's height the tallest chart fills, unscrolled, as a visitor sees it:
    the visible part of the largest chart (plot, axes and title) over the window's height."""
    return page.evaluate("""() => {
        const h = window.innerHeight;
        let best = 0;
        for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]')) {
            const r = c.getBoundingClientRect();
            best = Math.max(best, Math.min(r.bottom, h) - Math.max(r.top, 0));
        }
        return best / h;
    }""")


def wait_charts_drawn(page, count: int = 1, timeout: float = 120_000) -> None:
    """Wait until at least `count` charts exist and every chart on the page has been drawn by
    plotly.js at its final width (plotly.js is loaded lazily: charts appear after the run ends)."""
    page.wait_for_function(
        """(count) => {
            const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
            return charts.length >= count && Array.from(charts).every(c => {
                const gd = c.querySelector('.js-plotly-plot');
                // drawn, and at the container's width (a later resize would redraw it)
                return gd && gd._fullLayout && gd.querySelector('.main-svg')
                       && Math.abs(gd._fullLayout.width - c.getBoundingClientRect().width) < 1;
            });
        }""", arg=count, timeout=timeout)


# Every chart's margins as given and as plotly.js drew them: automargin only ever grows a margin,
# and when it does, plotly.js draws that chart a second time. [] when every chart was drawn once.
GROWN_MARGINS = """() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
    .flatMap(gd => ['l', 'r', 't', 'b']
        .filter(side => gd._fullLayout._size[side] > gd._fullLayout.margin[side] + 0.5)
        .map(side => `${(gd.layout.title && gd.layout.title.text || '').slice(0, 40)}: ${side} `
                     + `${gd._fullLayout.margin[side]} px given, ${Math.round(gd._fullLayout._size[side])} px drawn`))"""
