"""Word alignment: Pharaoh files, alignment error rate, pieces -> words, and links from scores.

A link (i, j) joins source word i and target word j (0-based), as Pharaoh files write them:
"i-j" a sure link, "ipj" a possible one (Och and Ney 2003). AER over a corpus is
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|),   S ⊆ P (a sure link is also possible),
summed over sentence pairs before dividing. With a silver reference that has only sure links
(P = S) it is 1 - F1.

A model's scores are per piece; they become word scores by averaging the pieces of each word
(sentencepiece splits words, words are what references link). Against the silver reference the
words are `word_align.words` (\\w+ runs and single punctuation marks), the tokens the silver
aligner saw; a Pharaoh file's indices count the whitespace-separated tokens of its sentences. Links are then read
from a (target words, source words) score matrix by `links_from_scores`: "row" links each target
word to its best source word; "mutual" keeps only the pairs that are each other's best in both
directions (the argmax intersection of SimAlign, high precision like an intersected aligner).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..diagnosis.word_align import words

RULES = ("row", "mutual")
MARKERS = ("▁", "Ġ", "Ċ", "##", "@@", "</w>")        # sentencepiece, byte-level BPE, WordPiece, subword-nmt


@dataclass
class Gold:
    """One pair's reference: sure links, and possible links (always a superset of sure)."""
    sure: set = field(default_factory=set)
    possible: set = field(default_factory=set)

    def __post_init__(self):
        self.possible = set(self.possible) | set(self.sure)


def parse_pharaoh(line: str) -> Gold:
    """"0-0 1p2 3-1" -> Gold: `i-j` sure, `ipj` possible. ValueError on anything else."""
    gold = Gold()
    for token in line.split():
        sep = "-" if "-" in token else "p" if "p" in token else None
        parts = token.split(sep) if sep else []
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"not a Pharaoh link: {token!r} (expected i-j for sure or ipj for possible)")
        link = (int(parts[0]), int(parts[1]))
        (gold.sure if sep == "-" else gold.possible).add(link)
    gold.possible |= gold.sure
    return gold


def read_pharaoh(path: str | Path) -> list[Gold]:
    """One Gold per line of a Pharaoh file (an empty line: a pair without links)."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            out.append(parse_pharaoh(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    return out


@dataclass
class AERCounts:
    """Sums over pairs, so corpus AER is one division (and parts of a corpus add up)."""
    a_and_s: int = 0
    a_and_p: int = 0
    a: int = 0
    s: int = 0

    def add(self, predicted: set, gold: Gold) -> "AERCounts":
        self.a_and_s += len(predicted & gold.sure)
        self.a_and_p += len(predicted & gold.possible)
        self.a += len(predicted)
        self.s += len(gold.sure)
        return self

    @property
    def aer(self) -> float:
        total = self.a + self.s
        return 1.0 - (self.a_and_s + self.a_and_p) / total if total else 0.0


def aer(predicted: list[set], gold: list[Gold]) -> float:
    """Corpus AER of predicted link sets against references (Och and Ney), in [0, 1]."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted pairs against {len(gold)} references")
    counts = AERCounts()
    for p, g in zip(predicted, gold):
        counts.add(set(p), g)
    return counts.aer


def _strip(piece: str) -> str:
    for marker in MARKERS:
        piece = piece.replace(marker, "")
    return "".join(piece.split())


def text_words(text: str) -> list[str]:
    """The silver reference's words: `word_align.words` (what eflomal was given)."""
    return [w.text for w in words(text)]


def piece_words(pieces: list[str], tokens: list[str], specials=()) -> tuple[list[int | None], int]:
    """Which word of `tokens` each piece belongs to (None: a special piece such as </s>), and the
    number of words. Pieces are matched to the words by their non-space characters; where they do
    not spell them (normalisation changed the text), each non-special piece is a word of its own."""
    owner = []                                   # word index of each non-space character of the words
    for w, token in enumerate(tokens):
        owner += [w] * len("".join(token.split()))
    out: list[int | None] = []
    position = 0
    for piece in pieces:
        chars = _strip(piece)
        if piece in specials or not chars:
            out.append(None)
            continue
        if position + len(chars) > len(owner):
            return _one_word_each(pieces, specials)
        out.append(owner[position])
        position += len(chars)
    if position != len(owner) or "".join(_strip(p) for p in pieces if p not in specials) != \
            "".join("".join(t.split()) for t in tokens):
        return _one_word_each(pieces, specials)
    return out, len(tokens)


def _one_word_each(pieces: list[str], specials) -> tuple[list[int | None], int]:
    out, n = [], 0
    for piece in pieces:
        if piece in specials or not _strip(piece):
            out.append(None)
        else:
            out.append(n)
            n += 1
    return out, n


def to_words(scores: np.ndarray, target_words: list, n_target: int, source_words: list,
             n_source: int) -> np.ndarray:
    """(..., T, S) piece scores -> (..., n_target, n_source) word scores, the mean over each
    word's pieces; special pieces drop out."""
    def pooling(owners: list, n: int) -> np.ndarray:
        m = np.zeros((n, len(owners)), dtype=np.float32)
        for p, w in enumerate(owners):
            if w is not None:
                m[w, p] = 1.0
        return m / np.maximum(m.sum(1, keepdims=True), 1.0)
    return pooling(target_words, n_target) @ scores @ pooling(source_words, n_source).T


def links_from_scores(word_scores: np.ndarray, rule: str = "row") -> set:
    """(target words, source words) scores -> {(source word, target word)} by `rule` (RULES)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    n_t, n_s = word_scores.shape
    if n_t == 0 or n_s == 0:
        return set()
    best_source = word_scores.argmax(1)                                                # (n_t,)
    links = {(int(best_source[j]), j) for j in range(n_t)}
    if rule == "mutual":
        best_target = word_scores.argmax(0)                                            # (n_s,)
        links = {(i, j) for i, j in links if best_target[i] == j}
    return links


def piece_links(word_links: set, source_words: list, output_words: list) -> list[tuple[int, int]]:
    """Word links -> [(source piece i, output piece j)]: every piece of a linked source word with
    every piece of its linked output word, sorted."""
    by_source: dict = {}
    by_output: dict = {}
    for i, w in enumerate(source_words):
        by_source.setdefault(w, []).append(i)
    for j, w in enumerate(output_words):
        by_output.setdefault(w, []).append(j)
    return sorted((i, j) for ws, wt in word_links for i in by_source.get(ws, []) for j in by_output.get(wt, []))
