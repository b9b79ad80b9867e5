"""Figure building vs translation, side by side in one run (medians over repeats).

    python benchmarks/bench_viz.py [--model pretrained/en-de] [--repeats 9]

Issue 4's goal: for a ~20-piece sentence, building the figures (including Plotly's JSON
serialisation, which st.plotly_chart does) takes well under the translation itself.
A second table times each builder on its own, plus overview_figure at 128 source pieces.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import viz  # noqa: E402
from transformer import Translator  # noqa: E402
from transformer.masks import causal_mask  # noqa: E402

SENTENCE = "A young woman with a green hat and a brown dog is sitting on a bench."
LONG_PIECES, LONG_LAYERS, LONG_HEADS = 128, 3, 8


def figure_builders(out) -> dict:
    """Name -> zero-argument builder, for the 8 figures the app shows for one sentence."""
    att = out.attention
    src, fed, produced = out.source_tokens, out.target_tokens, out.output_tokens
    return {
        "attention_heatmap (cross, one head)": lambda: viz.attention_heatmap(
            att.cross[0, 0], produced, src, title="cross"),
        "overview_figure (encoder)": lambda: viz.overview_figure(att.encoder_self, src, src),
        "overview_figure (decoder)": lambda: viz.overview_figure(att.decoder_self, produced, fed),
        "overview_figure (cross)": lambda: viz.overview_figure(att.cross, produced, src),
        "head_grid_figure (cross, layer 0)": lambda: viz.head_grid_figure(
            att.cross[0], produced, src),
        "topk_bar_figure": lambda: viz.topk_bar_figure(
            out.steps[0].top_k, chosen=out.steps[0].token),
        "mask_figure (causal)": lambda: viz.mask_figure(causal_mask(len(produced)), produced, fed),
        "positional_encoding_figure": lambda: viz.positional_encoding_figure(
            out.positional_encoding[: len(src)], src),
    }


def long_builder():
    """overview_figure for a 128-piece sentence (3 layers x 8 heads, random rows)."""
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(LONG_PIECES), size=(LONG_LAYERS, LONG_HEADS, LONG_PIECES))
    weights = weights.astype(np.float32)
    pieces = [f"▁w{i % 37}" for i in range(LONG_PIECES - 1)] + ["</s>"]
    return lambda: viz.overview_figure(weights, pieces, pieces)


def build_figures(out) -> list:
    return [build().to_json() for build in figure_builders(out).values()]


def time_builder(build, repeats: int) -> tuple[float, float]:
    """Median seconds to build the figure and to serialise it (fig.to_json)."""
    build().to_json()                                       # warm-up
    build_t, json_t = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        fig = build()
        built = time.perf_counter()
        fig.to_json()
        build_t.append(built - start)
        json_t.append(time.perf_counter() - built)
    return statistics.median(build_t), statistics.median(json_t)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(REPO / "pretrained" / "en-de"))
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.load(args.model, device="cpu")
    out = tr.translate(SENTENCE, capture=True)
    build_figures(out)                                      # warm-up (plotly validators)
    translate_t, build_t = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        out = tr.translate(SENTENCE, capture=True)
        translate_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        build_figures(out)
        build_t.append(time.perf_counter() - start)
    t, b = statistics.median(translate_t), statistics.median(build_t)
    print(f"sentence: {len(out.source_tokens)} source pieces, {len(out.output_tokens)} output pieces; "
          f"{args.repeats} repeats, {args.threads} threads")
    print()
    print("| measurement | median | ratio to translation |")
    print("|---|---|---|")
    print(f"| translate with capture | {t * 1e3:.1f} ms | 1.00x |")
    print(f"| build 8 figures + JSON (heatmap, 3 overviews, grid, top-k, mask, PE) | {b * 1e3:.1f} ms | {b / t:.2f}x |")

    builders = dict(figure_builders(out))
    long_name = f"overview_figure ({LONG_PIECES} pieces, {LONG_LAYERS}x{LONG_HEADS} heads)"
    builders[long_name] = long_builder()
    print()
    print("| figure | build | to_json | total |")
    print("|---|---|---|---|")
    for name, build in builders.items():
        built, serialised = time_builder(build, args.repeats)
        print(f"| {name} | {built * 1e3:.1f} ms | {serialised * 1e3:.1f} ms | "
              f"{(built + serialised) * 1e3:.1f} ms |")


if __name__ == "__main__":
    main()
