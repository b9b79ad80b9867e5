"""Analyses as functions over a `Translation` (issue 53; docs/api.md "Analyses as functions").

An analysis takes (translator, translation, call) and returns what it found, which lands in
`out.analyses[name]` (explain, diagnose, lens and align also under their own `Translation` fields).
`translate(text, explain=True)` and its siblings are sugar for `translate(text, analyses=("explain",))`,
and `explain(tr, out)` runs the same function on a translation made earlier. The registry below is
the one list of them: a new analysis is its own module with a function `fn(tr, out, call)`, one line
here, and a view in the app; translator.py never changes for it.

Each module is imported on first use (`importlib`, by the name its line gives), so a translation
without analyses imports none of explain/, analysis/ or diagnosis/ (the app imports them at start).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from .lens import lens_points


@dataclass(frozen=True)
class Call:
    """What a translate() call hands its analyses besides the Translation. Empty when an analysis is
    run on a translation made earlier: it then does the passes it needs itself."""
    logits: torch.Tensor | None = None   # (T, V): the logits the call decoded with
    recorder: object | None = None       # the call's capture.Recorder (residual points an analysis `reads`)
    top_k: int = 5                       # alternatives per step, where an analysis lists some


@dataclass(frozen=True)
class Analysis:
    name: str                            # translate's option (analyses=(name,)) and out.analyses key
    function: str                        # "module:function", fn(tr, out, call) -> result
    own_passes: bool = True              # runs passes of its own: hooks= and an earlier encoder_layer= never reach them
    reads: Callable | None = None        # config -> residual points the call records for it (no pass of its own)

    def load(self) -> Callable:
        module, _, function = self.function.partition(":")
        return getattr(importlib.import_module(module), function)


def _lens_reads(config) -> list[str]:
    return [point for _, point in lens_points(config.n_decoder_layers)]


# In the order a call runs them; each line is one analysis.
REGISTRY = {a.name: a for a in (
    Analysis("lens", "transformer.lens:lens_of", own_passes=False, reads=_lens_reads),
    Analysis("explain", "transformer.explain.explanation:explain_of"),
    Analysis("align", "transformer.analysis.aligner:align_of"),
    Analysis("diagnose", "transformer.diagnosis.scores:diagnose_of"),
)}


def asked(names) -> list[str]:
    """Analysis names in registry order; ValueError for one the registry lacks."""
    names = [names] if isinstance(names, str) else list(names or ())
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown analysis {unknown[0]!r}; known: {', '.join(REGISTRY)}")
    return [n for n in REGISTRY if n in names]


def own_passes(names) -> bool:
    return any(REGISTRY[n].own_passes for n in names)


def residual_reads(names, config) -> list[str]:
    """The residual points a call records for these analyses (lens), in registry order."""
    return [p for n in names if REGISTRY[n].reads is not None for p in REGISTRY[n].reads(config)]


def check_own_passes(tr, out) -> None:
    """ValueError when `out` was made with hooks or an earlier encoder layer: an analysis with passes
    of its own would describe another model than the one that made the translation."""
    if out.hooks:
        raise ValueError("hooks= works with capture, lens, head_mask, prefix and target, not with "
                         "explain, diagnose or align (their own passes would not run the hooks)")
    if out.encoder_layer is not None and out.encoder_layer != tr.config.n_encoder_layers - 1:
        raise ValueError("explain= and diagnose= describe the whole model: not with an earlier encoder_layer")


def run(name: str, tr, out, call: Call | None = None):
    """The analysis `name` of `out` (made by `tr`), stored in out.analyses[name] and returned."""
    analysis = REGISTRY[asked([name])[0]]
    if analysis.own_passes:
        check_own_passes(tr, out)
    out.analyses[name] = analysis.load()(tr, out, call or Call())
    return out.analyses[name]


# ---- the public functions: each one line over `run` --------------------------------------------
def explain(tr, out):
    """out.explanation (norm-based attention, ALTI+, saliency) of a translation made earlier."""
    return run("explain", tr, out)


def diagnose(tr, out):
    """out.diagnosis (what went wrong) of a translation made earlier, under its head_mask."""
    return run("diagnose", tr, out)


def align(tr, out):
    """out.alignment [(source piece i, output piece j)] of a translation made earlier."""
    return run("align", tr, out)


def lens(tr, out, top_k: int = 5):
    """out.lens (the logit lens) of a translation made earlier: one teacher-forced pass records it."""
    return run("lens", tr, out, Call(top_k=top_k))
