"""Head roles over the first N Multi30k val pairs: how long the analysis takes (issue 34: 1,000 pairs
in <= 60 s on 2 cores), and the alignment figures it finds, for both shipped models.

    python benchmarks/bench_head_roles.py [--n 1000] [--threads 2] [--repeats 3] [--data-dir DIR]

Per model: loading the model, counting piece frequencies over Multi30k train (both sides, through
the model's tokenizer), and `head_roles.analyze` (the batched pass with every head's weights,
Kobayashi norms and ALTI+, the role counts, every method's AER on both halves and the fitted
combination), the median of --repeats runs. Reference: the silver eflomal alignment (cached
under runs/word_align after its first computation, which is not timed here).
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
from transformer.analysis.head_roles import analyze, load_corpus  # noqa: E402
from transformer.analysis.heads_cli import frequencies  # noqa: E402
from transformer.training.data import resolve_data_dir  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--models", nargs="+", default=["pretrained/en-de", "pretrained/de-en"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data_dir = resolve_data_dir(args.data_dir)
    print(f"threads {args.threads}, device {'cuda' if torch.cuda.is_available() else 'cpu'}, n {args.n}")
    for model in args.models:
        started = time.perf_counter()
        tr = Translator.load(REPO / model)
        loaded = time.perf_counter() - started
        corpus = load_corpus(data_dir, "val", tr.source_lang, tr.target_lang, limit=args.n)
        started = time.perf_counter()
        counted, _ = frequencies(tr, data_dir, "val")
        counting = time.perf_counter() - started
        times, result = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = analyze(tr, corpus, counted, {})
            times.append(time.perf_counter() - started)
        analysis = statistics.median(times)
        head, truly = result["best_alignment_head"], result["best_head_on_held_out"]
        print(f"{model}: {len(corpus.sources)} pairs; load {loaded:.1f} s, frequencies {counting:.1f} s, "
              f"analysis {analysis:.1f} s (median of {args.repeats}: {', '.join(f'{t:.1f}' for t in times)}); "
              f"total {loaded + counting + analysis:.1f} s")
        print(f"  held-out AER: head named on fit {head['layer']}.{head['head']} ({head['rule']}) "
              f"{head['aer_held_out']}, truly best head {truly['layer']}.{truly['head']} ({truly['rule']}) "
              f"{truly['aer_held_out']}; method {result['method']} ({result['rule']}) {result['method_aer_held_out']}")
        wanted = ["combination", "alti+"] + [f"layer {i}" for i in range(tr.config.n_decoder_layers)] \
            + [f"norm {i}" for i in range(tr.config.n_decoder_layers)]
        for row in result["methods"]:
            if row["method"] in wanted:
                print(f"    {row['method']:12s} {row['rule']:6s} fit {row['aer_fit']:6.2f}  held out {row['aer_held_out']:6.2f}")


if __name__ == "__main__":
    main()
