"""Cached what-if runs: the sentence decoded on from a forced prefix (issue 23), and the contrastive
saliency of one step. Like translation.translate, one Result per process for each call, shared by
every session (st.cache_resource; its arrays are read-only)."""
from __future__ import annotations

import streamlit as st

from transformer.explain.contrastive import contrastive_saliency

from .translation import get_translator, translation_slot
from .catalogue import ModelRef
from .result import Result, to_result
from ..server.settings import TOP_K
from .warm import RunKey, held, hold, tagged


def branch_key(run: RunKey, prefix: tuple) -> RunKey:
    """`run` decoded on from the forced pieces `prefix` (a what-if branch): its key is the run's
    with the tagged target ("prefix", *pieces), held under warm.tagged(key) ("prefix:digest"), never
    a plain run's name, even a run forced through pieces that start with one spelled "prefix".
    Derived from the page's key (page/main.page_run), never rebuilt from arguments."""
    return run.but(target=("prefix",) + tuple(prefix))


def translate_prefix(run: RunKey, slots: int) -> Result:
    """translate(text, prefix=pieces) for a branch_key(...): the pieces forced, then greedy or beam
    search goes on; with head_mask, the branch decoded again with those heads off (the Ablation view
    on a branch). One Result per key, held under warm.tagged(run) (the run this process holds already
    is handed out without st.cache_resource's hashing: every session of a room on a link with a
    branch asks for the same one). ValueError (unknown piece, </s> before the end, longer than
    max_len) passes through uncached."""
    if not (isinstance(run.target, tuple) and run.target[:1] == ("prefix",)):
        raise TypeError(f"translate_prefix takes a branch_key, not a run with target {run.target!r}")
    ready = held().get(tagged(run))
    return ready if ready is not None else _translate_prefix(run, slots)


@st.cache_resource(max_entries=64, show_spinner=False)
def _translate_prefix(run: RunKey, slots: int) -> Result:
    prefix = run.target[1:]
    translator = get_translator(run.model, run.device)
    with translation_slot(slots):
        out = translator.translate(run.text, beam_size=run.beam_size, capture=True, top_k=TOP_K, prefix=list(prefix),
                                   explain=bool(run.explain), head_mask=set(run.head_mask) or None)
    name = tagged(run)                            # also the Result's key: its figures are its own
    return hold(name, to_result(out, str(translator.device), tuple(run.head_mask), name))


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
