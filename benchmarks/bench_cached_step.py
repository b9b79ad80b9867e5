"""What bounds a cached greedy step: reading the weights, or calling 25 small linears.

    python benchmarks/bench_cached_step.py [--model pretrained/en-de] [--threads 2] [--steps 200]

A cached step of our decoder (transformer/model.py:decode_step) runs each decoder layer's q/k/v/out
self-attention projections, the cross-attention's q and out (its keys and values are cached), the
two feed-forward linears, and the output projection: 25 linears on one row. This times those same
calls on the model's own weights, in a step's order (every weight read once a step, as decoding
does), against each call repeated on its own weight while that weight is hot in the CPU's caches.
The first over the second is what the memory costs; their difference, over the weights' size, is
the bandwidth a step gets. bench_core's "recomputed / cached greedy" ratio moves with it.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402


def step_linears(model) -> list:
    """The linears one cached decode step calls, in its order."""
    linears = []
    for layer in model.decoder_layers:
        own, cross, feed_forward = layer.self_attention, layer.cross_attention, layer.feed_forward
        linears += [own.q_proj, own.k_proj, own.v_proj, own.out_proj, cross.q_proj, cross.out_proj,
                    feed_forward.linear1, feed_forward.linear2]
    return linears + [model.output_projection]


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(REPO / "pretrained" / "en-de"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = Translator.load(args.model, device="cpu").engine.model
    linears = step_linears(model)
    rows = [torch.randn(1, 1, linear.in_features) for linear in linears]           # (B, 1, D)
    megabytes = sum(p.numel() * p.element_size() for linear in linears for p in linear.parameters()) / 1e6
    for _ in range(20):
        [linear(row) for linear, row in zip(linears, rows)]
    start = time.perf_counter()
    for _ in range(args.steps):
        [linear(row) for linear, row in zip(linears, rows)]
    walked = (time.perf_counter() - start) / args.steps
    start = time.perf_counter()
    for linear, row in zip(linears, rows):
        for _ in range(args.steps):
            linear(row)
    hot = (time.perf_counter() - start) / args.steps
    print(f"{len(linears)} linears a cached step, {megabytes:.1f} MB of weights; {args.threads} threads")
    print(f"  in a step's order (each weight read once a step): {walked * 1e3:.2f} ms a step, "
          f"{megabytes / 1e3 / walked:.1f} GB/s")
    print(f"  each on its own weight, hot in cache:            {hot * 1e3:.2f} ms a step")
    print(f"  the memory's share of a step's linears: {1 - hot / walked:.0%}")


if __name__ == "__main__":
    main()
