"""Figure building vs translation, side by side in one run (medians over repeats).

    python benchmarks/bench_viz.py [--model pretrained/en-de] [--repeats 9]

Issue 4's goal: for a ~20-piece sentence, building the figures (including Plotly's JSON
serialisation, which st.plotly_chart does) takes well under the translation itself.
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


def build_figures(out) -> list:
    att = out.attention
    src, fed, produced = out.source_tokens, out.target_tokens, out.output_tokens
    figures = [
        viz.attention_heatmap(att.cross[0, 0], produced, src, title="cross"),
        viz.overview_figure(att.encoder_self, src, src),
        viz.overview_figure(att.decoder_self, produced, fed),
        viz.overview_figure(att.cross, produced, src),
        viz.head_grid_figure(att.cross[0], produced, src),
        viz.topk_bar_figure(out.steps[0].top_k, chosen=out.steps[0].token),
        viz.mask_figure(causal_mask(len(produced)), produced, fed),
        viz.positional_encoding_figure(out.positional_encoding[: len(src)], src),
    ]
    return [fig.to_json() for fig in figures]


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


if __name__ == "__main__":
    main()
