"""Mean piece probability of in-domain and out-of-domain sentences, for the app's "probably outside
what the model knows" note (atlas_ui.server.settings.LOW_CONFIDENCE).

    python benchmarks/bench_confidence.py [--threshold 0.35]

In domain: the caption-style sentences of pretrained/examples.tsv. Out of domain: sentences that
describe no scene. Prints, per shipped model, the lowest and median mean probability of each group
and how many sentences of each the threshold flags.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402

OUT_OF_DOMAIN = {
    "en": ["I think attention is not explanation.", "The meeting was postponed because of the strike.",
           "The central bank raised interest rates again.", "Please send me the invoice by Friday."],
    "de": ["Das Treffen wurde wegen des Streiks verschoben.", "Ich glaube, Aufmerksamkeit ist keine Erklärung.",
           "Die Zentralbank hat die Zinsen wieder erhöht.", "Bitte schicken Sie mir die Rechnung bis Freitag."],
}


def mean_prob(translator, text: str) -> float:
    out = translator.translate(text, capture=False)
    return float(np.mean([step.prob for step in out.steps]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=0.35)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(REPO / "pretrained" / "examples.tsv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    print("| model | group | n | lowest | median | flagged (< %.2f) |" % args.threshold)
    print("|---|---|---|---|---|---|")
    for name in ("en-de", "de-en"):
        translator = Translator.load(REPO / "pretrained" / name, device="cpu")
        source = translator.source_lang
        for group, texts in (("examples", [r[source] for r in rows if r.get(source)]),
                             ("out of domain", OUT_OF_DOMAIN[source])):
            probs = np.array([mean_prob(translator, t) for t in texts])
            print(f"| {name} | {group} | {len(probs)} | {probs.min():.2f} | {np.median(probs):.2f} | "
                  f"{int((probs < args.threshold).sum())} |")


if __name__ == "__main__":
    main()
