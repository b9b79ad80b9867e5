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
from .warm import RunKey, cached_run


BRANCH = "branch"


def branch_key(run: RunKey, prefix: tuple) -> RunKey:
    """`run` decoded on from the forced pieces `prefix` (a what-if branch): the run's key of kind
    BRANCH with the prefix as its target, so never a translation's, even one forced through the same
    pieces. Derived from the page's key (page/translation.page_run), never rebuilt from arguments."""
    return run.but(kind=BRANCH, target=tuple(prefix))


@cached_run(BRANCH, max_entries=64)
def translate_prefix(run: RunKey, slots: int) -> Result:
    """translate(text, prefix=pieces) for a branch_key(...): the pieces forced, then greedy or beam
    search goes on; with head_mask, the branch decoded again with those heads off (the Ablation view
    on a branch). One Result per key, held under its digest (also the Result's key: its figures are
    its own). ValueError (unknown piece, </s> before the end, longer than max_len) passes through
    uncached."""
    translator = get_translator(run.model, run.device)
    with translation_slot(slots):
        out = translator.translate(run.text, beam_size=run.beam_size, capture=True, top_k=TOP_K, prefix=list(run.target),
                                   explain=bool(run.explain), head_mask=set(run.head_mask) or None)
    return to_result(out, str(translator.device), tuple(run.head_mask), run.digest)


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
