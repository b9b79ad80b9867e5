"""A figure drawn in one pass against the same figure with 10 px margins, in Chromium.

    python benchmarks/bench_one_pass.py [--repeats 20] [--tokens 14] [--figure head|column|beam|ablation]

viz's figures bring margins that already hold their tick labels, axis titles and colour bar
(viz._base.matrix_margins). With 10 px margins, as before, plotly.js's automargin finds the room too
small after drawing and draws the whole figure again. --figure: `head`, a head's heatmap in the main
column (1000 px); `column`, Decoding steps' one-row cross-attention map in its 664 px column (x
labels tilted); `beam`, a 4-wide beam lattice over `--tokens` steps; `ablation`, the original vs
ablated probability bars. Data: random attention (rows sum to 1) or scores over Multi30k-like
pieces; each figure against itself with l, r, b set to 10 px. Each run: `Plotly.newPlot` until
its promise resolves (automargin's second pass included), and until two animation frames have
passed (painted; counted in whole 16.7 ms frames, so a second pass shows there only when it spills
into another frame), round-robin, after 4 unmeasured runs. Reported: medians and their ratios. The plotly.js is the plotly package's bundle (plotly.min.js), on
a blank page. Needs Playwright and Debian's /usr/bin/chromium; nothing goes online.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import plotly

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from browser_utils import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from viz import MAIN_WIDTH, attention_heatmap  # noqa: E402
from viz.ablation import probability_change_figure  # noqa: E402
from viz.beam import beam_tree_figure  # noqa: E402

PIECES = ["▁Zwei", "▁Hunde", "▁spielen", "▁im", "▁Schnee", ".", "</s>"]
KEYS = ["▁Two", "▁dogs", "▁play", "▁in", "▁the", "▁snow", ".", "</s>"]
DRAW_JS = """async (f) => { const g = document.getElementById('g'); Plotly.purge(g);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const t0 = performance.now(); await Plotly.newPlot(g, f.data, f.layout); const t1 = performance.now();
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const s = g._fullLayout._size, m = f.layout.margin;
    return [t1 - t0, performance.now() - t0, ['l', 'r', 'b'].every(k => Math.round(s[k]) === m[k])]; }"""


def built(kind: str, tokens: int) -> tuple[dict, int]:
    """The figure (as JSON) and the width of the box it is drawn in."""
    rng = np.random.default_rng(0)
    queries, keys = (PIECES * 8)[:tokens], (KEYS * 8)[:tokens + 1]
    if kind == "head":
        weights = rng.dirichlet(np.ones(len(keys)), size=len(queries))
        return attention_heatmap(weights, queries, keys, "Cross-attention · layer 2 · head 3", height=600), 1000
    if kind == "column":
        width = round((MAIN_WIDTH - 16) * 3 / 5)                # decoding_steps: st.columns([2, 3])
        weights = rng.dirichlet(np.ones(len(keys)), size=1)
        return attention_heatmap(weights, ["step 4 → ▁klettert"], keys, "Cross-attention over the source",
                                 height=220, width=width), width
    if kind == "beam":
        history = []
        for t in range(tokens):
            history.append([((PIECES * 8)[:t + 1], float(-rng.uniform(0.1, 5)), None if t == 0 else int(rng.integers(4)),
                             False) for _ in range(4)])
        return beam_tree_figure(history, (tokens - 1, 0), title="Beam search"), 1000
    if kind == "ablation":
        before, after = rng.uniform(0.3, 1, tokens), rng.uniform(0, 1, tokens)
        return probability_change_figure(queries, before, after, title="Probability of each original piece"), 1000
    raise ValueError(f"unknown figure {kind!r}")


def figures(kind: str, tokens: int) -> tuple[dict, int]:
    fig, width = built(kind, tokens)
    one_pass = json.loads(fig.to_json())
    before = json.loads(json.dumps(one_pass))
    before["layout"]["margin"] = {**before["layout"]["margin"], "l": 10, "r": 10, "b": 10}
    return {"one pass (our margins)": one_pass, "10 px margins (automargin grows them)": before}, width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=14)
    parser.add_argument("--figure", choices=["head", "column", "beam", "ablation"], default="head")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    figs, width = figures(args.figure, args.tokens)
    times = {name: [] for name in figs}
    painted = {name: [] for name in figs}
    kept = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.set_content(f"<div id=g style='width:{width}px'></div>")
        page.add_script_tag(content=script)
        for run in range(args.repeats + 4):
            for name, fig in figs.items():
                ms, paint_ms, unchanged = page.evaluate(DRAW_JS, fig)
                kept[name] = unchanged
                if run >= 4:
                    times[name].append(ms)
                    painted[name].append(paint_ms)
        browser.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    to_paint = {name: statistics.median(values) for name, values in painted.items()}
    for name, ms in medians.items():
        print(f"  {name:40s} newPlot {ms:6.1f} ms, painted after {to_paint[name]:5.1f} ms "
              f"(whole 60 Hz frames)  margins kept as given: {kept[name]}")
    first, second = medians.values()
    paint_first, paint_second = to_paint.values()
    print(f"  one pass / two passes: newPlot {first / second:.2f}x, painted {paint_first / paint_second:.2f}x  ({args.figure}, plotly package {plotly.__version__}, "
          f"{args.tokens} pieces, median of {args.repeats})")


if __name__ == "__main__":
    main()
