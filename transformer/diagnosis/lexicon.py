"""A bilingual lexicon of the model's training corpus, for diagnosis (issue 30).

Why: the deletion drop asks the model whether the translation needs a source word, so it cannot see
a word the model itself drops, and a fluent reference without a small adjective barely moves it. A
lexicon asks something else: does the other side hold any word this word is usually translated by?
"red" with no "rot..." in the translation, "Baumwolle" with no "cotton" in the source.

The lexicon is word co-occurrence over the training pairs, scored by the Dice coefficient
2·c(s, t) / (c(s) + c(t)) (Smadja et al. 1996), on lowercased words cut to their first 4 and, in a
second table, 5 characters, so that German inflections and compounds ("rote", "roten"; "Holzbank")
count as one word; a gap is the mean over both tables. Nothing of the
diagnosis protocol's aligner (eflomal, word_align.py) is used. Ship it as MODEL_DIR/lexicon.tsv.gz:

    python -m transformer lexicon pretrained/en-de --data-dir ../shared/data/multi30k

Models without the file (Hugging Face models) get zero lexicon evidence: their scores are as before.
"""
from __future__ import annotations

import gzip
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .function_words import FUNCTION_WORDS, language_key

LEXICON_FILE = "lexicon.tsv.gz"
STEMS = (4, 5)             # characters kept of each lowercased word, one table per length (see gaps())
MIN_COUNT = 5              # pairs a word must occur in to be known
MIN_PAIR_COUNT = 2         # pairs a word pair must share to be kept
MIN_DICE = 0.02            # weaker associations are dropped (they never decide a gap)
MIN_TOP = 0.1              # a word whose best association is weaker has no usual translation: no evidence
USUAL = 0.5                # a word's usual translations: Dice at least this share of its best one
INSERT_PULL = 0.02         # the least probability a piece must have had to be put back (insertions())
PUT_BACK_STEPS = 3         # a missing word is put back at its best this many steps (insertions())
COUNTED_STEM = 4           # for put-backs, an output word of at least this many letters covers one source word
WORD = re.compile(r"\w+")


@lru_cache(maxsize=32)
def function_stems(language: str, length: int) -> frozenset:
    """The stems of a language's function words (function_words.py): 'am', 'im', 'ein' are never a word's
    translation, however often they stand beside it ("am Strand": Dice(beach, am) 0.50 against 0.35 for
    'stra' at 4 characters, so "am" in a translation counted as "beach" translated)."""
    return frozenset(s for s in (stem(w, length) for w in FUNCTION_WORDS.get(language_key(language), ())) if s)


def stem(word: str, length: int = STEMS[-1]) -> str | None:
    """The lexicon's key for a word or a word's pieces joined ('▁Fahr' 'rad' -> 'fahrr'); None for
    punctuation and special pieces."""
    text = word.replace("▁", "").lower()
    return text[:length] if WORD.fullmatch(text) else None


@dataclass
class Lexicon:
    source_lang: str
    target_lang: str
    by_source: dict = field(default_factory=dict)     # stem length -> source stem -> {target stem: dice}
    by_target: dict = field(default_factory=dict)     # stem length -> target stem -> {source stem: dice}

    @classmethod
    def from_pairs(cls, sources: list[str], targets: list[str], source_lang: str, target_lang: str) -> "Lexicon":
        """Dice over training pairs, per stem length; each stem counts once per pair."""
        lex = cls(source_lang, target_lang)
        for length in STEMS:
            def stems(text):
                return {s for s in (stem(w, length) for w in WORD.findall(text)) if s}
            c_s, c_t, c_st = Counter(), Counter(), Counter()
            for a, b in zip(sources, targets):
                sa, sb = stems(a), stems(b)
                c_s.update(sa)
                c_t.update(sb)
                c_st.update((x, y) for x in sa for y in sb)
            for (x, y), n in c_st.items():
                if n < MIN_PAIR_COUNT or c_s[x] < MIN_COUNT or c_t[y] < MIN_COUNT:
                    continue
                dice = 2 * n / (c_s[x] + c_t[y])
                if dice >= MIN_DICE:
                    lex.add(length, x, y, round(dice, 4))
        return lex

    # (side, length, stem) -> row(): derived from the tables once per stem looked up and shared by every call
    # (no call's state: the same for all of them; at most the tables' size)
    _rows: dict = field(default_factory=dict, repr=False, compare=False)

    def add(self, length: int, source_stem: str, target_stem: str, dice: float) -> None:
        self._rows.clear()
        self.by_source.setdefault(length, {}).setdefault(source_stem, {})[target_stem] = dice
        self.by_target.setdefault(length, {}).setdefault(target_stem, {})[source_stem] = dice

    def save(self, path: str | Path) -> None:
        rows = sorted((n, s, t, d) for n, table in self.by_source.items() for s, row in table.items()
                      for t, d in row.items())
        text = (f"# {self.source_lang}\t{self.target_lang}\tstems={','.join(map(str, STEMS))}\n"
                + "".join(f"{n}\t{s}\t{t}\t{d}\n" for n, s, t, d in rows))
        with open(path, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
            f.write(text.encode("utf-8"))          # no name or time: the same corpus gives the same bytes

    @classmethod
    def read(cls, path: str | Path) -> "Lexicon":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        header = lines[0].lstrip("# ").split("\t")
        lex = cls(header[0], header[1])
        by_source, by_target = lex.by_source, lex.by_target        # plain dict work: ~80k rows per model
        for line in lines[1:]:
            n, s, t, d = line.split("\t")
            n, d = int(n), float(d)
            by_source.setdefault(n, {}).setdefault(s, {})[t] = d
            by_target.setdefault(n, {}).setdefault(t, {})[s] = d
        return lex

    def row(self, side: str, length: int, key: str | None) -> dict:
        """A stem's associations (other side's stem -> Dice) as translations: none for a function word,
        and never a function word of the other side (function_stems)."""
        if key is None:
            return {}
        found = self._rows.get((side, length, key))
        if found is None:
            mine, theirs = ((self.source_lang, self.target_lang) if side == "source"
                            else (self.target_lang, self.source_lang))
            row = (self.by_source if side == "source" else self.by_target).get(length, {}).get(key, {})
            found = {} if key in function_stems(mine, length) else \
                {t: d for t, d in row.items() if t not in function_stems(theirs, length)}
            self._rows[(side, length, key)] = found
        return found

    def gaps(self, words: list[str], other: list[str], side: str) -> list[float]:
        """Per word (text or joined pieces), how much stronger its usual translation is than the best
        one among `other`'s words: top Dice - best Dice present, in [0, 1], 0 where it has no usual
        translation (unknown, or none at MIN_TOP); the mean over the stem lengths. Short stems join a
        German word's inflections and compounds ('rote', 'roten'; 'Holzbank', 'Holzsteg' -> 'holz'),
        long ones keep apart what short ones conflate ('fahren', 'Fahrrad'). side: "source" (is the
        word's translation among `other`?) or "target" (is any of `other` a word it translates?)."""
        out = np.zeros(len(words))
        for length in STEMS:
            present = {s for s in (stem(w, length) for w in other) if s}
            for i, w in enumerate(words):
                row = self.row(side, length, stem(w, length))
                top = max(row.values()) if row else 0.0
                if top >= MIN_TOP:
                    out[i] += top - max((d for t, d in row.items() if t in present), default=0.0)
        return (out / len(STEMS)).tolist()


    def usual(self, word: str, length: int) -> set:
        """The target stems `word` is usually translated by (Dice >= USUAL x its best, best >= MIN_TOP)."""
        row = self.row("source", length, stem(word, length))
        top = max(row.values(), default=0.0)
        return {t for t, d in row.items() if d >= USUAL * top} if top >= MIN_TOP else set()

    def expected(self, top_ids: np.ndarray, top_probs: np.ndarray, piece_text, source_words: list[str],
                 output_words: list[str], first_steps: list[int]) -> tuple[np.ndarray, list]:
        """Per output word, how much the model wanted, at the word's first step, a piece that begins
        the usual translation of a source word the output lacks: the summed probability of such
        pieces among the step's best (top_ids, top_probs: (T, K)); the most over stem lengths and
        source words. Why: a wrong word often stands where the model expected the missing
        translation ("Pferd" where it wanted "▁Fahrrad", with "bicycle" in the source and no
        "Fahrrad" anywhere), while a paraphrase of a covered word has no such pull. Also, per word,
        (source word, its likeliest expected piece, the summed probability) of the strongest pull, or None."""
        mass, why = np.zeros(len(output_words)), [None] * len(output_words)
        if top_ids is None or not len(output_words):
            return mass, why
        ids, probs = top_ids[first_steps], top_probs[first_steps]                    # (Wo, K)
        pieces = _TopPieces(ids, piece_text)
        for word, _, wanted in self._missing(source_words, [True] * len(source_words), output_words):
            hit = pieces.beginning(wanted)
            if not hit.any():
                continue
            pulled = np.where(hit[pieces.where], probs, 0.0)                        # (Wo, K)
            for o in np.flatnonzero(pulled.sum(1) > mass):
                total = float(pulled[o].sum())
                mass[o], why[o] = total, (word, pieces.texts[int(pieces.where[o, pulled[o].argmax()])], total)
        return mass, why


    def insertions(self, top_ids: np.ndarray, top_probs: np.ndarray, piece_text, source_words: list[str],
                   content: list[bool], output_words: list[str], boundary: np.ndarray | None = None,
                   steps: int = PUT_BACK_STEPS) -> dict:
        """For each content source word whose usual translations the output lacks: [(pull, step, piece
        id)] of the pieces the model most wanted for it at its best `steps` steps (top_ids, top_probs:
        (T, K)), best first; each a word-initial piece at least as long as the shortest wanted stem (a
        whole word more often than a fragment), with p >= INSERT_PULL, at a step where a word may begin
        (boundary (T,), default every step). scores put each back there: an omitted word's translation
        fits in (insertion gain > 0), a paraphrased word's duplicates its neighbour. Why several steps:
        the step of the strongest pull is often a neighbour's ("Ein [Junge] männlicher" for "Ein
        männlicher [Junge]"). Here an output word covers only one source word (counted=True): "the
        woman ... the woman" with one "Frau" lacks one of them."""
        if top_ids is None or not len(top_ids):
            return {}
        pieces = _TopPieces(top_ids, piece_text)
        allowed = np.ones(len(top_ids), dtype=bool) if boundary is None else np.asarray(boundary, dtype=bool)
        by_word: dict[int, dict[int, tuple[float, int]]] = {}           # word -> step -> (pull, piece)
        for _, w, wanted in self._missing(source_words, content, output_words, counted=True):
            hit = pieces.beginning(wanted, min_length=min(len(t) for t in wanted))
            pulls = np.where(hit[pieces.where] & allowed[:, None], top_probs, 0.0)        # (T, K)
            per_step = pulls.max(1)
            for step in np.argsort(-per_step, kind="stable")[:steps]:
                pull = float(per_step[step])
                if pull < INSERT_PULL:
                    break
                if pull > by_word.get(w, {}).get(int(step), (0.0,))[0]:
                    piece = int(pieces.unique[pieces.where[step, int(pulls[step].argmax())]])
                    by_word.setdefault(w, {})[int(step)] = (pull, piece)
        return {w: sorted(((pull, step, piece) for step, (pull, piece) in at.items()), key=lambda c: (-c[0], c[1]))[:steps]
                for w, at in sorted(by_word.items())}


    def _missing(self, source_words: list[str], content: list[bool], output_words: list[str], counted: bool = False):
        """(source word, its index, its usual target stems) per stem length, for each word in
        `content` none of whose usual translations is among `output_words` at that length. counted:
        an output word of at least COUNTED_STEM letters covers one source word only (strongest Dice
        first), shorter ones ("ein", "the", "man") any number, as without counting."""
        for length in STEMS:
            present = Counter(s for s in (stem(w, length) for w in output_words) if s)
            wants = [(w, word, self.usual(word, length) if on else set())
                     for w, (word, on) in enumerate(zip(source_words, content))]
            if counted:
                left = {t: (n if len(t) >= COUNTED_STEM else len(source_words)) for t, n in present.items()}
                pairs = sorted(((self.row("source", length, stem(word, length)).get(t, 0.0), w, t) for w, word, wanted in wants
                                for t in wanted if t in left), key=lambda x: (-x[0], x[1], x[2]))
                covered = set()
                for _, w, t in pairs:
                    if w not in covered and left[t] > 0:
                        covered.add(w)
                        left[t] -= 1
            else:
                covered = {w for w, _, wanted in wants if wanted & present.keys()}
            for w, word, wanted in wants:
                if wanted and w not in covered:
                    yield word, w, wanted


class _TopPieces:
    """The distinct pieces among a decoding's best ones (ids: any shape), indexed by their first
    letters, so a missing word's usual translations are looked up per stem, not per piece."""

    def __init__(self, ids: np.ndarray, piece_text):
        self.unique, where = np.unique(ids, return_inverse=True)
        self.where = where.reshape(ids.shape)                   # ids == unique[where]
        self.texts = [str(piece_text(int(v))) for v in self.unique]
        # a piece can begin a word of stem t only if both share their first min(3, len(t)) characters
        self.by_start: dict[str, list[int]] = {}
        for u, text in enumerate(self.texts):
            if text.startswith("\u2581"):
                body = text[1:].lower()
                for k in range(1, min(3, len(body)) + 1):
                    self.by_start.setdefault(body[:k], []).append(u)

    def beginning(self, stems: set, min_length: int = 0) -> np.ndarray:
        """Per distinct piece: a word-initial piece of at least min_length letters that begins a
        word of one of `stems`?"""
        hit = np.zeros(len(self.unique), dtype=bool)
        for t in stems:
            for u in self.by_start.get(t[:3], ()):
                hit[u] = hit[u] or (len(self.texts[u]) - 1 >= min_length and _begins(self.texts[u], {t}))
        return hit


def _begins(piece: str, stems: set) -> bool:
    """A word-initial piece that begins a word of one of `stems` ('▁Fahr' begins 'fahrr')."""
    if not piece.startswith("\u2581"):
        return False
    text = piece[1:].lower()
    return any(text[:len(t)] == t if len(text) >= len(t) else (len(text) >= 3 and t.startswith(text))
               for t in stems)


@lru_cache(maxsize=8)
def read_lexicon(folder: str) -> Lexicon | None:
    path = Path(folder) / LEXICON_FILE
    return Lexicon.read(path) if path.is_file() else None


def lexicon_for(tr) -> Lexicon | None:
    """The lexicon beside the model's weights (the folder Translator.load opened), if any and in the
    model's direction."""
    if getattr(tr, "path", None) is None:
        return None
    lex = read_lexicon(str(tr.path))
    if lex is None or (lex.source_lang, lex.target_lang) != (tr.source_lang, tr.target_lang):
        return None
    return lex


def write_lexicon(model_dir: str | Path, data_dir, split: str = "train") -> str:
    """Build the lexicon of a model's training pairs and write it beside its weights; a one-line report."""
    import json

    from ..training.data import read_split
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    src, tgt = config["source_lang"], config["target_lang"]
    lex = Lexicon.from_pairs(read_split(data_dir, split, src), read_split(data_dir, split, tgt), src, tgt)
    out = Path(model_dir) / LEXICON_FILE
    lex.save(out)
    read_lexicon.cache_clear()
    longest = STEMS[-1]
    pairs = sum(len(row) for row in lex.by_source[longest].values())
    return (f"wrote {out}: {pairs} word pairs over {len(lex.by_source[longest])} {src} and "
            f"{len(lex.by_target[longest])} {tgt} words at {longest} characters (and shorter stems), "
            f"{out.stat().st_size:,} bytes")
