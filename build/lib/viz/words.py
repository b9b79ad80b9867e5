"""Subword pieces → words, for attention maps that read at word level (numpy only).

A word starts at a piece beginning with ▁. The structural specials <s>, </s>,
<pad> are one-piece words of their own, and a piece right after one starts a new
word. <unk> stands for real characters, so it stays inside the word it occurs in.
Merging SUMS attention over a word's key pieces (how much the query looks at the
word) and AVERAGES over its query pieces (what the word looks at), so rows still
sum to 1.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ._base import check_attention
from ._labels import STRUCTURAL_PIECES, WORD_START

Span = tuple[int, int]   # [start, end) piece indices of one word


def word_spans(pieces: Sequence[str]) -> list[Span]:
    """Half-open (start, end) piece ranges, one per word, covering every piece."""
    starts = []
    for i, piece in enumerate(pieces):
        after_special = i > 0 and pieces[i - 1] in STRUCTURAL_PIECES
        if i == 0 or piece.startswith(WORD_START) or piece in STRUCTURAL_PIECES or after_special:
            starts.append(i)
    ends = starts[1:] + [len(pieces)]
    return list(zip(starts, ends))


def merge_pieces(pieces: Sequence[str], spans: Sequence[Span]) -> list[str]:
    """Word strings: the pieces of each span joined (▁Fahr + rad → ▁Fahrrad)."""
    return ["".join(pieces[s:e]) for s, e in spans]


def span_matrix(spans: Sequence[Span], length: int, dtype) -> np.ndarray:
    """(length, words) 0/1 membership: M[i, w] = 1 when piece i lies in word w."""
    m = np.zeros((length, len(spans)), dtype=dtype)
    for w, (s, e) in enumerate(spans):
        m[s:e, w] = 1
    return m


def merge_attention(weights, query_pieces: Sequence[str], key_pieces: Sequence[str]
                    ) -> tuple[np.ndarray, list[str], list[str]]:
    """(..., Q, K) piece attention → (..., Wq, Wk) word attention, plus the words.

    Leading dims (layers, heads) are kept. Keys are summed within a word, queries
    averaged, so each merged row still sums to what a piece row summed to.
    """
    w, query, key = check_attention(weights, query_pieces, key_pieces, ndim=None)   # (..., Q, K)
    q_spans, k_spans = word_spans(query), word_spans(key)
    keys = span_matrix(k_spans, len(key), w.dtype)                                   # (K, Wk)
    members = span_matrix(q_spans, len(query), w.dtype)                              # (Q, Wq)
    queries = (members / members.sum(axis=0, keepdims=True)).T                       # (Wq, Q)
    merged = queries @ w @ keys                                                      # (..., Wq, Wk)
    return merged, merge_pieces(query, q_spans), merge_pieces(key, k_spans)



def merge_keys(weights, key_pieces: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(..., K) piece attention → (..., Wk) word attention over keys only, rows kept as given.

    For rows that are not a sentence's pieces (one decoding step, or one row per head).
    """
    w = np.asarray(weights, dtype=np.float64 if np.asarray(weights).dtype.kind in "biu" else None)
    if isinstance(key_pieces, str) or w.ndim < 1 or w.shape[-1] != len(key_pieces):
        raise ValueError(f"weights of shape {w.shape}: the last dim must equal the {len(key_pieces)} key pieces")
    key = [str(k) for k in key_pieces]
    spans = word_spans(key)
    return w @ span_matrix(spans, len(key), w.dtype), merge_pieces(key, spans)      # (..., Wk)
