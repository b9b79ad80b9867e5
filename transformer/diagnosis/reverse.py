"""Reverse-model support (issue 30): does the source need this output word?

The model of the other direction (de-en for en-de) reads the translation as its source and is
forced to write the real source. Deleting a faithful output word makes the source less likely
under it ("Fahrrad" gone, "bike" is hard to write); deleting a wrong word costs nothing or helps
("Hund" for "bike" supports no source word). The forward model's own signals cannot ask this: a
fluent wrong word is likely after its prefix, and its deletion drop over the source (`support`)
answers a different question (which source word the piece needs, not which the word serves).

Only uncertain words are tested: those with a piece the forward model gave p < REVERSE_GATE. No
substituted word of val's realistic errors has all its pieces above 0.05, while 76% of the words
of unedited references do (en-de), and of the model's own translations of the first 100 val
sentences 22 words in all are tested (runs/s23/, 2026-11-27): a few passes per forced reference,
almost none on a free translation. Untested words count as supported (the feature's floor, 0).

The reverse model must share the forward model's vocabulary (the same spm.model), so the ids of
one side are the other's without re-tokenising; `reverse_for` finds it beside the model's folder.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .signals import Signals, forced_passes, output_words

REVERSE_GATE = 0.05          # a word is tested when one of its pieces has p below this
FEATURE = "reverse_unsupported"        # its output column (scores.reverse_column)


def _identity(folder: Path) -> tuple[str, str, bytes] | None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return config["source_lang"], config["target_lang"], (folder / "spm.model").read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return None


@lru_cache(maxsize=8)
def _reverse_folder(model_dir: str) -> str | None:
    here = Path(model_dir)
    mine = _identity(here)
    if mine is None:
        return None
    source, target, vocabulary = mine
    # our own convention: pretrained/en-de beside pretrained/de-en
    candidate = here.parent / f"{target}-{source}"
    found = _identity(candidate) if candidate.resolve() != here.resolve() else None
    if found is not None and found == (target, source, vocabulary):
        return str(candidate)
    return None


@lru_cache(maxsize=4)
def _load(translator_class, folder: str, device: str):
    return translator_class.load(folder, device=device)      # the forward one's class: no import circle


def reverse_for(tr):
    """The Translator of the other direction beside `tr`'s folder (same vocabulary), or None: Hugging
    Face models, a folder copied alone, or one whose neighbour has another vocabulary. Loaded once
    per folder and device, like the lexicon; it is only read (forced passes), never captured."""
    if getattr(tr, "path", None) is None:             # a Hugging Face folder has no config of ours: None
        return None
    folder = _reverse_folder(str(Path(tr.path).resolve()))
    return None if folder is None else _load(type(tr), folder, str(tr.device))


def tested_words(log_p: np.ndarray, groups: list, flaggable: np.ndarray) -> np.ndarray:
    """(Wo,) bool: flaggable output words with a piece below REVERSE_GATE."""
    gate = np.log(REVERSE_GATE)
    return np.array([bool(on) and bool((log_p[g] < gate).any()) for g, on in zip(groups, flaggable)], dtype=bool)


def reverse_support(reverse, items: list, groups: list[list], tested: list[np.ndarray],
                    budget: int | None = None, bf16: bool = False) -> list[np.ndarray]:
    """Per item, (Wo,) log p_rev(source | output) - log p_rev(source | output without word w) in
    nats for the tested words, NaN for the rest. One batched run of forced passes on `reverse`
    (ungated: a head mask of the forward model is not the judge's)."""
    special = reverse.engine.special_ids
    rows, plans = [], []
    for it, words, on in zip(items, groups, tested):
        if not on.any():
            plans.append(None)
            continue
        reads, writes = list(it.output_ids), list(it.source_ids)
        fed = [reverse.engine.start_id] + writes[:-1]
        null = [i for i in reads if i in special] or reads[-1:]
        start = len(rows)
        rows.append((reads, fed, writes))
        for g, test in zip(words, on):
            if test:
                gone = set(g)
                rows.append(([i for j, i in enumerate(reads) if j not in gone] or null, fed, writes))
        plans.append(start)
    passes = forced_passes(reverse, rows, None, budget, bf16) if rows else []
    out = []
    for words, on, start in zip(groups, tested, plans):
        drop = np.full(len(words), np.nan)
        if start is not None:
            full = float(np.sum(passes[start][0], dtype=np.float64))
            for k, w in enumerate(np.flatnonzero(on)):
                drop[w] = full - float(np.sum(passes[start + 1 + k][0], dtype=np.float64))
        out.append(drop)
    return out


def add_reverse(reverse, items: list, signals: list[Signals], special, budget: int | None = None,
                bf16: bool = False) -> None:
    """Set each Signals.reverse_drop (its item's uncertain output words tested on `reverse`); special:
    the forward model's special ids."""
    words = [output_words(it, len(it.output_ids), special) for it in items]
    tested = [tested_words(s.log_p, groups, on) for s, (groups, on) in zip(signals, words)]
    for s, drop in zip(signals, reverse_support(reverse, items, [g for g, _ in words], tested, budget, bf16)):
        s.reverse_drop = drop
