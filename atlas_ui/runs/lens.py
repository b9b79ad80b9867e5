"""The Logit lens view's cached runs (issue 33): the lens over the run on screen, and the DecoderLens
translations from each encoder layer. Like translation.translate, one result per process for each
call, shared by every session (warm.cached_run: its arrays are read-only, handed out without
hashing when this process holds it already). Nothing is kept in module globals:
each call's state is its own."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .result import read_only
from .translation import get_translator, translation_slot
from .warm import RunKey, cached_run

LENS_TOP_K = 5              # pieces kept per cell (the hover and a click show them)


@dataclass(frozen=True)
class LensRun:
    """`translate(text, target=pieces, lens=True)` as plain data: the lens over exactly the pieces on
    screen (the original, a branch, a beam hypothesis or a forced reference), one teacher-forced pass."""
    sites: tuple                 # ("L0.self", "L0.cross", "L0.ffn", ...)
    output_tokens: tuple         # the pieces read (those on screen)
    chosen_prob: np.ndarray      # float32 (T, n_sites)
    chosen_rank: np.ndarray      # int32 (T, n_sites)
    top_pieces: tuple            # [t][site] -> tuple of LENS_TOP_K pieces, best first
    top_probs: np.ndarray        # float32 (T, n_sites, k)
    key: str                     # names the call (figure cache keys)


@dataclass(frozen=True)
class DecoderLensRun:
    """One free translation per encoder layer (DecoderLens), the last being the model's own."""
    rows: tuple                  # ((label, pieces, probabilities), ...), encoder layer 0 first
    key: str


LENS, DECODER_LENS = "lens", "decoder_lens"


def lens_key(run: RunKey, pieces: tuple) -> RunKey:
    """The lens over `pieces` (the pieces on screen) for the page's run (page/translation.page_run):
    the run's key as one teacher-forced pass (beam 1, no explain), of kind LENS with the pieces as its
    target. Derived from the page's key, never rebuilt from arguments."""
    return run.but(kind=LENS, beam_size=1, target=tuple(pieces), explain=False)


def decoder_lens_key(run: RunKey, prefix: tuple = ()) -> RunKey:
    """The DecoderLens translations for the page's run: decoded freely (the run's beam, no reference)
    after the forced `prefix` of a what-if branch (() on the original), of kind DECODER_LENS with the
    prefix as its target. Derived from the page's key."""
    return run.but(kind=DECODER_LENS, target=tuple(prefix), explain=False)


@cached_run(LENS, max_entries=32)
def lens_run(key: RunKey, slots: int) -> LensRun:
    """The lens of a lens_key(...) (its text, the pieces of its target, its heads off): held, or
    computed once per process."""
    pieces = key.target
    translator = get_translator(key.model, key.device)
    with translation_slot(slots):
        out = translator.translate(key.text, capture=False, top_k=LENS_TOP_K, target=list(pieces),
                                   head_mask=set(key.head_mask) or None, lens=True)
    lens = out.lens
    if tuple(out.output_tokens) != tuple(pieces):
        raise ValueError("the lens read other pieces than those on screen")
    top = tuple(tuple(tuple(piece for piece, _ in cell) for cell in row) for row in lens.top_k)
    return LensRun(sites=tuple(lens.sites), output_tokens=tuple(out.output_tokens),
                   chosen_prob=read_only(np.asarray(lens.chosen_prob, dtype=np.float32)),
                   chosen_rank=read_only(np.asarray(lens.chosen_rank, dtype=np.int32)),
                   top_pieces=top, top_probs=read_only(np.asarray(lens.top_probs, dtype=np.float32)),
                   key=key.digest)


@cached_run(DECODER_LENS, max_entries=32)
def decoder_lens_run(key: RunKey, slots: int) -> DecoderLensRun:
    """The sentence of a decoder_lens_key(...) decoded (greedy or beam, after the forced pieces of its
    target) from each encoder layer's output: held, or computed once per process."""
    prefix = key.target
    translator = get_translator(key.model, key.device)
    layers = translator.config.n_encoder_layers
    rows = []
    for k in range(layers):
        with translation_slot(slots):         # one slot per translation: others' runs go between them
            out = translator.translate(key.text, beam_size=key.beam_size, capture=False, top_k=0, encoder_layer=k,
                                       prefix=list(prefix) or None, head_mask=set(key.head_mask) or None)
        label = f"encoder layer {k}" + (" (the model)" if k == layers - 1 else "")
        rows.append((label, tuple(out.output_tokens), tuple(float(s.prob) for s in out.steps)))
    return DecoderLensRun(rows=tuple(rows), key=key.digest)
