"""The Logit lens view's cached runs (issue 33): the lens over the run on screen, and the DecoderLens
translations from each encoder layer. Like translation.translate, one result per process for each
call, shared by every session (st.cache_resource; its arrays are read-only), and handed out from
warm.held without hashing when this process holds it already. Nothing is kept in module globals:
each call's state is its own."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from .catalogue import ModelRef
from .result import read_only
from .translation import get_translator, translation_slots
from .warm import RunKey, held, hold

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


def lens_key(model: ModelRef, device: str, text: str, pieces: tuple, head_mask: tuple = ()) -> str:
    return "lens:" + RunKey(model, device, text, 1, ("lens",) + tuple(pieces), tuple(head_mask)).digest


def decoder_lens_key(model: ModelRef, device: str, text: str, beam: int, prefix: tuple, head_mask: tuple = ()) -> str:
    return "decoder_lens:" + RunKey(model, device, text, beam, ("prefix",) + tuple(prefix), tuple(head_mask)).digest


def _slot(slots: int):
    semaphore = translation_slots(slots)
    if not semaphore.acquire(timeout=120):
        raise TimeoutError("the server is busy translating for others")
    return semaphore


def lens_run(model: ModelRef, device: str, text: str, pieces: tuple, slots: int, head_mask: tuple = ()) -> LensRun:
    """The lens over `pieces` (a run's output_tokens) for `text`: held, or computed once per process."""
    ready = held().get(lens_key(model, device, text, pieces, head_mask))
    return ready if ready is not None else _lens_run(model, device, text, tuple(pieces), slots, tuple(head_mask))


@st.cache_resource(max_entries=32, show_spinner=False)
def _lens_run(model: ModelRef, device: str, text: str, pieces: tuple, slots: int, head_mask: tuple = ()) -> LensRun:
    translator = get_translator(model, device)
    semaphore = _slot(slots)
    try:
        out = translator.translate(text, capture=False, top_k=LENS_TOP_K, target=list(pieces),
                                   head_mask=set(head_mask) or None, lens=True)
    finally:
        semaphore.release()
    lens = out.lens
    if tuple(out.output_tokens) != tuple(pieces):
        raise ValueError("the lens read other pieces than those on screen")
    top = tuple(tuple(tuple(piece for piece, _ in cell) for cell in row) for row in lens.top_k)
    key = lens_key(model, device, text, pieces, head_mask)
    return hold(key, LensRun(sites=tuple(lens.sites), output_tokens=tuple(out.output_tokens),
                             chosen_prob=read_only(np.asarray(lens.chosen_prob, dtype=np.float32)),
                             chosen_rank=read_only(np.asarray(lens.chosen_rank, dtype=np.int32)),
                             top_pieces=top, top_probs=read_only(np.asarray(lens.top_probs, dtype=np.float32)),
                             key=key))


def decoder_lens_run(model: ModelRef, device: str, text: str, beam: int, prefix: tuple, slots: int,
                     head_mask: tuple = ()) -> DecoderLensRun:
    """The sentence decoded (greedy or beam `beam`, after the forced `prefix` of a what-if branch)
    from each encoder layer's output: held, or computed once per process."""
    ready = held().get(decoder_lens_key(model, device, text, beam, prefix, head_mask))
    return ready if ready is not None else _decoder_lens_run(model, device, text, beam, tuple(prefix), slots,
                                                             tuple(head_mask))


@st.cache_resource(max_entries=32, show_spinner=False)
def _decoder_lens_run(model: ModelRef, device: str, text: str, beam: int, prefix: tuple, slots: int,
                      head_mask: tuple = ()) -> DecoderLensRun:
    translator = get_translator(model, device)
    layers = translator.config.n_encoder_layers
    rows = []
    for k in range(layers):
        semaphore = _slot(slots)              # one slot per translation: others' runs go between them
        try:
            out = translator.translate(text, beam_size=beam, capture=False, top_k=0, encoder_layer=k,
                                       prefix=list(prefix) or None, head_mask=set(head_mask) or None)
        finally:
            semaphore.release()
        label = f"encoder layer {k}" + (" (the model)" if k == layers - 1 else "")
        rows.append((label, tuple(out.output_tokens), tuple(float(s.prob) for s in out.steps)))
    key = decoder_lens_key(model, device, text, beam, prefix, head_mask)
    return hold(key, DecoderLensRun(rows=tuple(rows), key=key))
