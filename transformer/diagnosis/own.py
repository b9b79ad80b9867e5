"""The own-translation protocol (issue 51): the shipped models' own greedy translations of Multi30k val,
labelled per word by two annotators working blind (../shared/docs/annotating.md, after HalOmi, Dale et
al. 2023), in benchmarks/own_translations/{pair}.jsonl: per val index the output that was labelled, and
each annotator's omitted source words, wrong output words, ok and detached.

A word counts as an error when both annotators list it and as correct when neither does; words only one
lists are left out (the brief). A listed output word that the output writes more than once is its later
copies (the brief lists "the repeated copy"). val[OWN_FIT] fits the free lines (fit_free.py). The typed set
(typed.{pair}.jsonl, OWN_JUDGE, session 31), labelled after the lines were frozen, judges them
(benchmarks/bench_diagnosis.py --own-only): sentences written as a visitor types them, by people told not to read
Multi30k, each row with its own source ("typed": its index). Nothing fits on it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .protocol import piece_words, roc_auc
from .signals import Item, is_punctuation, word_groups
from .word_align import words

LABELS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "own_translations"
OWN_FIT = range(0, 800)       # val pairs that fit the free lines (chosen by cross-validation within them)
OWN_JUDGE = "typed"           # the label set that judges them: labelled after the fit was frozen
LABEL_SETS = {"val": "{pair}.jsonl", "typed": "typed.{pair}.jsonl"}    # the typed rows carry their source
SPECIAL_PIECES = {"</s>", "<s>", "<pad>", "<unk>"}


@dataclass
class OwnCase:
    pair: int                   # val index (the typed set: its own index)
    source: str
    output: str                 # the translation that was labelled
    ok: bool                    # both annotators: nothing omitted, nothing wrong
    bad: bool                   # both: something omitted or wrong
    detached: bool              # both: the output has little to do with the source
    item: Item | None = None
    source_labels: np.ndarray | None = None    # (S,) 1 both list it, 0 neither, -1 one only or not a word
    output_labels: np.ndarray | None = None    # (T,)


def read_labels(pair: str, label_set: str = "val") -> list[dict]:
    path = LABELS_DIR / LABEL_SETS[label_set].format(pair=pair)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _listed(tokens: list[str]) -> set[str]:
    return {w.lower() for t in tokens for w in re.findall(r"\w+", t)}


def _labels(pieces: list, text: str, a: list, b: list, copies: bool) -> np.ndarray:
    """Per piece: 1 where both lists name its word, 0 where neither, -1 otherwise (special pieces,
    punctuation, one list only); with copies, a listed word written more than once is its later copies."""
    index, ws = piece_words(pieces, text, SPECIAL_PIECES), words(text)
    in_a, in_b = _listed(a), _listed(b)
    counts: dict[str, int] = {}
    for w in ws:
        counts[w.text.lower()] = counts.get(w.text.lower(), 0) + 1
    first_seen: set[int] = set()
    seen: set[str] = set()
    for k, w in enumerate(ws):
        if w.text.lower() not in seen:
            seen.add(w.text.lower())
            first_seen.add(k)
    out = np.full(len(pieces), -1.0)
    for j, (piece, k) in enumerate(zip(pieces, index)):
        if k < 0 or str(piece) in SPECIAL_PIECES or is_punctuation(str(piece)):
            continue
        key = ws[k].text.lower()
        both, neither = key in in_a and key in in_b, key not in in_a and key not in in_b
        if both and copies and counts[key] > 1 and k in first_seen:
            both, neither = False, True
        out[j] = 1.0 if both else 0.0 if neither else -1.0
    return out


def own_cases(tr, sources: list[str] | None, pair: str, start: int = 0, stop: int | None = None,
              label_set: str = "val") -> list[OwnCase]:
    """The labelled own translations of rows [start, stop) of a label set, with items (free) and per-piece
    labels; sources: all of val in the model's source language (the typed set's rows carry their own)."""
    from .signals import make_item
    cases = []
    for row in read_labels(pair, label_set):
        i = row[label_set]                      # a row's index is named after its set ("val", "typed")
        if i < start or (stop is not None and i >= stop):
            continue
        a, b = row["A"], row["B"]
        source = row["source"] if "source" in row else sources[i]
        c = OwnCase(i, source, row["output"], a["ok"] and b["ok"], not a["ok"] and not b["ok"],
                    a["detached"] and b["detached"])
        c.item = make_item(tr, c.source, c.output)
        c.item.free = True
        c.source_labels = _labels(c.item.source_pieces, c.source, a["omitted"], b["omitted"], copies=False)
        c.output_labels = _labels(c.item.output_pieces, c.output, a["wrong"], b["wrong"], copies=True)
        cases.append(c)
    return cases


def _word_rows(case: OwnCase, diagnosis, side: str, special: frozenset) -> list[tuple[float, float, int]]:
    """(score, label, first piece) per labelled word of one side (a word's label: its first piece's)."""
    item = case.item
    pieces, ids = (item.source_pieces, item.source_ids) if side == "source" else (item.output_pieces, item.output_ids)
    labels = case.source_labels if side == "source" else case.output_labels
    scores = diagnosis.omission if side == "source" else diagnosis.hallucination
    return [(float(scores[g[0]]), float(labels[g[0]]), g[0]) for g in word_groups(list(pieces), list(ids), special)
            if labels[g[0]] >= 0]


def evaluate_own(cases: list[OwnCase], diagnoses: list, special_ids, signals: dict | None = None) -> dict:
    """The own-translation table: word ROC AUC of each side's combination and of each named raw signal
    (signals: name -> (side, orientation sign)), outputs flagged by label, word recall, precision."""
    special = frozenset(special_ids)
    out: dict = {}
    hits, total = 0, 0
    for side, name in (("source", "omission"), ("output", "unsupported")):
        rows = [(s, y, c, d, j) for c, d in zip(cases, diagnoses) for s, y, j in _word_rows(c, d, side, special)]
        labels = np.array([y for _, y, *_ in rows])
        out[("auc", name, "combination")] = roc_auc([s for s, *_ in rows], labels)
        for signal, (where, sign) in (signals or {}).items():
            if where == side:
                out[("auc", name, signal)] = roc_auc([sign * float(d.signals[signal][j]) if signal in d.signals else 0.0
                                                      for _, _, _, d, j in rows], labels)
        flagged = np.array([s >= 0.5 for s, *_ in rows])
        out[("rate", f"{name} words flagged (both annotators list them)")] = float(flagged[labels == 1].mean())
        hits, total = hits + int((flagged & (labels == 1)).sum()), total + int(((labels >= 0) & flagged).sum())
    out[("rate", "flags on a real error (precision)")] = hits / total if total else float("nan")
    bad = [bool(d.flags) for c, d in zip(cases, diagnoses) if c.bad]
    ok = [bool(d.flags) for c, d in zip(cases, diagnoses) if c.ok]
    out[("rate", "outputs with a real error that get a flag")] = float(np.mean(bad)) if bad else float("nan")
    out[("rate", "acceptable outputs with any flag")] = float(np.mean(ok)) if ok else float("nan")
    detached = [c.detached for c in cases]
    out[("auc", "detached (hand-labelled) vs the rest", "sentence score")] = roc_auc(
        [d.sentence_score for d in diagnoses], detached) if any(detached) else float("nan")
    out[("count", "outputs: error / acceptable / detached")] = (len(bad), len(ok), int(sum(detached)))
    return out
