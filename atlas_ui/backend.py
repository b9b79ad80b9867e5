"""Model loading and cached translation. Results are plain, picklable data (`Result`)."""
from __future__ import annotations

import csv
import functools
import gc
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import streamlit as st
import torch

# at module level, not in the functions: two sessions' threads importing a package and one of its
# submodules at once can deadlock in importlib (a crowd on a cold server did)
from transformer import Translator
from transformer.hf.arch import language_codes, t5_tasks
from transformer.hf.load import load_tokenizer, read_config
from viz import average_statistics, head_statistics

from .settings import MAX_LOADED_MODELS, RESCAN_SECONDS, TOP_K
from .warm import hold, model_key, translation_key

LOG = logging.getLogger("atlas_ui")


@dataclass(frozen=True)
class Result:
    """Everything the views need from one `Translator.translate` call, without torch objects."""
    text: str
    source_tokens: list
    target_tokens: list
    output_tokens: list
    truncated: bool
    forced: bool
    attention: dict                 # kind -> float32 (layers, heads, Q, K)
    source_padding: np.ndarray      # bool (S,)
    target_causal: np.ndarray       # bool (T, T)
    positional_encoding: np.ndarray # (max(S, T), d_model)
    source_embeddings: np.ndarray   # (S, d_model)
    steps: list                     # [(piece, prob, [(piece, prob), ...])]
    seconds: float
    device: str
    beam: list | None = None        # per step: [(pieces, score, parent, finished), ...] (beam search only)
    beam_final: tuple | None = None # (step, index) of the returned hypothesis in `beam`
    head_mask: tuple = ()           # the (kind, layer, head) switched off in this run
    positional_kind: str = "sinusoidal"      # "sinusoidal", "learned" or "relative_bias" (T5)
    position_bias: np.ndarray | None = None  # T5: (heads, S, S) encoder relative position bias
    key: str = ""                   # names the translate() call that made it (figure cache keys)
    # explain=True only (read-only, None otherwise), see transformer/explain.py:
    norm: dict | None = None        # kind -> float32 (layers, heads, Q, K): ‖α·f(x)‖, like `attention`
    source_share: np.ndarray | None = None         # (T,) ALTI+ share of each step from the source
    source_contribution: np.ndarray | None = None  # (T, S) ALTI+
    prefix_contribution: np.ndarray | None = None  # (T, T) ALTI+, over target_tokens
    saliency_source: np.ndarray | None = None      # (T, S) |gradient × input|, rows sum to 1
    saliency_prefix: np.ndarray | None = None      # (T, T)

    @property
    def explained(self) -> bool:
        return self.norm is not None

    def mean_prob(self) -> float:
        probs = self.probs()
        return float(np.mean(probs)) if probs else 1.0

    def axes(self, kind: str) -> tuple[list, list]:
        """(query tokens, key tokens) of one attention kind, as the API page prescribes."""
        if kind == "encoder_self":
            return self.source_tokens, self.source_tokens
        if kind == "decoder_self":
            return self.output_tokens, self.target_tokens
        if kind == "cross":
            return self.output_tokens, self.source_tokens
        raise ValueError(f"unknown attention kind {kind!r}")

    def probs(self) -> list:
        return [prob for _, prob, _ in self.steps]


def read_only(array):
    """The array, frozen: one Result is shared by every session that asks for the same run."""
    if isinstance(array, np.ndarray):
        array.setflags(write=False)
    return array


def explanation_fields(ex) -> dict:
    """The Result fields of an Explanation (empty for None: explain=False costs nothing)."""
    if ex is None:
        return {}
    arrays = {name: read_only(np.array(getattr(ex, name))) for name in (
        "source_share", "source_contribution", "prefix_contribution", "saliency_source", "saliency_prefix")}
    return dict(norm={kind: read_only(np.array(ex.get_norm(kind))) for kind in ("encoder_self", "decoder_self",
                                                                                "cross")}, **arrays)


def to_result(out, device: str, head_mask: tuple = (), key: str = "") -> Result:
    att = out.attention
    beam = None if out.beam is None else [[(tuple(h.pieces), float(h.score), h.parent, bool(h.finished))
                                           for h in step] for step in out.beam]
    return Result(
        text=out.text, source_tokens=list(out.source_tokens), target_tokens=list(out.target_tokens),
        output_tokens=list(out.output_tokens), truncated=bool(out.truncated),
        forced=bool(getattr(out, "forced", False)),
        attention={kind: read_only(np.array(getattr(att, kind))) for kind in ("encoder_self", "decoder_self", "cross")},
        source_padding=read_only(np.array(out.masks.source_padding, dtype=bool)),
        target_causal=read_only(np.array(out.masks.target_causal, dtype=bool)),
        positional_encoding=read_only(np.array(out.positional_encoding)),
        source_embeddings=read_only(np.array(out.source_embeddings)),
        steps=[(s.token, float(s.prob), [(p, float(q)) for p, q in s.top_k]) for s in out.steps],
        seconds=float(getattr(out, "seconds", 0.0)), device=device, beam=beam,
        beam_final=None if out.beam_final is None else tuple(out.beam_final), head_mask=tuple(head_mask),
        positional_kind=str(getattr(out, "positional_kind", "sinusoidal")),
        position_bias=None if getattr(out, "position_bias", None) is None else read_only(np.array(out.position_bias)),
        key=key, **explanation_fields(getattr(out, "explanation", None)))


def rescan_tick() -> int:
    """Changes every RESCAN_SECONDS: the disk is looked at that often, not on every run (with a
    whole audience, stat calls were a tenth of each run)."""
    return int(time.monotonic() // RESCAN_SECONDS)


def find_models(folder: str) -> dict:
    """name -> path of every model directory (one holding config.json) in `folder`."""
    return dict(_find_models(folder, rescan_tick()))


@functools.lru_cache(maxsize=32)
def _find_models(folder: str, tick: int) -> dict:
    root = Path(folder)
    if not root.is_dir():
        return {}
    return {p.name: str(p) for p in sorted(root.iterdir()) if (p / "config.json").is_file()}


@dataclass(frozen=True)
class ModelInfo:
    """What the picker needs to know of a model directory before loading it."""
    hf: bool                  # a Hugging Face directory (config.json has a model_type)
    model_type: str           # "atlas" for ours
    source_lang: str
    target_lang: str
    tasks: tuple = ()         # T5: the (source, target) translation tasks its config names, in order


def _read_config(path: str) -> dict:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


@functools.lru_cache(maxsize=64)
def model_info(path: str, stamp=None) -> ModelInfo:
    """Read once per config.json version (`stamp`), not on every run."""
    config = _read_config(path)
    if "model_type" in config:
        params = config.get("task_specific_params") if config["model_type"] == "t5" else None
        tasks = tuple((t.source, t.target) for t in t5_tasks(SimpleNamespace(task_specific_params=params)))
        source, target = tasks[0] if tasks else ("", "")      # what Translator.load picks without languages
        return ModelInfo(True, str(config["model_type"]), source, target, tasks)
    return ModelInfo(False, "atlas", str(config.get("source_lang", "src")), str(config.get("target_lang", "tgt")))


def label_for(name: str, info: ModelInfo) -> str:
    """'en-de (en → de)' for ours, 'opus-mt-en-de (Hugging Face marian)' for theirs."""
    if info.hf:
        return f"{name} (Hugging Face {info.model_type})"
    return f"{name} ({info.source_lang or 'src'} → {info.target_lang or 'tgt'})"


@functools.lru_cache(maxsize=16)
def _model_labels(items: tuple, stamps: tuple) -> dict:
    return {name: label_for(name, model_info(path, stamp)) for (name, path), stamp in zip(items, stamps)}


def model_labels(models: dict) -> dict:
    """name -> picker label for every model, one cache lookup per run (keyed on config.json times)."""
    items = tuple(models.items())
    return _model_labels(items, file_stamps(tuple(str(Path(path) / "config.json") for _, path in items)))


def model_languages(path: str) -> tuple[str, str]:
    info = model_info(path, file_stamps((str(Path(path) / "config.json"),)))
    return info.source_lang or "src", info.target_lang or "tgt"


def translation_tasks(path: str) -> tuple:
    """A T5's translation tasks, (source, target) pairs in its config's order; () for other models."""
    return model_info(path, file_stamps((str(Path(path) / "config.json"),))).tasks


@functools.lru_cache(maxsize=16)
def language_options(path: str) -> tuple[tuple, str, str]:
    """(language codes, default source, default target) of a multilingual Hugging Face model;
    ([], "", "") for a model with one language pair. Reads the tokenizer only."""
    if not model_info(path).hf or model_info(path).model_type not in ("m2m_100", "mbart"):
        return (), "", ""
    tokenizer = load_tokenizer(Path(path), read_config(Path(path)))
    codes = tuple(language_codes(tokenizer))
    return codes, str(getattr(tokenizer, "src_lang", "") or ""), str(getattr(tokenizer, "tgt_lang", "") or "")


def file_stamps(paths: tuple) -> tuple:
    """Modification times, so that a cache keyed on them sees an edited file (within RESCAN_SECONDS)."""
    return _file_stamps(tuple(paths), rescan_tick())


@functools.lru_cache(maxsize=256)
def _file_stamps(paths: tuple, tick: int) -> tuple:
    return tuple(Path(p).stat().st_mtime_ns if Path(p).is_file() else None for p in paths)


def load_examples(paths: tuple, fallback: tuple, stamps: tuple = ()) -> list:
    """Rows of the first readable examples.tsv among `paths` (dicts by column), else `fallback`.
    Fresh dicts each call: the file is read once per `stamps`."""
    rows = _read_examples(tuple(paths), tuple(stamps))
    return [dict(row) for row in (rows or fallback)]


# The lookups below run on every script run of every session: functools caches (keyed on file
# times where a file is read) cost microseconds, st.cache_data hashes its arguments and unpickles
# its value on each call (issue 14). What they return is never changed by the callers.
@functools.lru_cache(maxsize=8)
def _read_examples(paths: tuple, stamps: tuple) -> tuple:
    for path in paths:
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                rows = [{k: (v or "").strip() for k, v in row.items() if k}
                        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
        rows = tuple(row for row in rows if any(row.values()))
        if rows:
            return rows
    return ()


@functools.lru_cache(maxsize=None)      # every run calls it: no st.cache hashing
def configure_torch(threads: int) -> int:
    """Set torch's thread count once per process (cached per value)."""
    torch.set_num_threads(threads)
    return torch.get_num_threads()


@functools.lru_cache(maxsize=None)
def translation_slots(count: int) -> threading.BoundedSemaphore:
    """The process-wide cap on translations running at once."""
    return threading.BoundedSemaphore(count)


def available_devices() -> list:
    return ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]


def model_ref(path: str, source_lang: str | None = None, target_lang: str | None = None) -> tuple:
    """The hashable name of a loaded model: its path (or hub id) and the language pair asked for."""
    return (str(path), source_lang or None, target_lang or None)


@st.cache_resource(show_spinner=False, max_entries=MAX_LOADED_MODELS)
def get_translator(ref, device: str):
    """One Translator per (model, languages, device) per process; the least recently used one
    goes when more than MAX_LOADED_MODELS are asked for, so memory stays bounded."""
    path, source_lang, target_lang = ref if isinstance(ref, tuple) else (ref, None, None)
    # Hugging Face loads take turns inside Translator.load (transformer/hf/load.py)
    if source_lang or target_lang:
        translator = Translator.load(path, device=device, source_lang=source_lang, target_lang=target_lang)
    else:
        translator = Translator.load(path, device=device)
    settle_heap()
    return hold(model_key(ref, device), translator)


def settle_heap() -> None:
    """Move every object alive now (torch, transformers, the model: hundreds of thousands of
    long-lived objects) out of the garbage collector's view. Python's full collections then only
    walk what the page runs create, which keeps them cheap with many sessions at once. Each load
    first unfreezes and collects, so cycles left by a model the LRU dropped are still freed."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@st.cache_resource(max_entries=64, show_spinner=False)
def translate(path: str, device: str, text: str, beam_size: int, target, slots: int,
              head_mask: tuple = (), explain: bool = False) -> Result:
    """Translate with capture; cached per (model, device, text, beam size, reference, ablated heads,
    explain). explain=True adds norm-based attention, ALTI+ and saliency (a separate cache entry).

    One Result per process for each such call, shared by every session (its arrays are read-only):
    an audience opening the same link costs one translation and no copies.
    `target`: None, a reference text, or a tuple of pieces fed exactly (forced decoding).
    """
    translator = get_translator(path, device)
    semaphore = translation_slots(slots)
    if not semaphore.acquire(timeout=120):
        raise TimeoutError("the server is busy translating for others")
    try:
        out = translator.translate(text, beam_size=beam_size, capture=True, top_k=TOP_K,
                                   target=list(target) if isinstance(target, tuple) else target,
                                   head_mask=set(head_mask) or None, explain=bool(explain))
    finally:
        semaphore.release()
    key = translation_key(path, device, text, beam_size, target, head_mask, explain)
    return hold(key, to_result(out, str(translator.device), head_mask, key))


@dataclass(frozen=True)
class ExplainFailed:
    """explain=True could not be computed for this translation (why, for the log)."""
    reason: str


@st.cache_resource(max_entries=64, show_spinner=False)
def translate_explained(path: str, device: str, text: str, beam_size: int, target, slots: int) -> Result | ExplainFailed:
    """translate(explain=True), with a failure remembered for that translation like a result: the
    page then shows the raw weights at once on later runs instead of trying again each time."""
    try:
        return translate(path, device, text, beam_size, target, slots, explain=True)
    except (ValueError, RuntimeError) as exc:
        LOG.warning("explain=True failed, showing raw attention: %s", exc)
        failure = ExplainFailed(f"{type(exc).__name__}: {exc}")
        return hold(translation_key(path, device, text, beam_size, target, (), True), failure)


def kind_statistics(result: Result) -> dict:
    """kind -> head statistics of one run (diagonal share only where queries and keys align)."""
    statistics = {}
    for kind in result.attention:
        queries, keys = result.axes(kind)
        statistics[kind] = head_statistics(result.attention[kind], queries, keys, aligned=kind != "cross")
    return statistics


@st.cache_data(max_entries=16, show_spinner=False)
def example_statistics(path: str, device: str, texts: tuple, beam_size: int, slots: int) -> dict:
    """kind -> head statistics averaged over `texts` (each sentence weighs the same)."""
    frames: dict = {}
    for text in texts:
        try:
            result = translate(path, device, text, beam_size, None, slots)
        except ValueError:
            continue
        for kind, frame in kind_statistics(result).items():
            frames.setdefault(kind, []).append(frame)
    return {kind: average_statistics(parts) for kind, parts in frames.items() if parts}

