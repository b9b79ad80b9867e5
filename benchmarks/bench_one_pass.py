"""A head heatmap drawn in one pass against the same figure with 10 px margins, in Chromium.

    python benchmarks/bench_one_pass.py [--repeats 20] [--tokens 14]

viz.attention_heatmap's figures bring margins that already hold their tick labels, axis titles and
colour bar (viz._base.matrix_margins). With 10 px margins, as before, plotly.js's automargin finds
the room too small after drawing and draws the whole figure again. Both figures are the same
heatmap of random attention (rows sum to 1) over Multi30k-like pieces; each run: `Plotly.newPlot`
until two animation frames have passed (the drawing painted), round-robin, after 4 unmeasured runs.
Reported: medians and their ratio. The plotly.js is the plotly package's bundle (plotly.min.js), on
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
from viz import attention_heatmap  # noqa: E402

PIECES = ["▁Zwei", "▁Hunde", "▁spielen", "▁im", "▁Schnee", ".", "</s>"]
KEYS = ["▁Two", "▁dogs", "▁play", "▁in", "▁the", "▁snow", ".", "</s>"]
DRAW_JS = """async (f) => { const g = document.getElementById('g'); Plotly.purge(g);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const t0 = performance.now(); await Plotly.newPlot(g, f.data, f.layout);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const s = g._fullLayout._size, m = f.layout.margin;
    return [performance.now() - t0, ['l', 'r', 'b'].every(k => Math.round(s[k]) === m[k])]; }"""


def figures(tokens: int) -> dict:
    rng = np.random.default_rng(0)
    queries = (PIECES * 8)[:tokens]
    keys = (KEYS * 8)[:tokens + 1]
    weights = rng.dirichlet(np.ones(len(keys)), size=len(queries))
    one_pass = json.loads(attention_heatmap(weights, queries, keys, "Cross-attention · layer 2 · head 3",
                                            height=600).to_json())
    before = json.loads(json.dumps(one_pass))
    before["layout"]["margin"] = {**before["layout"]["margin"], "l": 10, "r": 10, "b": 10}
    return {"one pass (our margins)": one_pass, "10 px margins (automargin grows them)": before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=14)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    figs = figures(args.tokens)
    times = {name: [] for name in figs}
    kept = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.set_content("<div id=g style='width:1000px'></div>")
        page.add_script_tag(content=script)
        for run in range(args.repeats + 4):
            for name, fig in figs.items():
                ms, unchanged = page.evaluate(DRAW_JS, fig)
                kept[name] = unchanged
                if run >= 4:
                    times[name].append(ms)
        browser.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, ms in medians.items():
        print(f"  {name:40s} {ms:6.1f} ms  margins kept as given: {kept[name]}")
    first, second = medians.values()
    print(f"  one pass / two passes: {first / second:.2f}x  (plotly package {plotly.__version__}, "
          f"{args.tokens} query pieces, median of {args.repeats})")


if __name__ == "__main__":
    main()
