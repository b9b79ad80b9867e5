"""Compare's "What carries the difference" (issue 53): `tr.patch(original, edited)` of the pair on
screen, cached once per process like the lens (warm.cached_run: its arrays read-only, shared by
every session, handed out without hashing when this process holds it already).
A sweep is a few batched forced passes (docs/api.md, "Activation patching"), so an audience on one
link pays for it once."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .result import read_only
from .translation import get_translator, translation_slot
from .warm import RunKey, cached_run

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


PATCH = "patch"


def patch_key(run: RunKey, edited: str) -> RunKey:
    """The sweep of the page's run against `edited`: derived from the page's key (its model, device
    and text), greedy and without ablated heads, as tr.patch runs; of kind PATCH with the edited
    sentence as its target."""
    return run.but(kind=PATCH, beam_size=1, target=edited, head_mask=(), explain=False)


@cached_run(PATCH, max_entries=32)
def patch_sweep(key: RunKey, slots: int) -> PatchSweep | PatchFailed:
    """The sweep of a patch_key(...): held, or computed once per process."""
    translator = get_translator(key.model, key.device)
    with translation_slot(slots):
        try:
            res = translator.patch(key.text, key.target)
        except ValueError as exc:                # the same pieces, or nothing to measure: said, and kept
            return PatchFailed(str(exc)[:200])
        except Exception as exc:  # noqa: BLE001 - a model the sweep does not fit: the rest of Compare stays
            LOG.exception("patching failed")
            return PatchFailed(f"it failed for this model ({type(exc).__name__})")
    pieces = translator.engine.tokenizer.pieces
    freeze = (lambda a: None if a is None else read_only(np.array(a, dtype=np.float64)))
    return PatchSweep(
        encoder=freeze(res.encoder), heads={kind: freeze(value) for kind, value in res.heads.items()},
        clean_source_tokens=tuple(res.clean_source_tokens), corrupt_source_tokens=tuple(res.corrupt_source_tokens),
        output_tokens=tuple(res.output_tokens), step=int(res.step),
        clean_piece=str(pieces([res.clean_piece_id])[0]), corrupt_piece=str(pieces([res.corrupt_piece_id])[0]),
        clean_value=float(res.clean_value), corrupt_value=float(res.corrupt_value), key=key.digest)
