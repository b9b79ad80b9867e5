"""Training throughput with glibc malloc vs jemalloc, same batches, alternated subprocesses.

    python benchmarks/bench_train_alloc.py [--batches 30] [--threads 2] [--rounds 3]

Why: glibc returns each large activation to the OS, so every step page-faults; jemalloc
with decay disabled keeps the pages. `python -m transformer train` re-execs under jemalloc.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def worker(batches: int, threads: int) -> None:
    import torch
    sys.path.insert(0, str(REPO))
    from transformer import Translator
    from transformer.training.data import DEFAULT_DATA_DIR, collate, read_split, token_batches
    from transformer.model import Transformer
    from transformer.training.train import train_step
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tr = Translator.load(REPO / "pretrained" / "en-de", device="cpu")
    src = [i[:127] + [3] for i in tr.engine.tokenizer.encode_batch(read_split(DEFAULT_DATA_DIR, "train", "en")[:6000])]
    tgt = [i[:127] for i in tr.engine.tokenizer.encode_batch(read_split(DEFAULT_DATA_DIR, "train", "de")[:6000])]
    chosen = token_batches(src, tgt, 2500, torch.Generator().manual_seed(0))[: batches + 1]
    model = Transformer(tr.config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    train_step(model, optimizer, *collate(chosen[0], src, tgt), 0.1, 1.0, 1e-4)    # warm-up
    tokens, start = 0, time.perf_counter()
    for batch in chosen[1:]:
        tokens += train_step(model, optimizer, *collate(batch, src, tgt), 0.1, 1.0, 1e-4)[1]
    print(tokens / (time.perf_counter() - start))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        return worker(args.batches, args.threads)
    if not os.path.exists(JEMALLOC):
        sys.exit(f"{JEMALLOC} not found: apt-get install -y libjemalloc2")
    command = [sys.executable, __file__, "--worker", "--batches", str(args.batches), "--threads", str(args.threads)]
    env_glibc = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    env_jemalloc = dict(env_glibc, LD_PRELOAD=JEMALLOC,
                        MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1,background_thread:false")
    speeds = {"glibc": [], "jemalloc": []}
    for _ in range(args.rounds):
        for name, env in (("glibc", env_glibc), ("jemalloc", env_jemalloc)):
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            speeds[name].append(float(out.stdout.strip().splitlines()[-1]))
    g, j = statistics.median(speeds["glibc"]), statistics.median(speeds["jemalloc"])
    print(f"{args.batches} batches of ~2,500 tokens, {args.threads} threads, median of {args.rounds} rounds")
    print("| allocator | target tokens/s | ratio |")
    print("|---|---|---|")
    print(f"| glibc | {g:.0f} | 1.00x |")
    print(f"| jemalloc (no decay) | {j:.0f} | {j / g:.2f}x |")


if __name__ == "__main__":
    main()
