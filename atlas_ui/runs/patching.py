"""Compare's "What carries the difference" (issue 53): `tr.patch(original, edited)` of the pair on
screen, cached once per process like the lens (st.cache_resource; its arrays read-only, shared by
every session) and handed out from warm.held without hashing when this process holds it already.
A sweep is a few batched forced passes (docs/api.md, "Activation patching"), so an audience on one
link pays for it once."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import streamlit as st

from .result import read_only
from .translation import get_translator, translation_slot
from .warm import RunKey, held, hold, tagged

LOG = logging.getLogger("atlas_ui")


@dataclass(frozen=True)
class PatchSweep:
    """tr.patch's result as plain, read-only data: the original is the clean run, the edit the corrupt one."""
    encoder: np.ndarray | None       # float (encoder layers, S), None when the sources differ in piece count
    heads: dict                      # kind -> float (layers, heads), or None (encoder_self, as encoder)
    clean_source_tokens: tuple
    corrupt_source_tokens: tuple
    output_tokens: tuple             # the original's greedy translation, forced in both runs
    step: int
    clean_piece: str                 # the original's piece at `step`, and the edited run's choice there
    corrupt_piece: str
    clean_value: float
    corrupt_value: float
    key: str                         # names the call (figure cache keys)


@dataclass(frozen=True)
class PatchFailed:
    """No sweep for this pair (a short reason, shown escaped): identical pieces, an edit the model cannot read."""
    reason: str


def patch_key(run: RunKey, edited: str) -> RunKey:
    """The sweep of the page's run against `edited`: derived from the page's key (its model, device
    and text), greedy and without ablated heads, as tr.patch runs; held under warm.tagged(key)."""
    return run.but(beam_size=1, target=("patch", edited), head_mask=(), explain=False)


def patch_sweep(key: RunKey, slots: int) -> PatchSweep | PatchFailed:
    """The sweep of a patch_key(...): held, or computed once per process."""
    if not (isinstance(key.target, tuple) and key.target[:1] == ("patch",) and len(key.target) == 2):
        raise TypeError(f"patch_sweep takes a patch_key, not a run with target {key.target!r}")
    ready = held().get(tagged(key))
    return ready if ready is not None else _patch_sweep(key, slots)


@st.cache_resource(max_entries=32, show_spinner=False)
def _patch_sweep(key: RunKey, slots: int) -> PatchSweep | PatchFailed:
    translator = get_translator(key.model, key.device)
    name = tagged(key)
    with translation_slot(slots):
        try:
            res = translator.patch(key.text, key.target[1])
        except ValueError as exc:                # the same pieces, or nothing to measure: said, and kept
            return hold(name, PatchFailed(str(exc)[:200]))
        except Exception as exc:  # noqa: BLE001 - a model the sweep does not fit: the rest of Compare stays
            LOG.exception("patching failed")
            return hold(name, PatchFailed(f"it failed for this model ({type(exc).__name__})"))
    pieces = translator.engine.tokenizer.pieces
    freeze = (lambda a: None if a is None else read_only(np.array(a, dtype=np.float64)))
    return hold(name, PatchSweep(
        encoder=freeze(res.encoder), heads={kind: freeze(value) for kind, value in res.heads.items()},
        clean_source_tokens=tuple(res.clean_source_tokens), corrupt_source_tokens=tuple(res.corrupt_source_tokens),
        output_tokens=tuple(res.output_tokens), step=int(res.step),
        clean_piece=str(pieces([res.clean_piece_id])[0]), corrupt_piece=str(pieces([res.corrupt_piece_id])[0]),
        clean_value=float(res.clean_value), corrupt_value=float(res.corrupt_value), key=name))
