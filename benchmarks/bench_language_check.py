"""How often tr.language_check flags wrong-language input, and how often it cries wolf.

For both shipped models (pretrained/en-de reads en, pretrained/de-en reads de): the first N
sentences of the Multi30k VAL split in en, de and fr (the profiles come from train; test is never
read). Goals: flagged >= 95% when the language is wrong, false alarms <= 1% when it is right.

    python benchmarks/bench_language_check.py [--data-dir ../shared/data/multi30k] [--n 200]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.language import read_lines  # noqa: E402

LANGS = ("en", "de", "fr")


def rates(tr, sentences: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    """{language: (flagged, n)} for one translator."""
    return {lang: (sum(not tr.language_check(s).matches for s in lines), len(lines))
            for lang, lines in sentences.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args(argv)
    sentences = {lang: read_lines(Path(args.data_dir), "val", lang)[: args.n] for lang in LANGS}
    print("| model | reads | val text | n | flagged | rate | goal |")
    print("|---|---|---|---|---|---|---|")
    ok, checks, seconds = True, 0, 0.0
    for name in ("en-de", "de-en"):
        tr = Translator.load(REPO / "pretrained" / name, device="cpu")
        started = time.perf_counter()
        result = rates(tr, sentences)
        seconds += time.perf_counter() - started
        for lang, (flagged, n) in result.items():
            checks += n
            right = lang == tr.source_lang
            rate = flagged / n
            good = rate <= 0.01 if right else rate >= 0.95
            ok &= good
            goal = "false alarms <= 1%" if right else "flagged >= 95%"
            print(f"| {name} | {tr.source_lang} | {lang} | {n} | {flagged} | {rate:.1%} | {goal}: "
                  f"{'met' if good else 'MISSED'} |")
    words = sorted(len(s.split()) for lines in sentences.values() for s in lines)
    print(f"{checks} checks, {1000 * seconds / checks:.2f} ms per check (median sentence {words[len(words) // 2]} "
          f"words)")
    short = {lang: [" ".join(s.split()[:3]) for s in lines] for lang, lines in sentences.items()}
    for name in ("en-de", "de-en"):      # not a goal: the first three words of each sentence only
        tr = Translator.load(REPO / "pretrained" / name, device="cpu")
        result = rates(tr, short)
        print(f"first 3 words only, {name}: " + ", ".join(
            f"{lang} {flagged / n:.1%} flagged" for lang, (flagged, n) in result.items()))
    print("all goals met" if ok else "GOALS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
