"""The tiled maps' hover from row and column labels against a hover string per cell, in Chromium.

    python benchmarks/bench_tiled_hover.py [--repeats 15] [--tokens 20 64] [--figure overview grid]

viz.overview_figure and viz.head_grid_figure name each cell in the hover from one label per grid
row and one per column, on hidden category axes laid over the ticked ones (viz.overview.label_axes).
Before, every cell carried its own hover string. This builds each figure as the app does (3 layers
x 8 heads of random attention, Multi30k-like pieces) and the same figure as it was before: the
heatmap back on the ticked axes, with text[r][c] = the cell's hover (row label, column label, and for
the head grid its head). Each round, in one Chromium page: the JSON text is parsed (JSON.parse, as
the browser does with a chart's spec) and drawn (`Plotly.newPlot` until two animation frames),
alternating, after 3 unmeasured rounds. Reported: the spec's bytes (what each follower of a room
receives) and the median parse + draw, with their ratios. The plotly.js is the plotly package's
bundle; needs Playwright and Debian's /usr/bin/chromium; nothing goes online.
"""
from __future__ import annotations

import argparse
import base64
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
from viz import head_grid_figure, overview_figure  # noqa: E402

PIECES = ["▁Zwei", "▁Hunde", "▁spielen", "▁im", "▁Schnee", ".", "</s>", "▁ein", "▁Mann", "▁fährt"]
DRAW_JS = """async (text) => { const g = document.getElementById('g'); Plotly.purge(g);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const t0 = performance.now(); const f = JSON.parse(text); await Plotly.newPlot(g, f.data, f.layout);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - t0; }"""


def built(kind: str, tokens: int) -> dict:
    """The figure as the app builds it, as a dict of its JSON."""
    rng = np.random.default_rng(0)
    pieces = (PIECES * (tokens // len(PIECES) + 1))[:tokens]
    weights = rng.dirichlet(np.ones(tokens), size=(3, 8, tokens)).astype(np.float32)      # (L, H, Q, K)
    if kind == "overview":
        fig = overview_figure(weights, pieces, pieces, kind_label="Cross-attention")
    else:
        fig = head_grid_figure(weights[1], pieces, pieces, "Cross-attention · layer 1 · all heads", layer=1)
    return json.loads(fig.to_json())


def per_cell_text(figure: dict) -> dict:
    """The same figure with the hover as before: the heatmap on the ticked axes, a string per cell."""
    before = json.loads(json.dumps(figure))
    heat, layout = before["data"][0], before["layout"]
    rows, cols = heat.pop("y"), heat.pop("x")
    for key in ("xaxis", "yaxis"):
        heat.pop(key)
        layout.pop(key + "2")
    heads = heat.pop("customdata", None)
    if heads is not None:                  # the head grid: its head per cell (typed array) into the text
        shape = [int(n) for n in heads["shape"].split(",")]
        heads = np.frombuffer(base64.b64decode(heads["bdata"]), dtype=heads["dtype"]).reshape(shape)
    prefix = "Layer 1 · " if heads is not None else ""
    text = [[("" if row.startswith("gap") or col.startswith("gap") else
              (f"{prefix}head {heads[r][c]}<br>" if heads is not None else "") + f"{row}<br>{col}")
             for c, col in enumerate(cols)] for r, row in enumerate(rows)]
    heat["text"] = text
    heat["hovertemplate"] = "%{text}<br>weight %{z:.4f}<extra></extra>"
    for key in ("xaxis", "yaxis"):                        # as before: the heatmap sets the extent
        layout[key].pop("range")
        layout[key].pop("autorange")
    layout["yaxis"]["autorange"] = "reversed"
    return before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--tokens", type=int, nargs="+", default=[20, 64])
    parser.add_argument("--figure", nargs="+", choices=["overview", "grid"], default=["overview", "grid"])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    cases = {}
    for kind in args.figure:
        for tokens in args.tokens:
            ours = built(kind, tokens)
            cases[(kind, tokens)] = {"labels": json.dumps(ours), "per-cell text": json.dumps(per_cell_text(ours))}
    times = {(case, name): [] for case, specs in cases.items() for name in specs}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.set_content("<div id=g style='width:1000px'></div>")
        page.add_script_tag(content=script)
        for run in range(args.repeats + 3):
            for case, specs in cases.items():
                for name, spec in specs.items():
                    ms = page.evaluate(DRAW_JS, spec)
                    if run >= 3:
                        times[(case, name)].append(ms)
        browser.close()
    print(f"plotly package {plotly.__version__}, median of {args.repeats}, parse + draw until painted")
    print("| figure | pieces | spec: labels / per-cell text | parse + draw: labels / per-cell text |")
    print("|---|---|---|---|")
    for (kind, tokens), specs in cases.items():
        size = {name: len(spec.encode()) for name, spec in specs.items()}
        ms = {name: statistics.median(times[((kind, tokens), name)]) for name in specs}
        print(f"| {kind} | {tokens} | {size['labels'] / 1e3:.0f} / {size['per-cell text'] / 1e3:.0f} KB "
              f"({size['labels'] / size['per-cell text']:.2f}x) | {ms['labels']:.1f} / {ms['per-cell text']:.1f} ms "
              f"({ms['labels'] / ms['per-cell text']:.2f}x) |")


if __name__ == "__main__":
    main()
