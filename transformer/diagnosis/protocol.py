"""Realistic translation errors for developing and judging diagnosis (issue 30), on Multi30k VAL only.

The synthetic cases of diagnosis_fit.py (a swapped second half, another sentence's reference, a
clause appended to the source) are easy: real errors are one word left out or one word wrong,
inside a sentence. Built here from an unedited val pair (source, reference) and the statistical
word alignment of transformer/diagnosis/word_align.py (eflomal, intersection links):

- correct:       the reference as it is (every flag on it is a false alarm);
- omission:      a source content word aligned 1-1 to a reference content word; that word deleted
                 from the reference (the source word is left out);
- phrase:        two neighbouring source words whose links cover neighbouring reference words
                 only; those deleted (a short phrase left out);
- substitution:  that reference word replaced by a content word of another reference (its pieces
                 are not supported by the source; the source word is left out too);
- insertion:     an adjective put into the source after a determiner, the reference unchanged
                 (the inserted source word is left out).

Labels are per piece: a piece belongs to the word its first character falls in.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .signals import Item, make_item
from ..explain.faithfulness import average_ranks
from .word_align import Word, words

STOP = {
    "en": set("a an the and or of in on at to with from by for is are was be been being it its his her their "
              "this that these those there here as into onto near while who which what some one two three "
              "up down out over under off through other another each while".split()),
    "de": set("ein eine einer eines einem einen der die das den dem des und oder in im am an auf mit von zu zum "
              "zur bei für ist sind war es sein seine ihr ihre ihren ihrem seinem seinen dieser diese dieses "
              "sich vor hinter neben über unter aus nach durch um einige zwei drei andere anderen".split()),
    "fr": set("un une le la les l de des du et ou en dans sur à au aux avec par pour est sont il elle ils elles "
              "son sa ses leur leurs ce cette ces qui que deux trois".split()),
}
# Adjectives for source insertions, in a form that fits after the determiners listed (German:
# the nominative "-e" ending after der/die/das/eine and plural numbers at the start).
ADJECTIVES = {"en": ["young", "old", "small", "large", "red", "blue", "black", "white", "happy", "tall",
                     "green", "yellow", "wet", "busy", "quiet", "famous"],
              "de": ["junge", "alte", "kleine", "große", "rote", "blaue", "schwarze", "weiße", "glückliche",
                     "grüne", "gelbe", "nasse", "berühmte", "müde"]}
DETERMINERS = {"en": {"a", "an", "the", "A", "An", "The"},
               "de": {"Der", "Die", "Das", "Eine", "eine", "Zwei", "Drei", "Vier", "Mehrere", "Viele"}}
KINDS = ("correct", "omission", "phrase", "substitution", "insertion")


@dataclass
class RealCase:
    kind: str
    pair: int
    source: str
    target: str
    source_words: tuple      # source word indices (word_align.words) that are left out
    target_span: tuple       # (start, end) characters of the wrong reference words, or ()
    item: Item | None = None
    piece_labels: np.ndarray | None = None    # (T,) 1 = a piece of the wrong words
    source_labels: np.ndarray | None = None   # (S,) 1 = a piece of a left-out source word


def is_content(word: Word, lang: str) -> bool:
    return word.text.isalpha() and len(word.text) >= 3 and word.text.lower() not in STOP.get(lang, set())


def _delete(text: str, spans: list[Word]) -> str:
    start, end = min(w.start for w in spans), max(w.end for w in spans)
    if start > 0 and text[start - 1] == " ":
        start -= 1
    elif end < len(text) and text[end] == " ":
        end += 1
    return text[:start] + text[end:]


def _one_to_one(links: set) -> list[tuple[int, int]]:
    src_count, tgt_count = {}, {}
    for i, j in links:
        src_count[i] = src_count.get(i, 0) + 1
        tgt_count[j] = tgt_count.get(j, 0) + 1
    return sorted((i, j) for i, j in links if src_count[i] == 1 and tgt_count[j] == 1)


def build(sources: list[str], refs: list[str], links: list[set], source_lang: str, target_lang: str,
          seed: int = 0, kinds=KINDS) -> list[RealCase]:
    """At most one case of each kind per pair (pairs where a kind cannot be built lack it)."""
    rng = random.Random(seed)
    vocabulary = sorted({w.text for r in refs for w in words(r) if is_content(w, target_lang)})
    out = []
    for p, (src, ref, pair_links) in enumerate(zip(sources, refs, links)):
        sw, tw = words(src), words(ref)
        if "correct" in kinds:
            out.append(RealCase("correct", p, src, ref, (), ()))
        candidates = [(i, j) for i, j in _one_to_one(pair_links)
                      if i < len(sw) and j < len(tw) and is_content(sw[i], source_lang) and is_content(tw[j], target_lang)]
        if candidates:
            i, j = rng.choice(candidates)
            if "omission" in kinds:
                out.append(RealCase("omission", p, src, _delete(ref, [tw[j]]), (i,), ()))
            if "substitution" in kinds:
                present = {w.text.lower() for w in tw}
                other = rng.choice([v for v in rng.sample(vocabulary, min(50, len(vocabulary))) if v.lower() not in present]
                                   or vocabulary)
                new = ref[: tw[j].start] + other + ref[tw[j].end:]
                out.append(RealCase("substitution", p, src, new, (i,), (tw[j].start, tw[j].start + len(other))))
        if "phrase" in kinds:
            phrases = []
            for i in range(len(sw) - 1):
                mine = {j for a, j in pair_links if a in (i, i + 1)}
                if not mine or not (sw[i].text.isalpha() and sw[i + 1].text.isalpha()) \
                        or not any(is_content(sw[a], source_lang) for a in (i, i + 1)):
                    continue
                if not all(any(a == k for a, _ in pair_links) for k in (i, i + 1)):
                    continue
                if any(j in mine and a not in (i, i + 1) for a, j in pair_links):
                    continue
                if max(mine) - min(mine) + 1 == len(mine) and max(mine) < len(tw):
                    phrases.append((i, sorted(mine)))
            if phrases:
                i, mine = rng.choice(phrases)
                out.append(RealCase("phrase", p, src, _delete(ref, [tw[j] for j in mine]), (i, i + 1), ()))
        if "insertion" in kinds and source_lang in ADJECTIVES:
            spots = [k for k, w in enumerate(sw[:-1]) if w.text in DETERMINERS[source_lang] and sw[k + 1].text.isalpha()
                     and sw[k + 1].text.lower() not in ADJECTIVES[source_lang]
                     and (source_lang != "de" or w.text[0].isupper() or w.text == "eine")]
            if spots:
                k = rng.choice(spots)
                adjective = rng.choice(ADJECTIVES[source_lang])
                det = sw[k].text
                if source_lang == "en" and det.lower() in ("a", "an"):
                    det = ("An" if det[0].isupper() else "an") if adjective[0] in "aeiou" else ("A" if det[0].isupper() else "a")
                new_src = src[: sw[k].start] + det + " " + adjective + src[sw[k].end:]
                out.append(RealCase("insertion", p, new_src, ref, (k + 1,), ()))
    return out


def piece_words(pieces: list[str], text: str, special: set[str]) -> np.ndarray:
    """For each piece, the index of the word_align word its first character falls in (-1 for
    special pieces). Characters are matched in order, spaces and word markers ignored."""
    chars = []                        # word index of each non-space character of `text`
    for k, w in enumerate(words(text)):
        chars += [k] * len(w.text)
    index, at = np.full(len(pieces), -1), 0
    for n, piece in enumerate(pieces):
        piece = str(piece)
        if piece in special:
            continue
        body = piece.replace("\u2581", "").replace("\u0120", "").replace(" ", "")
        if not body:
            continue
        index[n] = chars[min(at, len(chars) - 1)] if chars else -1
        at += len(body)
    return index


def roc_auc(scores, labels) -> float:
    """Rank-based ROC AUC (ties count half); nan without both classes."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = average_ranks(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def label(tr, cases: list[RealCase]) -> list[RealCase]:
    """Items and piece labels, from the model's own tokenisation of each (source, target)."""
    special_pieces = set(getattr(tr.engine.tokenizer, "special_pieces", ()) or ()) | {"</s>", "<s>", "<pad>", "<unk>"}
    for c in cases:
        c.item = make_item(tr, c.source, c.target)
        src_words = piece_words(c.item.source_pieces, c.source, special_pieces)
        c.source_labels = np.isin(src_words, list(c.source_words)).astype(float)
        out_labels = np.zeros(len(c.item.output_pieces))
        if c.target_span:
            a, b = c.target_span
            wrong = [k for k, w in enumerate(words(c.target)) if w.start >= a and w.end <= b]
            out_labels = np.isin(piece_words(c.item.output_pieces, c.target, special_pieces), wrong).astype(float)
        c.piece_labels = out_labels
    return cases


def _touches(spans: list, labels: np.ndarray) -> bool:
    return any(labels[a:b].any() for a, b in spans)


def _side_max(case, diagnosis, side: str, labelled: bool) -> float:
    """The largest score on one side ("source": omission, "output": hallucination), over the case's
    edited pieces only when `labelled`."""
    score = np.asarray(diagnosis.omission if side == "source" else diagnosis.hallucination, dtype=np.float64)
    if labelled:
        score = score[(case.source_labels if side == "source" else case.piece_labels) > 0]
    return float(score.max(initial=0.0))


def evaluate(cases: list, diagnoses: list, special_ids: set) -> dict:
    """The issue's table for one model: ROC AUC of the combination and of each raw signal alone
    (omission: -(fall of log p(translation) when the word is deleted), unmet demand, the lexicon gap,
    the insertion gain;
    substitution: -log p of the piece, -pmi, the lexicon gap, the expected translation, -reverse support) over
    non-special pieces, per kind; and
    how the flags behave."""
    out = {}
    by_kind: dict[str, list] = {}
    for c, d in zip(cases, diagnoses):
        by_kind.setdefault(c.kind, []).append((c, d))

    def pool(kinds, side, score):
        scores, labels = [], []
        for k in kinds:
            for c, d in by_kind.get(k, []):
                ids = c.item.source_ids if side == "source" else c.item.output_ids
                keep = [j for j, i in enumerate(ids) if i not in special_ids]
                scores += list(np.asarray(score(d))[keep])
                labels += list((c.source_labels if side == "source" else c.piece_labels)[keep])
        return roc_auc(scores, labels) if scores else float("nan")

    for name, kinds in (("omission", ["omission"]), ("phrase", ["phrase"]), ("insertion", ["insertion"]),
                        ("in-sentence omission", ["omission", "phrase", "insertion"]), ("appended", ["appended"])):
        out[("auc", name, "combination")] = pool(kinds, "source", lambda d: d.omission)
        out[("auc", name, "deletion drop")] = pool(kinds, "source", lambda d: -d.signals["deletion_drop"])
        out[("auc", name, "unmet demand")] = pool(kinds, "source", lambda d: d.signals["unmet_demand"])
        if all("source_lexicon_gap" in d.signals for d in diagnoses):
            out[("auc", name, "lexicon gap")] = pool(kinds, "source", lambda d: d.signals["source_lexicon_gap"])
        if all("insertion_gain" in d.signals for d in diagnoses):
            # words never put back rank below every gain (their translation is there, or unknown)
            out[("auc", name, "insertion gain")] = pool(kinds, "source", lambda d: np.where(
                d.signals["insertion_gain"] != 0, d.signals["insertion_gain"], -1e9))
    for name, kinds in (("substitution", ["substitution"]), ("partial", ["partial", "correct"])):
        out[("auc", name, "combination")] = pool(kinds, "output", lambda d: d.hallucination)
        out[("auc", name, "log p")] = pool(kinds, "output", lambda d: -d.signals["log_p"])
        out[("auc", name, "pmi")] = pool(kinds, "output", lambda d: -d.signals["pmi"])
        if all("output_lexicon_gap" in d.signals for d in diagnoses):
            out[("auc", name, "lexicon gap")] = pool(kinds, "output", lambda d: d.signals["output_lexicon_gap"])
        if all("expected_translation" in d.signals for d in diagnoses):
            out[("auc", name, "expected translation")] = pool(kinds, "output", lambda d: d.signals["expected_translation"])
        if all("reverse_support" in d.signals for d in diagnoses):
            # words the model was sure of are not tested (0): they rank below every tested word
            out[("auc", name, "reverse support")] = pool(kinds, "output", lambda d: np.where(
                d.signals["reverse_support"] != 0, -d.signals["reverse_support"], -1e9))

    def spans(d, kind):
        return [(f.start, f.end) for f in d.flags if f.kind == kind]

    correct = by_kind.get("correct", [])
    out[("rate", "correct references with any flag")] = float(np.mean([bool(d.flags) for _, d in correct]))
    for name, kinds, kind, side in (("omitted word flagged", ["omission"], "omission", "source"),
                                    ("omitted phrase flagged", ["phrase"], "omission", "source"),
                                    ("inserted source word flagged", ["insertion"], "omission", "source"),
                                    ("substituted word flagged", ["substitution"], "hallucination", "output")):
        rows = [(c, d) for k in kinds for c, d in by_kind.get(k, [])]
        out[("rate", name)] = float(np.mean([_touches(spans(d, kind), c.source_labels if side == "source"
                                                      else c.piece_labels) for c, d in rows])) if rows else float("nan")
    # The same recall at a fixed share of references flagged on that side alone, whatever the shipped
    # threshold: how well the scores rank, apart from where the fit put the flag line.
    for name, kind, side, share in (("omitted word found at 3% of references flagged (source side)", "omission", "source", 0.03),
                                    ("omitted word found at 5% of references flagged (source side)", "omission", "source", 0.05),
                                    ("substituted word found at 5% of references flagged (output side)", "substitution", "output", 0.05)):
        rows = by_kind.get(kind, [])
        if correct and rows:
            line = np.sort([_side_max(c, d, side, labelled=False) for c, d in correct])[int(np.ceil(len(correct) * (1 - share))) - 1]
            out[("rate", name)] = float(np.mean([_side_max(c, d, side, labelled=True) > line for c, d in rows]))
    touching, total = 0, 0
    for k in ("omission", "phrase", "insertion", "substitution"):
        for c, d in by_kind.get(k, []):
            for f in d.flags:
                labels = c.source_labels if f.kind == "omission" else c.piece_labels
                total += 1
                touching += int(labels[f.start:f.end].any())
    out[("rate", "flag spans that touch the real error")] = touching / total if total else float("nan")
    out[("count", "omission flags covering only </s> or punctuation")] = sum(
        1 for _, d in zip(cases, diagnoses) for f in d.flags if f.kind == "omission" and float(d.omission[f.start:f.end].max()) > 0
        and all(str(p) == "</s>" or not any(ch.isalnum() for ch in str(p)) for p in f.evidence.get("pieces", ["x"])))
    out[("count", "cases")] = {k: len(v) for k, v in by_kind.items()}
    return out
