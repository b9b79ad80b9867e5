"""Memory of a Streamlit process serving a model of opus-mt-en-de's shape (issue 9).

    python benchmarks/bench_hf_app_memory.py [--translations 100] [--wave 5] [--steps 20]

Builds the random-weight MarianMTModel of benchmarks/bench_hf.py (6+6 layers, d_model 512, 8 heads,
vocabulary 58,101), puts it in a models directory, starts the app on it (ATLAS_MODELS_DIR), and
opens --translations sessions over Streamlit's websocket protocol, each a different sentence (so
each is a new translation, not a cached one) in one of the app's views. RSS of the server process
is sampled as it goes. Goal: under 1.5 GB after 100 translations.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_hf import build  # noqa: E402
from serving.client import crowd  # noqa: E402
from serving.servers import AppServer  # noqa: E402

VIEWS = ("Heatmap", "Layer grid", "Overview", "Decoding steps", "Head summary", "Rollout",
         "Positional encodings", "Ablation")
GOAL_MB = 1500


def sentences(count: int) -> list[str]:
    """Distinct English sentences: the examples, then numbered variants of them."""
    rows = list(csv.DictReader(open(REPO / "pretrained" / "examples.tsv", encoding="utf-8"), delimiter="\t"))
    base = [row["en"] for row in rows]
    return [base[i % len(base)] if i < len(base) else f"{base[i % len(base)][:-1]} number {i}."
            for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--translations", type=int, default=100)
    parser.add_argument("--wave", type=int, default=5, help="sessions at once")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        models.mkdir()
        built = build(Path(tmp), args.steps)
        built.rename(models / "opus-shaped")
        queries = [urlencode({"model": "opus-shaped", "sentence": text, "view": VIEWS[i % len(VIEWS)]})
                   for i, text in enumerate(sentences(args.translations))]
        with AppServer("app.py", env={"ATLAS_MODELS_DIR": str(models)}) as app:
            print(f"RSS after start: {app.rss_mb():.0f} MB", flush=True)
            failures, peak = 0, 0.0
            for start in range(0, len(queries), args.wave):
                records = asyncio.run(crowd(app.url, queries[start:start + args.wave], timeout=300))
                # a failure: an error on the page, or a run that did not end (Ablation draws no
                # chart until heads are ticked, so a missing chart is not one)
                bad = [r for r in records if r.errors or r.finished is None]
                failures += len(bad)
                for record in bad:
                        print("  failed:", record.query[-60:], record.errors[:2])
                rss = app.rss_mb()
                peak = max(peak, rss)
                done = start + len(records)
                if done % 20 == 0 or done == len(queries):
                    print(f"  {done:>4} translations: RSS {rss:.0f} MB, failures so far {failures}", flush=True)
            final = app.rss_mb()
    print(f"RSS after {len(queries)} translations with an opus-mt-en-de-shaped model: {final:.0f} MB "
          f"(peak sampled {peak:.0f} MB; goal < {GOAL_MB} MB); failures {failures}")


if __name__ == "__main__":
    main()
