"""The Head roles view's cached run (issue 34): the word alignment of the run on screen, one forced
pass with align=True over exactly the pieces on screen, plus its cross-attention read head by head;
the model's head_roles.json; and a user's Pharaoh gold parsed and scored with
transformer/analysis/alignment.py. Like lens.py: one result per process for each call, shared by
every session (warm.cached_run: its arrays are read-only, handed out without hashing when this
process holds it already). Nothing is kept in module globals."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# at module level, not in the functions: two sessions' threads importing a package and one of its
# submodules at once can deadlock in importlib
from transformer.analysis.aligner import FALLBACK, pair_words
from transformer.analysis.alignment import AERCounts, Gold, links_from_scores, parse_pharaoh, text_words, to_words
from transformer.analysis.head_roles import HEAD_ROLES

from .catalogue import ModelRef, file_stamps
from .result import read_only
from .translation import get_translator, translation_slot
from .warm import RunKey, cached_run


@dataclass(frozen=True)
class AlignmentRun:
    """`translate(text, target=pieces, align=True)` as plain data, with the words it aligns."""
    output_tokens: tuple         # the pieces aligned (those on screen)
    links: tuple                 # out.alignment: ((source piece i, output piece j), ...)
    source_words: tuple          # the words drawn and counted by a Pharaoh link (word_align.words)
    output_words: tuple
    source_owner: tuple          # per source piece: its word index, or None (a special piece)
    output_owner: tuple          # per output piece likewise
    word_links: tuple            # ((source word i, output word j), ...) sorted: out.alignment by words
    cross: np.ndarray            # float32 (L, H, T, S): the pass's cross-attention
    head_links: tuple            # [layer][head] -> frozenset of word links by `rule`
    method: str                  # what out.alignment used ("combination", "alti+", ...)
    rule: str                    # "row" / "mutual"
    fallback: bool               # the model has no head_roles.json: FALLBACK was used
    key: str


ALIGNMENT = "alignment"


def alignment_key(run: RunKey, pieces: tuple) -> RunKey:
    """The alignment of `pieces` (the pieces on screen) for the page's run (page/translation.page_run):
    the run's key as one forced pass (beam 1, no explain), of kind ALIGNMENT with the pieces as its
    target. Derived from the page's key, never rebuilt from arguments."""
    return run.but(kind=ALIGNMENT, beam_size=1, target=tuple(pieces), explain=False)


def head_roles(model: ModelRef, device: str) -> dict | None:
    """The model directory's head_roles.json as a dict (read once per Translator), None without one."""
    return get_translator(model, device).head_roles


def best_alignment_head(path) -> tuple[int, int] | None:
    """(layer, head) of the cross-attention head a model directory's head_roles.json names the best
    aligner (chosen on its fit half); None without the file (hub ids, Hugging Face directories) or
    when it cannot be read. Read once per file version."""
    (stamp,) = file_stamps((str(Path(str(path)) / HEAD_ROLES),))
    return None if stamp is None else _best_alignment_head(str(path), stamp)


@functools.lru_cache(maxsize=16)
def _best_alignment_head(path: str, stamp) -> tuple[int, int] | None:
    try:
        best = json.loads((Path(path) / HEAD_ROLES).read_text(encoding="utf-8"))["best_alignment_head"]
        return int(best["layer"]), int(best["head"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def word_links_of(piece_links, source_owner, output_owner) -> list[tuple[int, int]]:
    """Piece links -> the sorted word links they stand for (special pieces belong to no word)."""
    return sorted({(source_owner[i], output_owner[j]) for i, j in piece_links
                   if source_owner[i] is not None and output_owner[j] is not None})


@cached_run(ALIGNMENT, max_entries=32)
def alignment_run(key: RunKey, slots: int) -> AlignmentRun:
    """The alignment of an alignment_key(...) (its text, the pieces of its target, its heads off):
    held, or computed once per process."""
    text, pieces = key.text, key.target
    translator = get_translator(key.model, key.device)
    with translation_slot(slots):
        out = translator.translate(text, top_k=0, target=list(pieces), head_mask=set(key.head_mask) or None,
                                   align=True)
    if tuple(out.output_tokens) != tuple(pieces):
        raise ValueError("the alignment read other pieces than those on screen")
    roles = translator.head_roles
    spec = {"method": roles["method"], "rule": roles["rule"]} if roles and "method" in roles else FALLBACK
    rule = str((roles or {}).get("best_alignment_head", {}).get("rule", spec["rule"]))
    src, tgt = text_words(text), text_words(out.text)
    words = pair_words(translator, out.source_ids, out.output_ids, src, tgt)
    # pair_words falls back to one word per piece where pieces do not spell the words: draw those
    source_words = src if words.n_source == len(src) else _piece_words(out.source_tokens, words.source)
    output_words = tgt if words.n_target == len(tgt) else _piece_words(out.output_tokens, words.target)
    cross = np.asarray(out.attention.cross, dtype=np.float32)                        # (L, H, T, S)
    word_maps = to_words(cross, words.target, words.n_target, words.source, words.n_source)    # (L, H, nt, ns)
    head_links = tuple(tuple(frozenset(links_from_scores(word_maps[layer, h], rule)) for h in range(cross.shape[1]))
                       for layer in range(cross.shape[0]))
    return AlignmentRun(
        output_tokens=tuple(out.output_tokens), links=tuple((int(i), int(j)) for i, j in out.alignment),
        source_words=tuple(source_words), output_words=tuple(output_words), source_owner=tuple(words.source),
        output_owner=tuple(words.target), word_links=tuple(word_links_of(out.alignment, words.source, words.target)),
        cross=read_only(cross), head_links=head_links, method=str(spec["method"]), rule=rule,
        fallback=not (roles and "method" in roles), key=key.digest)


def _piece_words(pieces, owners) -> list[str]:
    out = {}
    for piece, w in zip(pieces, owners):
        if w is not None:
            out.setdefault(w, piece.replace("\u2581", "") or piece)
    return [out[w] for w in sorted(out)]


@dataclass(frozen=True)
class GoldReport:
    """AER (0..100) against a user's gold for one sentence: the drawn alignment, every cross head."""
    sure: frozenset
    possible: frozenset
    aer: float                   # the drawn alignment (out.alignment by words)
    head_aer: np.ndarray         # (L, H): each cross head's links by the run's rule
    best_head: tuple             # (layer, head) of the lowest head AER


def parse_gold(text: str, n_source: int, n_output: int) -> tuple[Gold | None, str]:
    """A Pharaoh line typed by the user ("0-0 1-1 2p3") -> (Gold, "") for these words; (None, why)
    when it is malformed or names a word that is not there; (None, "") when it is empty."""
    if not text.strip():
        return None, ""
    try:
        gold = parse_pharaoh(text)
    except ValueError as exc:
        return None, str(exc)
    for i, j in sorted(gold.possible):
        if i >= n_source or j >= n_output:
            return None, (f"link {i}-{j} names a word that is not there: the source has {n_source} words "
                          f"(0 to {n_source - 1}), the output {n_output} (0 to {n_output - 1})")
    return gold, ""


def sentence_aer(links, gold: Gold) -> float:
    """AER in points of one sentence's word links against `gold` (alignment.py's AERCounts)."""
    return 100.0 * AERCounts().add(set(links), gold).aer


def gold_report(run: AlignmentRun, gold: Gold) -> GoldReport:
    head_aer = np.array([[sentence_aer(links, gold) for links in row] for row in run.head_links], dtype=float)
    best = np.unravel_index(int(np.argmin(head_aer)), head_aer.shape) if head_aer.size else (0, 0)
    return GoldReport(sure=frozenset(gold.sure), possible=frozenset(gold.possible),
                      aer=sentence_aer(run.word_links, gold), head_aer=head_aer,
                      best_head=(int(best[0]), int(best[1])))


def sentence_shares(weights: np.ndarray, key_tokens, specials=("</s>", "<s>", "<pad>")) -> dict:
    """One head's (Q, K) weights on this sentence -> the shares head_roles.json reports over a corpus:
    rows peaking at offset -1 / 0 / +1 ("prev", "self", "next") and the mean weight on the first key
    or a special piece ("sink")."""
    w = np.asarray(weights, dtype=float)
    Q, K = w.shape
    if Q == 0 or K == 0:
        return {"prev": 0.0, "self": 0.0, "next": 0.0, "sink": 0.0}
    offset = w.argmax(-1) - np.arange(Q)
    sink = np.array([k == 0 or str(t) in specials for k, t in enumerate(key_tokens)])
    return {"prev": float((offset == -1).mean()), "self": float((offset == 0).mean()),
            "next": float((offset == 1).mean()), "sink": float(w[:, sink].sum(-1).mean())}
