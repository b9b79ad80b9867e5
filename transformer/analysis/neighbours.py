"""Nearest vocabulary pieces in a model's source embedding space: what a source word could be
swapped for ("what if the source said *bat* instead of *club*?", issue 23).

`nearest_pieces(translator, ids, k)` ranks every piece of the source vocabulary by the cosine
similarity of its input embedding row to the query: the row of `ids`, or the mean of the rows when
a word is several pieces (the word is swapped as a whole). Left out: the special pieces (padding,
<unk>, <s>, </s>, language codes, any piece the tokenizer marks special) and the query pieces
themselves. `word_start=True` keeps only pieces that begin a word (▁ / Ġ), so a swap replaces a
whole word by a whole word. Works for every family: the engine answers what its source vocabulary is
(engine.py; Marian with separate vocabularies reads source ids by its source vocabulary).
`swap_word` turns a swap into the edited sentence.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

WORD_MARKERS = ("\u2581", "\u0120")      # sentencepiece ▁, byte-level BPE Ġ
# Beside a model of ours (a joint vocabulary: the German "▁zerrissene" was a neighbour of "horse"):
# which pieces the source side of its training data uses, one bit per id (~1 KB). Written by
# `python -m transformer source-pieces MODEL --data-dir DIR`; the data itself is never shipped.
SOURCE_PIECES = "source_pieces.json"


@dataclass(frozen=True)
class Neighbour:
    piece: str          # the vocabulary piece, as the source side names it
    id: int             # its source-side id (a row of the embedding matrix)
    similarity: float   # cosine similarity to the query, in [-1, 1]


def source_embedding_matrix(translator) -> np.ndarray:
    """(V, D) float32: the source-side input embedding rows (before any scale: cosine ignores it)."""
    return translator.engine.source_embedding_weight().detach().float().cpu().numpy()


def is_word_start(piece: str) -> bool:
    return piece.startswith(WORD_MARKERS)


def nearest_pieces(translator, ids, k: int = 8, *, word_start: bool = False, among=None) -> list[Neighbour]:
    """The k source pieces nearest to `ids` (one id, or a word's ids: their mean embedding) by
    cosine similarity of the model's source input embeddings, most similar first (ties: lower id).
    Special pieces and `ids` themselves never appear; fewer than k come back when the vocabulary
    has fewer candidates. `among`: only these ids may be neighbours (a joint vocabulary's source
    side, source_side_ids). ValueError for k < 1, no ids, or an id outside the vocabulary."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    query_ids = [int(ids)] if isinstance(ids, (int, np.integer)) else [int(i) for i in ids]
    if not query_ids:
        raise ValueError("no piece to find neighbours for")
    matrix = source_embedding_matrix(translator)                                 # (V, D)
    pieces, special = translator.engine.source_vocabulary(matrix.shape[0])
    size = len(pieces)
    for i in query_ids:
        if not 0 <= i < size:
            raise ValueError(f"id {i} is outside the source vocabulary (0..{size - 1})")
    matrix = matrix[:size]
    query = matrix[query_ids].mean(axis=0)                                        # (D,)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    similarity = matrix @ query / np.maximum(norms, 1e-12)                        # (V,)
    allowed = np.ones(size, dtype=bool)
    allowed[[i for i in special | set(query_ids) if i < size]] = False
    if word_start:
        allowed &= np.fromiter((is_word_start(p) for p in pieces), dtype=bool, count=size)
    if among is not None:
        side = np.zeros(size, dtype=bool)
        side[[i for i in (int(i) for i in among) if 0 <= i < size]] = True
        allowed &= side
    candidates = np.flatnonzero(allowed)
    order = candidates[np.lexsort((candidates, -similarity[candidates]))][:int(k)]
    return [Neighbour(pieces[i], int(i), float(similarity[i])) for i in order]


def source_ids(translator, pieces) -> list[int]:
    """Source pieces (Translation.source_tokens) back to source-side ids."""
    return translator.engine.source_piece_ids(pieces)


def swap_word(translator, pieces, start: int, stop: int, replacement: str) -> str:
    """The sentence of `pieces` (a Translation's source_tokens) with pieces[start:stop] replaced by
    the piece `replacement`, as text to translate again; special pieces are left out. A replacement
    that starts a word gets a space before it even where the old word had none."""
    pieces = [str(p) for p in pieces]
    if not 0 <= start < stop <= len(pieces):
        raise ValueError(f"no pieces {start}..{stop} in a sentence of {len(pieces)}")
    ids = source_ids(translator, pieces)
    special = translator.engine.source_special(ids)
    keep = [p for i, p in zip(ids[:start], pieces[:start]) if i not in special]
    tail = [p for i, p in zip(ids[stop:], pieces[stop:]) if i not in special]
    return translator.engine.join_pieces(keep + [str(replacement)] + tail)


__all__ = ["Neighbour", "nearest_pieces", "source_embedding_matrix", "source_ids", "swap_word", "is_word_start"]

if __name__ == "__main__":          # a quick look: python -m transformer.analysis.neighbours pretrained/en-de ▁dog
    import sys
    from ..translator import Translator
    tr = Translator.load(sys.argv[1], device="cpu")
    with torch.inference_mode():
        for n in nearest_pieces(tr, source_ids(tr, [sys.argv[2]]), 10, word_start=True):
            print(f"{n.similarity:.3f} {n.piece}")


def source_side_counts(translator, sentences) -> np.ndarray:
    """(V,) int64: how often each piece id occurs when the source sentences are tokenised."""
    counts = np.zeros(len(translator.engine.tokenizer), dtype=np.int64)
    for ids in translator.engine.source_id_rows(sentences):
        np.add.at(counts, ids, 1)
    return counts


def write_source_pieces(model_dir, translator, sentences, described: str) -> dict:
    """MODEL/source_pieces.json: the ids that occur in `sentences` (the source side of the training
    data), as a bitmap; `described` says which data (for the file's reader). Returns what it wrote."""
    seen = source_side_counts(translator, sentences) > 0
    record = {"source_lang": translator.source_lang, "data": described, "vocab_size": int(seen.size),
              "pieces_seen": int(seen.sum()), "bitmap": base64.b64encode(np.packbits(seen).tobytes()).decode("ascii")}
    Path(model_dir, SOURCE_PIECES).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def source_side_ids(model_dir) -> np.ndarray | None:
    """Sorted ids of the pieces the source side of the model's training data uses, from
    MODEL/source_pieces.json; None when the model has no such file (Hugging Face models, or ours
    before it was written). ValueError for a file that is not one."""
    path = Path(model_dir, SOURCE_PIECES)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        size = int(record["vocab_size"])
        bits = np.unpackbits(np.frombuffer(base64.b64decode(record["bitmap"], validate=True), dtype=np.uint8))[:size]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a source pieces file ({exc})") from exc
    if bits.size != size:
        raise ValueError(f"{path}: not a source pieces file (its bitmap holds {bits.size} ids, not {size})")
    return np.flatnonzero(bits)
