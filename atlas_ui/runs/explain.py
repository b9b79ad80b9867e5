"""Beyond raw attention, the cached parts: is explain=True available for a model, the Attribution
view's faithfulness numbers (one sentence, and averaged over the examples), and the
head_importance.json of a model directory. Results are plain data (numpy, pandas),
shared by every session of the process: read only."""
from __future__ import annotations

import functools
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

# imported here, not inside the functions: a session's thread importing a package while another
# imports one of its submodules can deadlock in importlib (seen under a crowd on a cold server)
from transformer.analysis.head_importance import load_head_importance
from transformer.explain.explanation import method_scores
from transformer.explain.faithfulness import perturbation_summary, perturbation_test, rank_correlations

from .translation import get_translator, translation_slot
from .catalogue import file_stamps
from .result import read_only
from .warm import RunKey, cached_run

METHODS = ("attention", "norm", "alti+", "saliency")
METHOD_LABELS = {"attention": "raw cross-attention (mean of layers and heads)",
                 "norm": "norm-based ‖Σ_h α_h·f_h(x)‖ (cross, Kobayashi et al.'s layer-level score, mean of layers)",
                 "alti+": "ALTI+ source contribution", "saliency": "saliency |gradient × input|",
                 "random": "random ranking (baseline)"}


def explain_unavailable(translator) -> str | None:
    """None when translate(explain=True) works for this model (every family Translator.load opens,
    T5 included), else why not (one sentence): a guard for a model type added without a description."""
    if translator.engine.explainable:
        return None
    return (f"Norm-based attention, ALTI+ and saliency are unavailable for the {translator.engine.family} family: "
            "its layers are not described for the decomposition.")


def _run_explained(translator, text: str, beam_size: int, target, head_mask: tuple):
    return translator.translate(text, beam_size=beam_size, capture=True, top_k=1,
                                target=list(target) if isinstance(target, tuple) else target,
                                head_mask=set(head_mask) or None, explain=True)


def content_positions(translator, source_ids) -> list:
    """Source positions that are not special pieces (</s>, language codes): the ones the
    perturbation test may drop, and the ones rank correlations compare."""
    special = translator.engine.special_ids
    return [j for j, i in enumerate(source_ids) if i not in special]


class Attribution(dict):
    """attribution()'s numbers: a dict that can be weakly referenced, so a process can hold it and
    hand it out without st.cache_resource's hashing (warm.cached_run)."""


ATTRIBUTION = "attribution"


def attribution_key(run: RunKey, pieces: tuple | None = None) -> RunKey:
    """The run whose attribution is shown, for the page's run (page/translation.page_run): the run
    itself (its reference, or decoded freely with its beam) or, with `pieces` (a what-if branch's
    pieces on screen), forced through them; beam 1 when forced, explain=False (attribution() explains
    it itself). Derived from the page's key, never rebuilt from arguments; of kind ATTRIBUTION, so
    held apart from the translation itself."""
    target = tuple(pieces) if pieces else run.target
    return run.but(kind=ATTRIBUTION, beam_size=1 if target else run.beam_size, target=target, explain=False)


@cached_run(ATTRIBUTION, max_entries=32)     # shared, read only: no unpickled copy per session
def attribution(key: RunKey, slots: int) -> Attribution:
    """For the run of an attribution_key(...): {method: (T, S)} scores (rows sum to 1), the
    perturbation test (one row per method, step and k), its summary per method and k, and Spearman
    correlations per step and pair of methods (over the non-special source pieces). Held, or
    computed once per process (a room on one link asks for the same one: no hashing of the key)."""
    translator = get_translator(key.model, key.device)
    head_mask = tuple(key.head_mask)
    with translation_slot(slots):             # the perturbation passes are model work too
        out = _run_explained(translator, key.text, key.beam_size, key.target, head_mask)
        scores = method_scores(out)
        frame = perturbation_test(translator, out, scores, head_mask=set(head_mask) or None)
    positions = content_positions(translator, out.source_ids)
    correlations = (rank_correlations(scores, positions) if len(positions) > 1
                    else pd.DataFrame(columns=["step", "method_a", "method_b", "spearman"]))
    return Attribution(
        scores={name: read_only(np.array(value)) for name, value in scores.items()}, perturbation=frame,
        summary=perturbation_summary(frame), correlations=correlations,
        output_tokens=list(out.output_tokens), source_tokens=list(out.source_tokens))


def correlation_summary(correlations: pd.DataFrame) -> pd.DataFrame:
    """Mean Spearman per pair of methods over the steps where it is defined, and how many.
    Worked out once for a shared frame (attribution()'s, which every session of an audience
    draws; read only): the groupby was a sixth of each session's time in the Attribution view."""
    made = _summaries().get(id(correlations))
    if made is not None and made[0] is correlations:
        return made[1]
    summary = _correlation_summary(correlations)
    with _summaries_lock():
        _summaries()[id(correlations)] = (correlations, summary)      # the frame is kept: its id stays its own
        while len(_summaries()) > 32:
            _summaries().pop(next(iter(_summaries())))
    return summary


@functools.lru_cache(maxsize=1)
def _summaries() -> dict:
    return {}


@functools.lru_cache(maxsize=1)
def _summaries_lock() -> threading.Lock:
    return threading.Lock()


def _correlation_summary(correlations: pd.DataFrame) -> pd.DataFrame:
    if correlations.empty:
        return pd.DataFrame(columns=["method_a", "method_b", "mean_spearman", "steps"])
    return (correlations.dropna(subset=["spearman"]).groupby(["method_a", "method_b"], sort=False)
            .agg(mean_spearman=("spearman", "mean"), steps=("spearman", "count")).reset_index())


@st.cache_resource(max_entries=8, show_spinner=False)
def attribution_average(examples: RunKey, texts: tuple, slots: int) -> dict:
    """The perturbation summary and mean correlations pooled over every step of every sentence
    in `texts` (each step weighs the same), each the attribution of `examples.but(text=...)` (the
    examples' decoding derived from the page's run: views/base.ViewContext.examples_run); sentences
    that cannot be translated are skipped."""
    frames, correlations, used = [], [], 0
    for text in texts:
        try:
            part = attribution(attribution_key(examples.but(text=text)), slots)
        except ValueError:
            continue
        used += 1
        frames.append(part["perturbation"].assign(sentence=used))
        correlations.append(part["correlations"])
    if not frames:
        return dict(sentences=0, summary=None, correlations=None)
    return dict(sentences=used, steps=int(sum(len(f) for f in frames)),
                summary=perturbation_summary(pd.concat(frames, ignore_index=True)),
                correlations=_correlation_summary(pd.concat(correlations, ignore_index=True)))


@functools.lru_cache(maxsize=16)      # shared, read only: st.cache_data unpickled a copy for every session
def _head_importance(path: str, stamp) -> tuple:
    try:
        return load_head_importance(path), None
    except ValueError as exc:
        return None, str(exc)


def head_importance_stamp(path):
    """The size and time of a model directory's head_importance.json; None without the file."""
    folder = str(path[0] if isinstance(path, tuple) else path)
    (stamp,) = file_stamps((str(Path(folder) / "head_importance.json"),))
    return stamp


def head_importance(path) -> tuple:
    """(the parsed head_importance.json or None, an error message or None) of a model directory;
    (None, None) for a model without the file (hub ids, Hugging Face directories)."""
    folder = str(path[0] if isinstance(path, tuple) else path)
    stamp = head_importance_stamp(folder)                                   # None: no file
    return (None, None) if stamp is None else _head_importance(folder, stamp)
