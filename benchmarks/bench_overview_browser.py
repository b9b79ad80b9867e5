"""Browser benchmark: the all-heads overview vs 24 subplots vs BertViz's model view.

    python benchmarks/bench_overview_browser.py [--tokens 20 64 128] [--repeats 5]
                                                [--bertviz-dir /tmp/bertviz-assets]

Issue 4 ("Speed and scale"): in a page that has already loaded plotly.js, time
`Plotly.newPlot` until it has painted. For 3 layers x 8 heads of random attention
(rows sum to 1) at N tokens, three renderers are timed side by side in one Chromium,
round-robin, with the same weights, each in its own page (own browser context, so own
renderer process: tearing down BertViz's SVG must not slow the next Plotly run):

* ours: `viz.overview_figure` (one heatmap trace, NaN gaps between tiles);
* 24 subplots: one go.Heatmap per head in make_subplots(3, 8), built here, for context;
* BertViz: its model view (bertviz/model_view.js, SVG lines drawn with d3), fed the
  params its model_view.py builds (format: bertviz 1.4.1).

Each run: the figure JSON (or BertViz params) is parsed before the clock starts; then
t0 = performance.now(); render (await Plotly.newPlot / BertViz's render); wait for two
requestAnimationFrame callbacks (the frame holding the drawing has been painted); t1.
The plot is purged, two more frames pass, the JS heap is collected and the benchmark
idles --settle seconds before the next run. Reported: median of --repeats runs after
--warmup unmeasured runs. Goals: ours <= 0.1x BertViz at 20 tokens and <= 0.02x at 128.

Needs Playwright (Python) and Debian's /usr/bin/chromium (no `playwright install`).
Pages are served by an in-process http.server on 127.0.0.1; nothing goes online.

BertViz is not a project requirement. Its model view loads d3 5.7.0 and jQuery from a
CDN through require.js; this benchmark instead loads local copies as plain scripts and
captures model_view.js's require callback. Put the three files in --bertviz-dir
(default /tmp/bertviz-assets) with:

    mkdir -p /tmp/bertviz-assets && cd /tmp/bertviz-assets
    pip download --no-deps bertviz==1.4.1 -d .
    python -m zipfile -e bertviz-1.4.1-py3-none-any.whl wheel
    cp wheel/bertviz/model_view.js .
    npm pack d3@5.7.0 jquery@2.2.4
    tar -xzf d3-5.7.0.tgz --strip-components=2 package/dist/d3.min.js
    tar -xzf jquery-2.2.4.tgz --strip-components=2 package/dist/jquery.min.js

(BertViz pins jQuery 2.0.0, which npm does not have; 2.2.4 is the nearest. The model
view only uses $(...).empty/.attr/.on.) Without these files the BertViz columns read
"n/a" and the other numbers are still printed.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import viz  # noqa: E402

LAYERS, HEADS = 3, 8
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--js-flags=--expose-gc"]       # gc() between runs, outside the clock
BERTVIZ_FILES = ("model_view.js", "d3.min.js", "jquery.min.js")
ROOT_ID = "bertviz-bench"

PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>overview benchmark</title>
<script src="plotly.min.js"></script>
<!--BERTVIZ-->
</head><body style="margin:0">
<div id="plot" style="width:1000px"></div>
<div id="{ROOT_ID}" style="font-family:'Helvetica Neue', Helvetica, Arial, sans-serif;">
  <span style="user-select:none"></span>
  <div id='vis'></div>
</div>
<script>
window.__data = {{}};
function twoFrames() {{
  return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
}}
async function settle() {{ await twoFrames(); if (window.gc) gc(); await twoFrames(); }}
window.timePlotly = async (key, config) => {{
  const fig = JSON.parse(window.__data[key]);
  const div = document.getElementById('plot');
  const t0 = performance.now();
  await Plotly.newPlot(div, fig.data, fig.layout, config);
  await twoFrames();
  const t1 = performance.now();
  // a heatmap paints into one <image>; large overviews are one image trace (plotly.js waits for
  // its PNG to load before newPlot resolves, so the clock includes the decode)
  const drawn = div.querySelectorAll('.heatmaplayer image, .imagelayer image').length;
  Plotly.purge(div);
  div.innerHTML = '';
  await settle();
  return [t1 - t0, drawn];
}};
window.timeBertviz = async (key) => {{
  window.__bvParams = JSON.parse(window.__data[key]);
  const t0 = performance.now();
  window.__bvFactory(window.jQuery, window.d3);   // initialize() + render(), synchronous
  await twoFrames();
  const t1 = performance.now();
  const vis = document.querySelector('#{ROOT_ID} #vis');
  const drawn = vis.querySelectorAll('line').length;
  window.jQuery(vis).empty();
  window.__bvParams = null;
  await settle();
  return [t1 - t0, drawn];
}};
</script>
</body></html>
"""

BERTVIZ_SCRIPTS = """<script src="d3.min.js"></script>
<script src="jquery.min.js"></script>
<script>
// model_view.js calls require.config(...) then requirejs(['jquery', 'd3'], fn): keep fn.
window.require = {config: function () {}};
window.requirejs = function (deps, fn) { window.__bvFactory = fn; };
</script>
<script src="model_view.js"></script>"""


def random_attention(n: int, seed: int = 0) -> np.ndarray:
    """(LAYERS, HEADS, n, n) float32, every row a random distribution."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(n), size=(LAYERS, HEADS, n)).astype(np.float32)


def pieces(n: int) -> list[str]:
    return [f"▁w{i % 37}" for i in range(n - 1)] + ["</s>"]


def subplots_figure(w: np.ndarray, tokens: list[str]) -> go.Figure:
    """Baseline: one heatmap subplot per head, shared colour axis, token axes."""
    L, H = w.shape[:2]
    fig = make_subplots(rows=L, cols=H, horizontal_spacing=0.01, vertical_spacing=0.03,
                        row_titles=[f"Layer {l}" for l in range(L)],
                        column_titles=[f"Head {h}" for h in range(H)])
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    for l in range(L):
        for h in range(H):
            fig.add_trace(go.Heatmap(z=w[l, h], x=labels, y=labels, coloraxis="coloraxis",
                                     hovertemplate="query %{y} → key %{x}<br>%{z:.4f}"
                                                   "<extra></extra>"),
                          row=l + 1, col=h + 1)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_layout(coloraxis=dict(colorscale=viz.DEFAULT_COLORSCALE, cmin=0, cmax=1),
                      height=int(1000 * L / H + 110), margin=dict(l=10, r=10, t=60, b=10))
    return fig


def bertviz_params(w: np.ndarray, tokens: list[str]) -> str:
    """The JSON model_view.py substitutes for PYTHON_PARAMS (self-attention, no sentence B)."""
    shown = [t.replace("Ġ", " ").replace("▁", " ").replace("</w>", "") for t in tokens]
    params = {
        "attention": [{"name": None, "attn": w.tolist(), "left_text": shown, "right_text": shown}],
        "default_filter": "0",
        "display_mode": "dark",
        "root_div_id": ROOT_ID,
        "include_layers": list(range(w.shape[0])),
        "include_heads": list(range(w.shape[1])),
        "total_heads": w.shape[1],
    }
    return json.dumps(params)


def find_bertviz(directory: Path) -> dict[str, Path] | None:
    """The three BertViz files (top level first, else anywhere below), or None."""
    if not directory.is_dir():
        return None
    found = {}
    for name in BERTVIZ_FILES:
        path = directory / name
        if not path.is_file():
            path = next(iter(sorted(directory.rglob(name))), None)
        if path is None:
            return None
        found[name] = path
    script = found["model_view.js"].read_text(encoding="utf-8")
    if "PYTHON_PARAMS" not in script or "requirejs(" not in script:
        return None
    return found


def asset_versions(files: dict[str, Path]) -> str:
    def version(path: Path, pattern: str) -> str:
        match = re.search(pattern, path.read_text(encoding="utf-8", errors="replace")[:300])
        return match.group(1) if match else "?"
    d3 = version(files["d3.min.js"], r"v(\d+\.\d+\.\d+)")
    jq = version(files["jquery.min.js"], r"v(\d+\.\d+\.\d+)")
    wheels = sorted(files["model_view.js"].parent.parent.glob("bertviz-*.whl")) + sorted(
        files["model_view.js"].parent.glob("bertviz-*.whl"))
    bv = re.match(r"bertviz-([^-]+)-", wheels[0].name).group(1) if wheels else "?"
    return f"BertViz {bv} (d3 {d3}, jQuery {jq})"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(directory: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/index.html"


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[20, 64, 128])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--bertviz-dir", type=Path, default=Path("/tmp/bertviz-assets"))
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds to idle after each run, outside the clock")
    parser.add_argument("--verbose", action="store_true", help="print every run to stderr")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    bertviz = find_bertviz(args.bertviz_dir)
    if bertviz is None:
        print(f"BertViz assets not found in {args.bertviz_dir} (need {', '.join(BERTVIZ_FILES)}); "
              f"see the recipe in {Path(__file__).name}'s docstring. BertViz columns: n/a.",
              file=sys.stderr)

    renderers = ["ours", "subplots"] + (["bertviz"] if bertviz else [])
    times: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-overview-") as root:
        Path(root, "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
        page_html = PAGE
        if bertviz:
            for name, path in bertviz.items():
                text = path.read_text(encoding="utf-8")
                if name == "model_view.js":
                    text = text.replace("PYTHON_PARAMS", "window.__bvParams")
                Path(root, name).write_text(text, encoding="utf-8")
            page_html = PAGE.replace("<!--BERTVIZ-->", BERTVIZ_SCRIPTS)
        Path(root, "index.html").write_text(page_html, encoding="utf-8")

        server, url = serve(root)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    # One browser context (so one renderer process) per renderer: the
                    # teardown of BertViz's ~400k SVG nodes must not land in a Plotly run.
                    errors: list[str] = []
                    pages = {}
                    for name in renderers:
                        context = browser.new_context(viewport={"width": 1280, "height": 1000},
                                                      device_scale_factor=1)
                        page = pages[name] = context.new_page()
                        page.on("pageerror", lambda e, name=name: errors.append(f"{name}: {e}"))
                        page.goto(url, wait_until="load")
                    plotly_version = pages["ours"].evaluate("Plotly.version")
                    if bertviz and not pages["bertviz"].evaluate(
                            "typeof window.__bvFactory === 'function'"):
                        raise RuntimeError(f"model_view.js did not register its callback: {errors}")
                    for n in args.tokens:
                        w, tokens = random_attention(n), pieces(n)
                        payload = {
                            "ours": viz.overview_figure(w, tokens, tokens).to_json(),
                            "subplots": subplots_figure(w, tokens).to_json(),
                        }
                        if bertviz:
                            payload["bertviz"] = bertviz_params(w, tokens)
                        for name in renderers:
                            pages[name].evaluate("([k, s]) => { window.__data[k] = s; }",
                                                 [name, payload[name]])
                        del payload

                        def run(name: str) -> float:
                            if name == "bertviz":
                                ms, drawn = pages[name].evaluate("k => timeBertviz(k)", name)
                                expected = LAYERS * HEADS * n * n
                            else:
                                ms, drawn = pages[name].evaluate("([k, c]) => timePlotly(k, c)",
                                                                 [name, viz.PLOTLY_CONFIG])
                                expected = 1 if name == "ours" else LAYERS * HEADS
                            if drawn != expected or errors:
                                raise RuntimeError(f"{name} at {n} tokens drew {drawn} "
                                                   f"(expected {expected}); page errors: {errors}")
                            time.sleep(args.settle)    # let that renderer's cleanup finish
                            return ms / 1e3

                        for _ in range(args.warmup):
                            for name in renderers:
                                run(name)
                        for _ in range(args.repeats):      # round-robin: drift hits all alike
                            for name in renderers:
                                times.setdefault((n, name), []).append(run(name))
                        for page in pages.values():
                            page.evaluate("() => { window.__data = {}; }")
                        if args.verbose:
                            for name in renderers:
                                runs = " ".join(f"{t * 1e3:.0f}" for t in times[(n, name)])
                                print(f"  {n} tokens, {name}: {runs} ms", file=sys.stderr)
                    version = browser.version
                finally:
                    browser.close()
        finally:
            server.shutdown()
            server.server_close()

    med = {key: statistics.median(v) for key, v in times.items()}
    extra = f" · {asset_versions(bertviz)}" if bertviz else " · BertViz: assets missing"
    print(f"Chromium {version} (headless, --disable-gpu) · plotly.js {plotly_version}{extra} · "
          f"{LAYERS} layers × {HEADS} heads, random attention · median of {args.repeats} runs "
          f"(after {args.warmup} warm-up), newPlot/render → 2 animation frames")
    print()
    print("| tokens | ours (1 heatmap trace) | 24 subplots | BertViz | ours / BertViz |")
    print("|---|---|---|---|---|")
    for n in args.tokens:
        ours, sub, bv = med[(n, "ours")], med[(n, "subplots")], med.get((n, "bertviz"))
        ratio = f"{ours / bv:.3f}×" if bv else "n/a"
        print(f"| {n} | {fmt(ours)} | {fmt(sub)} | {fmt(bv)} | {ratio} |")
    if bertviz:
        print()
        for n, goal in ((20, 0.1), (128, 0.02)):
            if (n, "bertviz") in med:
                ratio = med[(n, "ours")] / med[(n, "bertviz")]
                verdict = "met" if ratio <= goal else "NOT met"
                print(f"Goal at {n} tokens: ours/BertViz ≤ {goal}× — {ratio:.3f}×, {verdict}")


if __name__ == "__main__":
    main()
