"""Activation patching: a full sweep of a 12-piece sentence (issue 53), timed in one process.

    python benchmarks/bench_patch.py [--model pretrained/en-de] [--threads 2] [--repeats 7] [--json out.json]

A full sweep is one `tr.patch(clean, corrupt)`: the clean translation (greedy), the clean forced
run recording every point, the corrupt forced run, and every patched run (each encoder layer at
each source position, each head of every kind at every position) in batched passes. Goal: median
<= 3 s for pretrained/en-de on 2 cores. Also printed: the patched runs and passes, the same sweep
with one pass per patched run (what batching saves), and the load average before and after (2
shared cores: a busy neighbour slows a two-thread run most; compare like with like).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.patching import PatchRun, encoder_runs, head_runs  # noqa: E402

GOAL = 3.0
# 12 pieces each (then </s>): one word edited, the translation changes at that word
CLEAN = "Two young girls in pink dresses are playing in the park."
CORRUPT = "Two young boys in pink dresses are playing in the park."


def median_seconds(fn, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "pretrained" / "en-de"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.load(args.model, device="cpu")
    pieces = len(tr.encode_source(CLEAN)[0]) - 1
    load_before = os.getloadavg()[0]
    tr.patch(clean=CLEAN, corrupt=CORRUPT)                                   # warm-up
    sweep, times = median_seconds(lambda: tr.patch(clean=CLEAN, corrupt=CORRUPT), args.repeats)
    res = tr.patch(clean=CLEAN, corrupt=CORRUPT)
    run = PatchRun(tr, CLEAN, CORRUPT)
    runs = encoder_runs(tr, len(run.corrupt_ids)) + [r for kind in ("encoder_self", "decoder_self", "cross")
                                                     for r in head_runs(tr, kind)]
    passes = []
    forward = tr.engine.teacher_forced
    tr.engine.teacher_forced = lambda *a, **k: passes.append(len(a[0])) or forward(*a, **k)
    run.values(runs)
    tr.engine.teacher_forced = forward
    one_by_one, _ = median_seconds(lambda: run.values(runs, budget=1), max(1, args.repeats // 3))
    batched, _ = median_seconds(lambda: run.values(runs), args.repeats)
    load_after = os.getloadavg()[0]
    step_piece = res.output_tokens[res.step]
    report = {
        "model": args.model, "threads": args.threads, "clean": CLEAN, "corrupt": CORRUPT, "source_pieces": pieces,
        "step": res.step, "clean_piece": step_piece, "corrupt_piece": tr.engine.tokenizer.id_to_piece(res.corrupt_piece_id),
        "patched_runs": len(runs), "passes": len(passes), "sweep_s": sweep, "sweep_runs_s": times,
        "patched_batched_s": batched, "patched_one_pass_each_s": one_by_one,
        "load_before": load_before, "load_after": load_after}
    threads = f"{args.threads} thread{'s' if args.threads > 1 else ''}"
    print(f"| {Path(args.model).name}, {threads}, {pieces} pieces + </s> | median of {args.repeats} | goal |")
    print("|---|---|---|")
    print(f"| full patching sweep (tr.patch) | {sweep:.3f} s | <= {GOAL:.0f} s |")
    print(f"| its {len(runs)} patched runs, batched in {len(passes)} passes | {batched:.3f} s | |")
    print(f"| the same runs, one pass each | {one_by_one:.3f} s | |")
    print(f"step {res.step}: {step_piece!r} vs {report['corrupt_piece']!r}; load average {load_before:.2f} -> {load_after:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
