"""Run every example of pretrained/examples.tsv through the shipped models, to check what each one
is said to show: prints, per model, the greedy translation beside the reference, sentence chrF,
the mean piece probability (under settings.LOW_CONFIDENCE the app says the sentence is probably
outside what the model knows) and the row's failure note for that direction (empty: the model
handles what the example shows).

    python benchmarks/check_examples.py [--models en-de de-en]

How the examples were chosen: each candidate was run with this script and read; a row without a
failure note for a direction is one whose translation does what its `shows` column says. Rows kept
for what goes wrong carry a note that says what to look at.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import sacrebleu

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from atlas_ui.server.settings import LOW_CONFIDENCE  # noqa: E402
from transformer import Translator  # noqa: E402

EXAMPLES = REPO / "pretrained" / "examples.tsv"


def read_examples(path: Path = EXAMPLES) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def check(translator, rows: list[dict]) -> list[dict]:
    """One dict per example: translation, reference, chrF, mean probability, failure note."""
    source, target = translator.source_lang, translator.target_lang
    checked = []
    for row in rows:
        out = translator.translate(row[source], beam_size=1)
        mean = float(np.mean([step.prob for step in out.steps]))
        chrf = sacrebleu.sentence_chrf(out.text, [row[target]]).score
        checked.append({"source": row[source], "translation": out.text, "reference": row[target],
                        "chrf": chrf, "mean_prob": mean, "low_confidence": mean < LOW_CONFIDENCE,
                        "failure": (row.get(f"failure_{source}_{target}") or "").strip(), "shows": row["shows"]})
    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["en-de", "de-en"])
    args = parser.parse_args()
    rows = read_examples()
    for name in args.models:
        translator = Translator.load(REPO / "pretrained" / name, device="cpu")
        results = check(translator, rows)
        trusted = [r for r in results if not r["failure"]]
        print(f"\n## {name}: {len(trusted)} of {len(results)} examples without a failure note")
        print("| | chrF | mean p | translation | reference | failure note |\n|---|---|---|---|---|---|")
        for i, r in enumerate(results):
            mark = "⚠" if r["failure"] else "✓"
            print(f"| {mark} {i} | {r['chrf']:.1f} | {r['mean_prob']:.2f}{' (low)' if r['low_confidence'] else ''} | "
                  f"{r['translation']} | {r['reference']} | {r['failure']} |")
        for group, members in (("without a note", trusted), ("failure cases", [r for r in results if r["failure"]])):
            if members:
                print(f"{group}: mean chrF {np.mean([r['chrf'] for r in members]):.1f}, "
                      f"mean p {np.mean([r['mean_prob'] for r in members]):.2f}, "
                      f"lowest p {min(r['mean_prob'] for r in members):.2f}")


if __name__ == "__main__":
    main()
