"""Cached what-if runs: the sentence decoded on from a forced prefix (issue 23), and the contrastive
saliency of one step. Like backend.translate, one Result per process for each call, shared by
every session (st.cache_resource; its arrays are read-only)."""
from __future__ import annotations

import streamlit as st

from transformer.explain.contrastive import contrastive_saliency

from .translation import get_translator, translation_slots
from .catalogue import ModelRef
from .result import Result, to_result
from ..server.settings import TOP_K
from .warm import RunKey, hold


def branch_key(model: ModelRef, device: str, text: str, beam_size: int, prefix: tuple, explain: bool,
               head_mask: tuple = ()) -> str:
    """Names one branch run (its figures' cache key); never equal to a plain run's key."""
    return RunKey(model, device, text, beam_size, ("prefix",) + tuple(prefix), tuple(head_mask), explain).digest


@st.cache_resource(max_entries=64, show_spinner=False)
def translate_prefix(model: ModelRef, device: str, text: str, beam_size: int, prefix: tuple, slots: int,
                     explain: bool = False, head_mask: tuple = ()) -> Result:
    """translate(text, prefix=pieces): the pieces forced, then greedy or beam search goes on; with
    head_mask, the branch decoded again with those heads off (the Ablation view on a branch).
    ValueError (unknown piece, </s> before the end, longer than max_len) passes through uncached."""
    translator = get_translator(model, device)
    semaphore = translation_slots(slots)
    if not semaphore.acquire(timeout=120):
        raise TimeoutError("the server is busy translating for others")
    try:
        out = translator.translate(text, beam_size=beam_size, capture=True, top_k=TOP_K, prefix=list(prefix),
                                   explain=bool(explain), head_mask=set(head_mask) or None)
    finally:
        semaphore.release()
    key = branch_key(model, device, text, beam_size, prefix, explain, head_mask)
    return hold(key, to_result(out, str(translator.device), tuple(head_mask), key))


@st.cache_data(max_entries=256, show_spinner=False)
def contrast(model: ModelRef, device: str, source_tokens: tuple, target_tokens: tuple, output_tokens: tuple,
             step: int, alternative: str, head_mask: tuple = ()) -> dict:
    """Why output_tokens[step] rather than `alternative` (transformer.explain.contrastive), as plain arrays."""
    run = _Run(list(source_tokens), list(target_tokens), list(output_tokens))
    c = contrastive_saliency(get_translator(model, device), run, step, alternative,
                             head_mask=set(head_mask) or None)
    return {"margin": c.margin, "source": c.source, "prefix": c.prefix}


class _Run:
    """The three token lists contrastive_saliency reads from a translation."""
    def __init__(self, source_tokens, target_tokens, output_tokens):
        self.source_tokens, self.target_tokens, self.output_tokens = source_tokens, target_tokens, output_tokens
