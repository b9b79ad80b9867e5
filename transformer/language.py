"""Is this text in the language the model reads? A small, offline, deterministic detector.

Character n-grams (1-4, words padded with spaces, lowercased, digits and punctuation dropped)
scored by naive Bayes against profiles of English, German and French built from the Multi30k
TRAIN split only (`python -m transformer.language --build --data-dir ../shared/data/multi30k`
writes transformer/language_profiles.json; the data itself is never shipped).

`check(text, source_lang)` returns a LanguageCheck:
- score: posterior probability, among the profiled languages, that the text is in source_lang
  (the naive-Bayes log-likelihoods are divided by TEMPERATURE, since every letter sits in
  several overlapping n-grams). 0.5 when nothing could be judged (see `checked`).
- detected: the most likely profiled language when its posterior is at least DETECT_AT, else None.
- matches: False only when the text has at least MIN_WORDS words (whitespace-separated, with a
  letter) and MIN_LETTERS letters, the source language is one the detector knows, another language
  is detected, and score < FLAG_BELOW.
  One- and two-word texts, numbers, names and punctuation therefore pass; mixed text goes by the
  majority of its letters.
- checked: False when the source language is unknown ("" or a code outside PROFILED) or the text
  has too few letters to judge; then matches is True and score is 0.5.
Empty or whitespace-only text raises ValueError, like Translator.translate.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

PROFILE_PATH = Path(__file__).with_name("language_profiles.json")
ORDERS = (1, 2, 3, 4)
TOP_PER_ORDER = {1: 60, 2: 500, 3: 1200, 4: 1500}   # most frequent grams kept per language and order
CALIBRATION_LINES = 1000        # the last lines of train: held out from the profiles, used to choose
TEMPERATURE = 8.0               # the constants below (val is only measured, test never read)
MIN_LETTERS = 8                 # and MIN_WORDS words, before anything is flagged
MIN_WORDS = 3
FLAG_BELOW = 0.01
DETECT_AT = 0.6
ALPHA = 0.5                     # additive smoothing of gram counts

NAMES = {"english": "en", "german": "de", "deutsch": "de", "french": "fr", "francais": "fr",
         "français": "fr", "spanish": "es", "italian": "it", "portuguese": "pt", "dutch": "nl",
         "romanian": "ro", "russian": "ru", "chinese": "zh", "japanese": "ja"}
ISO3 = {"eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it",
        "por": "pt", "nld": "nl", "dut": "nl", "ron": "ro", "rum": "ro", "rus": "ru", "zho": "zh",
        "chi": "zh", "jpn": "ja", "kor": "ko", "ara": "ar", "tur": "tr", "pol": "pl", "ces": "cs",
        "cze": "cs", "swe": "sv", "dan": "da", "fin": "fi", "nob": "nb", "ell": "el", "gre": "el",
        "hun": "hu", "ukr": "uk", "hin": "hi", "vie": "vi", "ind": "id", "heb": "he", "cat": "ca"}
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class LanguageCheck:
    matches: bool              # False when the text is very likely in another language
    detected: str | None       # ISO 639-1 code of the language it looks like, when known
    score: float               # in [0, 1]: confidence that the text is in the model's source language
    checked: bool = True       # False: source language unknown to the detector or text too short


def normalize_code(code: str | None) -> str | None:
    """ISO 639-1 for 'en', 'eng_Latn', 'en_XX', 'de_DE', '__en__', 'deu', 'German'; None if unknown."""
    if not code or not isinstance(code, str):
        return None
    name = code.strip().strip("_").lower()
    if name in NAMES:
        return NAMES[name]
    head = re.split(r"[_\-\s]", name)[0]
    if len(head) == 2 and head.isalpha():
        return head
    return ISO3.get(head)


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFC", text).lower())


def grams(text_words: list[str]) -> Counter:
    """Counts of character n-grams over words padded with one space on each side."""
    out: Counter = Counter()
    for word in text_words:
        padded = f" {word} "
        for n in ORDERS:
            for i in range(len(padded) - n + 1):
                gram = padded[i:i + n]
                if gram != " ":
                    out[gram] += 1
    return out


def corpus_grams(text_words: list[str]) -> Counter:
    """grams(text_words), each distinct word's grams counted once and multiplied by its count: the
    same counts, 10x faster on a corpus (build)."""
    out: Counter = Counter()
    for word, count in Counter(text_words).items():
        for gram, n in grams([word]).items():
            out[gram] += n * count
    return out


class Profiles:
    """Smoothed log P(gram | language, order) for the grams kept at build time."""

    def __init__(self, data: dict):
        self.languages: list[str] = list(data["languages"])
        self.index = {g: i for i, g in enumerate(data["grams"])}
        counts = np.asarray(data["counts"], dtype=np.float64)           # (languages, grams)
        order = np.array([len(g) for g in data["grams"]])
        logp = np.empty_like(counts)
        for n in ORDERS:
            cols = order == n
            totals = np.array([data["totals"][lang][str(n)] for lang in self.languages], dtype=np.float64)
            logp[:, cols] = np.log(counts[:, cols] + ALPHA) - np.log(totals + ALPHA * cols.sum())[:, None]
        self.logp = logp.T.copy()                                       # (grams, languages)
        self.logp.setflags(write=False)

    def loglik(self, text_words: list[str]) -> np.ndarray:
        found = [(self.index[g], c) for g, c in grams(text_words).items() if g in self.index]
        if not found:
            return np.zeros(len(self.languages))
        rows, counts = zip(*found)
        return np.asarray(counts, dtype=np.float64) @ self.logp[list(rows)]

    def posterior(self, text_words: list[str]) -> np.ndarray:
        z = self.loglik(text_words) / TEMPERATURE
        z = np.exp(z - z.max())
        return z / z.sum()


_lock = threading.Lock()
_cache: dict[Path, Profiles] = {}


def profiles(path: Path = PROFILE_PATH) -> Profiles:
    """Loaded once per process (lock-protected) and read-only afterwards."""
    with _lock:
        if path not in _cache:
            _cache[path] = Profiles(json.loads(Path(path).read_text(encoding="utf-8")))
        return _cache[path]


PROFILED = ("de", "en", "fr")     # what the shipped profile file holds (tested against it)


def check(text: str, source_lang: str | None) -> LanguageCheck:
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: type a sentence to check")
    return _check(text, source_lang if isinstance(source_lang, str) else None)


@lru_cache(maxsize=4096)
def _check(text: str, source_lang: str | None) -> LanguageCheck:
    """Memoised: the app asks about the same sentence on every rerun of every session (the result
    is frozen, so one copy is shared)."""
    prof = profiles()
    text_words = words(text)
    letters = sum(len(w) for w in text_words)
    if not letters:
        return LanguageCheck(True, None, 0.5, checked=False)
    post = prof.posterior(text_words)
    best = int(post.argmax())
    detected = prof.languages[best] if post[best] >= DETECT_AT else None
    source = normalize_code(source_lang)
    n_words = sum(1 for token in text.split() if _WORD.search(token))      # "Jean-Paul" is one word
    if source not in prof.languages or letters < MIN_LETTERS or n_words < MIN_WORDS:
        return LanguageCheck(True, detected, 0.5, checked=False)
    score = float(post[prof.languages.index(source)])
    flagged = detected is not None and detected != source and score < FLAG_BELOW
    return LanguageCheck(not flagged, detected, score)


# ---- building the profile file from the Multi30k train split -------------------------------
def read_lines(data_dir: Path, split: str, lang: str) -> list[str]:
    with gzip.open(Path(data_dir) / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def build(data_dir: Path, out: Path = PROFILE_PATH, languages=PROFILED) -> dict:
    """Profiles from train minus its last CALIBRATION_LINES lines."""
    per_lang, totals = {}, {}
    for lang in languages:
        counts = corpus_grams(words(" ".join(read_lines(data_dir, "train", lang)[:-CALIBRATION_LINES])))
        per_lang[lang] = counts
        totals[lang] = {str(n): sum(c for g, c in counts.items() if len(g) == n) for n in ORDERS}
    keep = set()
    for counts in per_lang.values():
        for n in ORDERS:
            ranked = sorted(((c, g) for g, c in counts.items() if len(g) == n), key=lambda t: (-t[0], t[1]))
            keep.update(g for _, g in ranked[:TOP_PER_ORDER[n]])
    kept = sorted(keep, key=lambda g: (len(g), g))
    data = {"about": "character n-gram counts from Multi30k train (all but the last "
                     f"{CALIBRATION_LINES} lines); built by python -m transformer.language --build",
            "orders": list(ORDERS), "languages": list(languages), "totals": totals, "grams": kept,
            "counts": [[per_lang[lang].get(g, 0) for g in kept] for lang in languages]}
    Path(out).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help="write the profile file from train")
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"
                                                  / "multi30k"))
    parser.add_argument("--out", default=str(PROFILE_PATH))
    parser.add_argument("--source", default="en", help="the source language to check against")
    parser.add_argument("text", nargs="*")
    args = parser.parse_args(argv)
    if args.build:
        data = build(Path(args.data_dir), Path(args.out))
        print(f"{args.out}: {len(data['grams'])} grams, {Path(args.out).stat().st_size:,} bytes")
    if args.text:
        print(check(" ".join(args.text), args.source))


if __name__ == "__main__":
    main()
