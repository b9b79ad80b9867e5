"""Head roles over a corpus (issue 34): which heads track position, find rare words, sink, align.

For every head of every kind, over the pairs of a corpus (each reference forced through the model):
- positional (Voita et al. 2019): the share of query rows whose maximum is at key offset -1, 0, +1
  (key position - query position), each reported; a positional head at >= 90% for one offset;
- rare word (Voita et al.): the share of rows whose maximum is on the least frequent piece of the
  sentence (among the keys the row sees, specials left out), frequencies counted on the model's
  training data through its own tokenizer (source side for source keys, target side for fed keys);
- sink: the share of weight on the first key or on special pieces (</s>, <s>, language tags);
- alignment (cross-attention): AER of every method of aligner.py against a reference: gold links
  from a Pharaoh file, or else the silver eflomal alignment of Multi30k (diagnosis/word_align.py).
The pairs are split at random (seed 0) into a fit half and a held-out half: the best head, the
best method and the combination's weights are chosen or fitted on the fit half, and every AER is
reported on both halves, so the held-out figures were never used to choose anything.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..capture import KINDS
from .aligner import features, fit_combination, map_names, method_scores, pair_words, piece_maps
from .alignment import RULES, AERCounts, Gold, links_from_scores, to_words
from .corpus_pass import PassBatch, corpus_pass

HEAD_ROLES = "head_roles.json"
POSITIONAL = 0.9             # Voita et al.: a positional head points at one offset in >= 90% of rows
ROLE_SHARE = 0.5             # our label threshold for "rare word" and "sink" (a score, not a finding)
OFFSETS = (-1, 0, 1)


@dataclass
class Corpus:
    """Sentence pairs, their word tokens (what reference indices count) and references."""
    sources: list
    targets: list
    source_words: list           # per pair, list[str]
    target_words: list
    references: list             # per pair, Gold
    reference: str               # what the references are, for head_roles.json


def piece_frequencies(tr, lines: list[str], side: str) -> np.ndarray:
    """(V,) counts of each piece id in `lines`, tokenized as the model's source or target side."""
    counts: Counter = Counter()
    for line in lines:
        if line.strip():
            counts.update(tr.engine.source_ids(line)[0] if side == "source" else tr.engine.target_text_ids(line))
    out = np.zeros(len(tr.engine.tokenizer), dtype=np.int64)
    for i, n in counts.items():
        if 0 <= i < len(out):
            out[i] = n
    return out


@dataclass
class RoleCounts:
    """Sums over rows for one kind, each (L, H)."""
    rows: np.ndarray
    offsets: np.ndarray          # (3, L, H) rows whose max is at offset -1, 0, +1
    rare_rows: np.ndarray        # rows that see at least one non-special key
    rare: np.ndarray
    sink: np.ndarray             # summed weight on the first key and special keys

    @classmethod
    def zeros(cls, L: int, H: int) -> "RoleCounts":
        return cls(np.zeros((L, H)), np.zeros((3, L, H)), np.zeros((L, H)), np.zeros((L, H)), np.zeros((L, H)))

    def add(self, w: np.ndarray, q_len: list, k_ids: np.ndarray, k_len: list, k_freq: np.ndarray,
            specials: np.ndarray, causal: bool) -> None:
        """w (B, L, H, Tq, Tk) one batch of one kind; k_ids (B, Tk) the keys' piece ids."""
        B, L, H, Tq, Tk = w.shape
        q = np.arange(Tq)[None, :] < np.asarray(q_len)[:, None]                       # (B, Tq) real rows
        k = np.arange(Tk)[None, :] < np.asarray(k_len)[:, None]                       # (B, Tk) real keys
        visible = np.broadcast_to(k[:, None, :], (B, Tq, Tk))
        if causal:
            visible = visible & np.tri(Tq, Tk, dtype=bool)[None]
        top = w.argmax(-1)                                                            # (B, L, H, Tq)
        offset = top - np.arange(Tq)[None, None, None, :]
        rows = q[:, None, None, :]
        self.rows += rows.sum((0, 3)) * np.ones((L, H))
        for n, d in enumerate(OFFSETS):
            self.offsets[n] += ((offset == d) & rows).sum((0, 3))
        count = np.where(specials[k_ids] | ~k, np.inf, k_freq[k_ids].astype(np.float64))   # (B, Tk)
        seen = np.where(visible, count[:, None, :], np.inf)                            # (B, Tq, Tk)
        least = seen.min(-1, keepdims=True)                                            # (B, Tq, 1)
        rare = (seen == least) & np.isfinite(least)                                    # (B, Tq, Tk)
        has_rare = q & np.isfinite(least[..., 0])                                      # (B, Tq)
        hit = np.take_along_axis(rare[:, None, None], top[..., None], -1)[..., 0]      # (B, L, H, Tq)
        self.rare_rows += has_rare[:, None, None, :].sum((0, 3)) * np.ones((L, H))
        self.rare += (hit & has_rare[:, None, None, :]).sum((0, 3))
        sink = (specials[k_ids] | (np.arange(Tk) == 0)[None, :]) & k                   # (B, Tk)
        on_sink = (w * sink[:, None, None, None, :]).sum(-1)                            # (B, L, H, Tq)
        self.sink += (on_sink * rows).sum((0, 3))


def _roles_table(counts: RoleCounts, kind: str) -> list[dict]:
    L, H = counts.rows.shape
    out = []
    for layer in range(L):
        for h in range(H):
            rows = max(counts.rows[layer, h], 1)
            shares = {f"{d:+d}" if d else "0": round(float(counts.offsets[n, layer, h] / rows), 4)
                      for n, d in enumerate(OFFSETS)}
            rare = round(float(counts.rare[layer, h] / max(counts.rare_rows[layer, h], 1)), 4)
            sink = round(float(counts.sink[layer, h] / rows), 4)
            best = max(shares, key=shares.get)
            role = (f"positional {best}" if shares[best] >= POSITIONAL else "rare word" if rare >= ROLE_SHARE
                    else "sink" if sink >= ROLE_SHARE else "none")
            out.append({"layer": layer, "head": h, "role": role, "positional": shares, "rare_word": rare,
                        "sink": sink})
    return out


@dataclass
class _Collected:
    counts: dict
    word_maps: list = field(default_factory=list)        # per pair (M, nt, ns)


def collect(tr, corpus: Corpus, frequencies: dict, progress=None, budget: int | None = None) -> _Collected:
    """One pass over the corpus: role counts of every kind and every pair's word-level base maps."""
    c = tr.config
    layers = {"encoder_self": c.n_encoder_layers, "decoder_self": c.n_decoder_layers, "cross": c.n_decoder_layers}
    got = _Collected({kind: RoleCounts.zeros(layers[kind], c.n_heads) for kind in KINDS},
                     [None] * len(corpus.sources))
    pairs = [(tr.encode_source(s)[0], tr.target_ids(t)) for s, t in zip(corpus.sources, corpus.targets)]
    specials = np.zeros(len(tr.engine.tokenizer), dtype=bool)
    specials[[i for i in tr.engine.special_ids if 0 <= i < len(specials)]] = True

    def reduce(b: PassBatch) -> None:
        src_f, tgt_f = frequencies["source"], frequencies["target"]
        got.counts["encoder_self"].add(b.weights["encoder_self"], b.source_len, b.source, b.source_len,
                                       src_f, specials, causal=False)
        got.counts["decoder_self"].add(b.weights["decoder_self"], b.target_len, b.fed, b.target_len,
                                       tgt_f, specials, causal=True)
        got.counts["cross"].add(b.weights["cross"], b.target_len, b.source, b.source_len, src_f, specials,
                                causal=False)
        for k, r in enumerate(b.rows):
            S, T = b.source_len[k], b.target_len[k]
            maps = piece_maps(b.weights["cross"][k, :, :, :T, :S], b.norm_layer[k, :, :T, :S], b.alti[k, :T, :S])
            words = pair_words(tr, pairs[r][0], pairs[r][1], corpus.source_words[r], corpus.target_words[r])
            got.word_maps[r] = to_words(maps, words.target, words.n_target, words.source, words.n_source)
    corpus_pass(tr, pairs, reduce, progress=progress, budget=budget)
    return got


def _aer(scores: list, references: list, rule: str, index: list) -> float:
    counts = AERCounts()
    for i in index:
        counts.add(links_from_scores(scores[i], rule), references[i])
    return round(100 * counts.aer, 2)


def split(n: int, seed: int = 0) -> tuple[list, list]:
    """Pair indices -> (fit half, held-out half), at random; one pair is both (nothing to hold out)."""
    if n < 2:
        return list(range(n)), list(range(n))
    order = np.random.RandomState(seed).permutation(n)
    return sorted(order[: n // 2].tolist()), sorted(order[n // 2:].tolist())


def alignment_table(tr, got: _Collected, references: list) -> dict:
    """Every method x rule: AER (in points) on the fit and held-out halves; the choices made on fit."""
    c = tr.config
    names = map_names(c.n_decoder_layers, c.n_heads)
    fit, held = split(len(references))
    combination = fit_combination([features(got.word_maps[i]) for i in fit],
                                  [references[i].possible for i in fit])
    methods = names[: c.n_decoder_layers * c.n_heads] + [f"layer {layer}" for layer in range(c.n_decoder_layers)] \
        + names[c.n_decoder_layers * c.n_heads:] + ["combination"]
    rows = []
    for name in methods:
        scores = [method_scores(name, m, names, combination, c.n_heads) for m in got.word_maps]
        for rule in RULES:
            rows.append({"method": name, "rule": rule, "aer_fit": _aer(scores, references, rule, fit),
                         "aer_held_out": _aer(scores, references, rule, held)})
    heads = [r for r in rows if r["method"].startswith("head ")]
    named = min(heads, key=lambda r: (r["aer_fit"], r["method"], r["rule"]))         # ties: by name
    truly = min(heads, key=lambda r: (r["aer_held_out"], r["method"], r["rule"]))
    best = min(rows, key=lambda r: (r["aer_fit"], r["method"], r["rule"]))

    def head(r: dict) -> dict:
        layer, h = map(int, r["method"].split()[1].split("."))
        return {"layer": layer, "head": h, "rule": r["rule"], "aer_fit": r["aer_fit"], "aer_held_out": r["aer_held_out"]}
    return {"split": {"fit": len(fit), "held_out": len(held), "seed": 0},
            "best_alignment_head": head(named), "best_head_on_held_out": head(truly),
            "method": best["method"], "rule": best["rule"], "method_aer_fit": best["aer_fit"],
            "method_aer_held_out": best["aer_held_out"], "combination": combination,
            "combination_features": [f"{n}" for n in names] + [f"{n} (column-normalised)" for n in names],
            "methods": sorted(rows, key=lambda r: (r["aer_fit"], r["method"], r["rule"]))}


def analyze(tr, corpus: Corpus, frequencies: dict, description: dict, progress=None,
            budget: int | None = None) -> dict:
    """Everything head_roles.json holds (see the module docstring); `description` names the
    model, data and command."""
    started = time.perf_counter()
    got = collect(tr, corpus, frequencies, progress, budget)
    aligned = alignment_table(tr, got, corpus.references)
    kinds = {kind: _roles_table(got.counts[kind], kind) for kind in KINDS}
    per_head = {(r["method"], r["rule"]): r for r in aligned["methods"]}
    for entry in kinds["cross"]:
        name = f"head {entry['layer']}.{entry['head']}"
        entry["aer"] = {rule: {"fit": per_head[(name, rule)]["aer_fit"], "held_out": per_head[(name, rule)]["aer_held_out"]}
                        for rule in RULES}
    return {**description, "reference": corpus.reference, "pairs": len(corpus.sources),
            "positional_threshold": POSITIONAL, "role_share": ROLE_SHARE, "kinds": kinds, **aligned,
            "seconds": round(time.perf_counter() - started, 1)}


def write_head_roles(result: dict, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_corpus(data_dir, split_name: str, source_lang: str, target_lang: str, alignments=None,
                limit: int | None = None) -> Corpus:
    """Pairs of Multi30k `split_name`; references from a Pharaoh file (its indices count the lines'
    whitespace tokens; line n links pair n, the file may cover only the first pairs), or the silver
    eflomal alignment (val only: it is what word_align computes)."""
    from ..training.data import read_split
    from .alignment import read_pharaoh, text_words
    sources = read_split(data_dir, split_name, source_lang)
    targets = read_split(data_dir, split_name, target_lang)
    if alignments is not None:
        gold = read_pharaoh(alignments)
        n = min(len(gold), len(sources), limit or len(sources))
        return Corpus(sources[:n], targets[:n], [s.split() for s in sources[:n]], [t.split() for t in targets[:n]],
                      gold[:n], f"gold: Pharaoh file {Path(alignments).name} ({n} pairs; sure i-j, possible ipj)")
    if split_name != "val":
        raise ValueError("the silver reference covers Multi30k val only: give --alignments FILE for another split")
    from ..diagnosis.word_align import val_alignments
    silver = val_alignments(data_dir, source_lang, target_lang)
    n = min(len(sources), limit or len(sources))
    return Corpus(sources[:n], targets[:n], [text_words(s) for s in sources[:n]], [text_words(t) for t in targets[:n]],
                  [Gold(set(x)) for x in silver[:n]],
                  "silver: eflomal (Östling and Tiedemann 2016) trained on Multi30k train + val, both directions "
                  "intersected (transformer/diagnosis/word_align.py); sure links only, so AER = 1 - F1")
