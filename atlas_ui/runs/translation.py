"""Model loading and cached translation: one Translator per model and one Result per translation,
per process, shared by every session. (Which models exist: catalogue.py; the Result: result.py.)"""
from __future__ import annotations

import contextlib
import functools
import gc
import logging
import threading
from dataclasses import dataclass

import streamlit as st
import torch

# at module level, not in the functions: two sessions' threads importing a package and one of its
# submodules at once can deadlock in importlib (a crowd on a cold server did)
from transformer import Translator
from viz import average_statistics

from .catalogue import ModelRef
from .result import Result, kind_statistics, to_result
from ..server.settings import MAX_LOADED_MODELS, TOP_K
from .warm import TRANSLATION, RunKey, cached_run, held, hold, model_key

LOG = logging.getLogger("atlas_ui")

__all__ = ["ExplainFailed", "ModelRef", "Result", "RunKey", "available_devices", "configure_torch", "example_statistics",
           "explained_key", "get_translator", "settle_heap", "translate", "translate_explained", "translation_slot"]


@functools.lru_cache(maxsize=None)      # every run calls it: no st.cache hashing
def configure_torch(threads: int) -> int:
    """Set torch's thread count once per process (cached per value)."""
    torch.set_num_threads(threads)
    return torch.get_num_threads()


@functools.lru_cache(maxsize=None)
def translation_slots(count: int) -> threading.BoundedSemaphore:
    """The process-wide cap on translations running at once."""
    return threading.BoundedSemaphore(count)


@contextlib.contextmanager
def translation_slot(slots: int, timeout: float = 120.0):
    """Hold one of the process's `slots` translation slots while the block runs: every piece of
    model work (translation, diagnosis, explanation, lens, alignment) takes one, so a crowd's runs
    queue instead of sharing the cores. TimeoutError when none frees up within `timeout` s."""
    semaphore = translation_slots(slots)
    if not semaphore.acquire(timeout=timeout):
        raise TimeoutError("the server is busy translating for others")
    try:
        yield
    finally:
        semaphore.release()


@functools.lru_cache(maxsize=1)
def _devices() -> tuple:
    return ("cuda", "cpu") if torch.cuda.is_available() else ("cpu",)


def available_devices() -> list:
    """Asked once per process (a GPU does not come or go while the server runs): every run of
    every session asks."""
    return list(_devices())


def get_translator(ref: ModelRef, device: str):
    """One Translator per (model, languages, device) per process; the least recently used one
    goes when more than MAX_LOADED_MODELS are asked for, so memory stays bounded.

    What the process holds already is handed out without st.cache_resource's hashing of the
    arguments (every session of an audience asks for the same model and translation)."""
    ready = held().get(model_key(ref, device))
    return ready if ready is not None else _get_translator(ref, device)


@st.cache_resource(show_spinner=False, max_entries=MAX_LOADED_MODELS)
def _get_translator(ref: ModelRef, device: str):
    # Hugging Face loads take turns inside Translator.load (transformer/hf/load.py)
    if ref.source_lang or ref.target_lang:
        translator = Translator.load(ref.path, device=device, source_lang=ref.source_lang,
                                     target_lang=ref.target_lang)
    else:
        translator = Translator.load(ref.path, device=device)
    settle_heap()
    return hold(model_key(ref, device), translator)


def _forget_translators() -> None:
    """get_translator.clear(): the cache and what this process holds of it (tests start afresh)."""
    _get_translator.clear()
    for key in [key for key in list(held().keys()) if isinstance(key, tuple) and key[:1] == ("model",)]:
        held().pop(key, None)


get_translator.clear = _forget_translators


def settle_heap() -> None:
    """Move every object alive now (torch, transformers, the model: hundreds of thousands of
    long-lived objects) out of the garbage collector's view. Python's full collections then only
    walk what the page runs create, which keeps them cheap with many sessions at once. Each load
    first unfreezes and collects, so cycles left by a model the LRU dropped are still freed."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@cached_run(TRANSLATION, max_entries=64)
def translate(run: RunKey, slots: int) -> Result:
    """Translate with capture; one cached Result per RunKey (model, device, text, beam size, reference,
    ablated heads, explain). explain=True adds norm-based attention, ALTI+ and saliency.

    One Result per process for each run, shared by every session (its arrays are read-only): an
    audience opening the same link costs one translation and no copies. `run.target`: None, a
    reference text, or a tuple of pieces fed exactly (forced decoding)."""
    translator = get_translator(run.model, run.device)
    with translation_slot(slots):
        target = run.target
        out = translator.translate(run.text, beam_size=run.beam_size, capture=True, top_k=TOP_K,
                                   target=list(target) if isinstance(target, tuple) else target,
                                   head_mask=set(run.head_mask) or None, explain=bool(run.explain))
    return to_result(out, str(translator.device), tuple(run.head_mask), run.digest)


@dataclass(frozen=True)
class ExplainFailed:
    """explain=True could not be computed for this translation (why, for the log)."""
    reason: str


EXPLAINED = "explained"


def explained_key(run: RunKey) -> RunKey:
    """The explained translation of the page's run: what translate_explained holds, a Result or the
    failure, under a key of its own (the translation's digest only ever names a Result)."""
    return run.but(explain=True, kind=EXPLAINED)


def translate_explained(run: RunKey, slots: int) -> Result | ExplainFailed:
    """translate() of the run with explain=True, with a failure remembered for that translation like a
    result: the page then shows the raw weights at once on later runs instead of trying again each time."""
    return _translate_explained(explained_key(run), slots)


@cached_run(EXPLAINED, max_entries=64)
def _translate_explained(key: RunKey, slots: int) -> Result | ExplainFailed:
    try:
        return translate(key.but(kind=TRANSLATION), slots)
    except (ValueError, RuntimeError) as exc:
        LOG.warning("explain=True failed, showing raw attention: %s", exc)
        return ExplainFailed(f"{type(exc).__name__}: {exc}")


@st.cache_resource(max_entries=16, show_spinner=False)     # shared, read only: no unpickled copy per session
def example_statistics(examples: RunKey, texts: tuple, slots: int) -> dict:
    """kind -> head statistics averaged over `texts` (each sentence weighs the same), each translated as
    `examples.but(text=...)` (the examples' decoding derived from the page's run:
    views/base.ViewContext.examples_run)."""
    frames: dict = {}
    for text in texts:
        try:
            result = translate(examples.but(text=text), slots)
        except ValueError:
            continue
        for kind, frame in kind_statistics(result).items():
            frames.setdefault(kind, []).append(frame)
    return {kind: average_statistics(parts) for kind, parts in frames.items() if parts}

