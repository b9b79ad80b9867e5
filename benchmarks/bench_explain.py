"""Cost of explain=True, measured side by side in one run (medians over repeats).

    python benchmarks/bench_explain.py [--model pretrained/en-de] [--threads 2] [--repeats 15]

Prints a Markdown table: translate(explain=True) against translate(capture=True) on a ~20-piece
sentence (goal <= 3x, saliency included), and where the extra time goes (the decomposition +
saliency pass alone). Calls alternate, so load on the machine hits both sides alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.explain.explanation import explain_run  # noqa: E402

SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street near the old market."


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(fns: dict, repeats: int) -> dict:
    """Run each function once per round, in turn, and return the median time of each."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(REPO / "pretrained" / "en-de"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--sentence", default=SENTENCE)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.load(args.model, device="cpu")
    out = tr.translate(args.sentence, capture=True)
    fed = tr.engine.tokenizer.piece_ids(out.target_tokens)         # the start piece, then output_ids[:-1]
    fns = {
        "translate(capture=False)": lambda: tr.translate(args.sentence, capture=False),
        "translate(capture=True)": lambda: tr.translate(args.sentence, capture=True),
        "translate(explain=True)": lambda: tr.translate(args.sentence, capture=True, explain=True),
        "explanation pass alone": lambda: explain_run(tr, out.source_ids, fed, out.output_ids),
    }
    for fn in fns.values():        # warm up
        fn()
    medians = alternate(fns, args.repeats)
    base = medians["translate(capture=True)"]
    print(f"model {args.model}: {len(out.source_ids)} source pieces, {len(out.output_ids)} output pieces, "
          f"threads {args.threads}, median of {args.repeats}")
    print()
    print("| measurement | median ms | / capture=True | goal |")
    print("|---|---|---|---|")
    for name, value in medians.items():
        goal = "<= 3x" if name == "translate(explain=True)" else ""
        print(f"| {name} | {value * 1e3:.1f} | {value / base:.2f}x | {goal} |")
    ratio = medians["translate(explain=True)"] / base
    print()
    print(f"explain=True / capture=True: {ratio:.2f}x ({'meets' if ratio <= 3 else 'misses'} the <= 3x goal)")


if __name__ == "__main__":
    main()
