"""The result of one translation as plain, picklable data: what every view draws from."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from viz import head_statistics

from ..ui.figures import FigureCache


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
    # explain=True only (read-only, None otherwise), see transformer/explain/explanation.py:
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
        positional_kind=str(out.positional_kind),
        position_bias=None if out.position_bias is None else read_only(np.array(out.position_bias)),
        key=key, **explanation_fields(getattr(out, "explanation", None)))


def kind_statistics(result: Result) -> dict:
    """kind -> head statistics of one run (diagonal share only where queries and keys align).
    Worked out once per translation (`result.key`) for every session that asks; read only."""
    if not result.key:
        return _statistics(result)
    return statistics_cache().get(("kind_statistics", result.key), lambda: _statistics(result))


@functools.lru_cache(maxsize=1)
def statistics_cache() -> FigureCache:
    """The process's head statistics, by translation (built once even when a crowd asks at once)."""
    return FigureCache(64)


def _statistics(result: Result) -> dict:
    statistics = {}
    for kind in result.attention:
        queries, keys = result.axes(kind)
        statistics[kind] = head_statistics(result.attention[kind], queries, keys, aligned=kind != "cross")
    return statistics
