"""Model loading and cached translation. Results are plain, picklable data (`Result`)."""
from __future__ import annotations

import csv
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from viz import average_statistics, head_statistics

from .settings import TOP_K


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


def to_result(out, device: str, head_mask: tuple = ()) -> Result:
    att = out.attention
    beam = None if out.beam is None else [[(tuple(h.pieces), float(h.score), h.parent, bool(h.finished))
                                           for h in step] for step in out.beam]
    return Result(
        text=out.text, source_tokens=list(out.source_tokens), target_tokens=list(out.target_tokens),
        output_tokens=list(out.output_tokens), truncated=bool(out.truncated),
        forced=bool(getattr(out, "forced", False)),
        attention={"encoder_self": np.asarray(att.encoder_self), "decoder_self": np.asarray(att.decoder_self),
                   "cross": np.asarray(att.cross)},
        source_padding=np.asarray(out.masks.source_padding, dtype=bool),
        target_causal=np.asarray(out.masks.target_causal, dtype=bool),
        positional_encoding=np.asarray(out.positional_encoding),
        source_embeddings=np.asarray(out.source_embeddings),
        steps=[(s.token, float(s.prob), [(p, float(q)) for p, q in s.top_k]) for s in out.steps],
        seconds=float(getattr(out, "seconds", 0.0)), device=device, beam=beam,
        beam_final=None if out.beam_final is None else tuple(out.beam_final), head_mask=tuple(head_mask))


def find_models(folder: str) -> dict:
    """name -> path of every model directory (one holding config.json) in `folder`."""
    root = Path(folder)
    if not root.is_dir():
        return {}
    return {p.name: str(p) for p in sorted(root.iterdir()) if (p / "config.json").is_file()}


def model_languages(path: str) -> tuple[str, str]:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
        return str(config.get("source_lang", "src")), str(config.get("target_lang", "tgt"))
    except (OSError, ValueError, AttributeError):
        return "src", "tgt"


def file_stamps(paths: tuple) -> tuple:
    """Modification times, so that a cache keyed on them sees an edited file."""
    return tuple(Path(p).stat().st_mtime_ns if Path(p).is_file() else None for p in paths)


@st.cache_data(max_entries=8, show_spinner=False)
def load_examples(paths: tuple, fallback: tuple, stamps: tuple = ()) -> list:
    """Rows of the first readable examples.tsv among `paths` (dicts by column), else `fallback`."""
    for path in paths:
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                rows = [{k: (v or "").strip() for k, v in row.items() if k}
                        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
        rows = [row for row in rows if any(row.values())]
        if rows:
            return rows
    return [dict(row) for row in fallback]


@st.cache_resource(show_spinner=False)
def configure_torch(threads: int) -> int:
    """Set torch's thread count once per process (cached per value)."""
    torch.set_num_threads(threads)
    return torch.get_num_threads()


@st.cache_resource(show_spinner=False)
def translation_slots(count: int) -> threading.BoundedSemaphore:
    """The process-wide cap on translations running at once."""
    return threading.BoundedSemaphore(count)


def available_devices() -> list:
    return ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]


@st.cache_resource(show_spinner=False, max_entries=4)
def get_translator(path: str, device: str):
    """One Translator per (model path, device) per process."""
    from transformer import Translator
    return Translator.load(path, device=device)


@st.cache_data(max_entries=64, show_spinner=False)
def translate(path: str, device: str, text: str, beam_size: int, target, slots: int,
              head_mask: tuple = ()) -> Result:
    """Translate with capture; cached per (model, device, text, beam size, reference, ablated heads).

    `target`: None, a reference text, or a tuple of pieces fed exactly (forced decoding).
    """
    translator = get_translator(path, device)
    semaphore = translation_slots(slots)
    if not semaphore.acquire(timeout=120):
        raise TimeoutError("the server is busy translating for others")
    try:
        out = translator.translate(text, beam_size=beam_size, capture=True, top_k=TOP_K,
                                   target=list(target) if isinstance(target, tuple) else target,
                                   head_mask=set(head_mask) or None)
    finally:
        semaphore.release()
    return to_result(out, str(translator.device), head_mask)


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

