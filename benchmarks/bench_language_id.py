"""Could an offline language-identification library replace the app's own en/de/fr check (issue 31)?

The same sentences and goals as bench_language_check.py: the first N sentences of the Multi30k
VAL split in en, de and fr, checked as input for pretrained/en-de (reads en) and pretrained/de-en
(reads de). Goals: flagged >= 95% when the language is wrong, false alarms <= 1% when it is right;
also the first three words only (not a goal), the time per check, and the library's size on disk.
A library's answer flags a sentence when its language differs from the model's and, with
--min-confidence, when the library is at least that sure.

    pip install --target /tmp/langid langid                      # not a dependency of the app
    python benchmarks/bench_language_id.py --library langid --path /tmp/langid
    python benchmarks/bench_language_id.py --library lingua --path /tmp/lingua
    python benchmarks/bench_language_id.py --library ours                     # transformer/language.py
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer.language import check as our_check, read_lines  # noqa: E402

LANGS = ("en", "de", "fr")
READS = {"en-de": "en", "de-en": "de"}


def detector(library: str):
    """text -> (ISO 639-1 code, confidence in [0, 1]) for the library named."""
    if library == "ours":
        def ours(text):
            result = our_check(text, "en")
            return (result.detected or "?"), 1.0
        return ours
    if library == "langid":
        from langid.langid import LanguageIdentifier, model
        identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
        return lambda text: identifier.classify(text)
    if library == "lingua":
        from lingua import LanguageDetectorBuilder
        built = LanguageDetectorBuilder.from_all_languages().build()       # models load as languages are met

        def lingua(text):
            values = built.compute_language_confidence_values(text)
            if not values:
                return "?", 0.0
            return values[0].language.iso_code_639_1.name.lower(), float(values[0].value)
        return lingua
    raise SystemExit(f"unknown library {library!r}")


def flagged(detect, lines, reads: str, min_confidence: float, library: str) -> int:
    if library == "ours":           # the app's own rule, as Translator.language_check applies it
        return sum(not our_check(text, reads).matches for text in lines)
    count = 0
    for text in lines:
        code, confidence = detect(text)
        count += code != reads and confidence >= min_confidence
    return count


def size_on_disk(path: str | None) -> str:
    if not path:
        return "n/a"
    total = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    return f"{total / 1e6:.1f} MB"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", choices=("ours", "langid", "lingua"), required=True)
    parser.add_argument("--path", default=None, help="folder the library was pip-installed into (--target)")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "multi30k"))
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--min-confidence", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.path:
        sys.path.insert(0, args.path)
    started = time.perf_counter()
    detect = detector(args.library)
    if args.library != "ours":
        detect("warm up")
    load = time.perf_counter() - started
    sentences = {lang: read_lines(Path(args.data_dir), "val", lang)[: args.n] for lang in LANGS}
    print(f"{args.library}: size on disk {size_on_disk(args.path)}, loaded in {load:.2f} s, "
          f"min confidence {args.min_confidence}")
    print("| model | reads | val text | n | flagged | rate | goal |")
    print("|---|---|---|---|---|---|---|")
    ok, checks, seconds = True, 0, 0.0
    for name, reads in READS.items():
        for lang, lines in sentences.items():
            started = time.perf_counter()
            count = flagged(detect, lines, reads, args.min_confidence, args.library)
            seconds += time.perf_counter() - started
            checks += len(lines)
            right = lang == reads
            rate = count / len(lines)
            good = rate <= 0.01 if right else rate >= 0.95
            ok &= good
            goal = "false alarms <= 1%" if right else "flagged >= 95%"
            print(f"| {name} | {reads} | {lang} | {len(lines)} | {count} | {rate:.1%} | {goal}: "
                  f"{'met' if good else 'MISSED'} |")
    print(f"{checks} checks, {1000 * seconds / checks:.2f} ms per check")
    short = {lang: [" ".join(s.split()[:3]) for s in lines] for lang, lines in sentences.items()}
    for name, reads in READS.items():       # not a goal: the first three words of each sentence only
        print(f"first 3 words only, {name}: " + ", ".join(
            f"{lang} {flagged(detect, lines, reads, args.min_confidence, args.library) / len(lines):.1%} flagged"
            for lang, lines in short.items()))
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print("all goals met" if ok else "GOALS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
