"""The diagnosis of the run on screen (issue 22, "What went wrong"), cached per process.

It is computed from the pieces of the cached translation (free or forced), not by translating
again: the forced passes of `transformer.diagnosis.scores` alone, ~20-60 ms for a Multi30k sentence on
2 threads, once per (model, device, pieces, ablated heads) and then shared by every session. So
the strip marks and the summary run on every page run, and a click or a rerun costs a cache hit."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from transformer.diagnosis.scores import Item, diagnose_items
from viz.diagnosis import flag_expectations, flag_put_backs

from .translation import get_translator, translation_slot
from .result import read_only
from ..server.settings import max_concurrent
from .warm import RunKey, cached_run, held

LOG = logging.getLogger("atlas_ui")
# The panels of the Diagnosis view: one value per output piece, one per source piece. The lexicon
# gaps are in each flag's evidence (the flag table), not panels: two more would crowd a projector.
# A free translation (issue 51) has its own: the reverse model's support share per output piece, its
# rebuild of each source piece.
OUTPUT_SIGNALS = ("log_p", "pmi", "reverse_support_share")
SOURCE_SIGNALS = ("deletion_drop", "unmet_demand", "rebuild")


@dataclass(frozen=True)
class Findings:
    """One run's diagnosis as plain, read-only data (shared by every session)."""
    sentence_score: float
    hallucination: np.ndarray        # (T,) per output piece
    omission: np.ndarray             # (S,) per source piece
    flags: tuple                     # ((kind, start, end, score, evidence dict), ...)
    output_evidence: dict            # name -> (T,) raw signal
    source_evidence: dict            # name -> (S,)
    missing: tuple                   # signals this model could not give
    threshold: float = 0.5
    summary: str = ""                # dg.summary: the line under the translation (viz.diagnosis.summary_line)

    def put_back(self) -> dict:
        """start -> the piece whose return makes the translation likelier, per left-out flag."""
        return flag_put_backs(self.flags)

    def expectations(self) -> dict:
        """start -> (expected piece, source word) of each unsupported flag (viz.diagnosis.flag_expectations)."""
        return flag_expectations(self.flags)


@dataclass(frozen=True)
class DiagnosisFailed:
    """The diagnosis could not be computed for this run (a short reason, shown as is)."""
    reason: str


def every_run() -> bool:
    """Diagnose every run (the strip's marks and sentence), unless the operator set
    ATLAS_DIAGNOSIS=0: then only the Diagnosis view computes it."""
    return os.environ.get("ATLAS_DIAGNOSIS", "1").strip() != "0"


class PageDiagnosis:
    """The diagnosis the translation strip shows, for one page run. Held already (a rerun, a
    crowd on one link): at once. New: computed by `finish()` after the view is drawn, so the
    first chart is not kept waiting for it (the strip is marked then). The Diagnosis view needs
    it first, so there it is computed at once; ATLAS_DIAGNOSIS=0: only there. (A worker thread
    beside the view was tried: on 2 shared cores it made the run no shorter.)"""

    def __init__(self, run: RunKey, result, view: str):
        self.key = diagnosis_key(run, result)
        self.findings = held().get(self.key.digest)
        self.pending = self.findings is None and view != "Diagnosis" and every_run()
        if self.findings is None and view == "Diagnosis":
            self.findings = diagnose(self.key, max_concurrent())

    def finish(self):
        """The Findings (computed now if still pending), or None when switched off."""
        if self.pending:
            self.pending = False
            self.findings = diagnose(self.key, max_concurrent())
        return self.findings


DIAGNOSIS = "diagnosis"


def diagnosis_key(run: RunKey, result) -> RunKey:
    """The diagnosis of the Result on screen, from the page's run (page/translation.page_run): of kind
    DIAGNOSIS, its target the pieces read (source, the start piece, output) and whether the output
    was decoded freely, with the Result's heads off. Derived from the page's key; the same pieces on
    a rerun, a branch or another session give the same key."""
    pieces = (tuple(result.source_tokens), tuple(result.target_tokens[:1]), tuple(result.output_tokens),
              not result.forced)
    return run.but(kind=DIAGNOSIS, beam_size=1, target=pieces, head_mask=tuple(result.head_mask), explain=False)


def diagnosis_for(run: RunKey, result) -> Findings | DiagnosisFailed:
    """The Findings of the Result on screen (same pieces, same ablated heads) for the page's run."""
    return diagnose(diagnosis_key(run, result), max_concurrent())


@cached_run(DIAGNOSIS, max_entries=128)
def diagnose(key: RunKey, slots: int) -> Findings | DiagnosisFailed:
    """The diagnosis of a diagnosis_key(...): held, or computed once per process."""
    source, start, output, free = key.target
    if not output or not source:
        return DiagnosisFailed("there is no output piece to check" if source else "the source has no piece")
    translator = get_translator(key.model, key.device)
    with translation_slot(slots):
        try:
            tok = translator.engine.tokenizer
            output_ids = tok.piece_ids(output)
            item = Item(tok.piece_ids(source), tok.piece_ids(start) + output_ids[:-1], output_ids,
                        list(source), list(output), free=free)
            dg = diagnose_items(translator, [item], head_mask=set(key.head_mask) or None)[0]
        except (ValueError, RuntimeError) as exc:
            LOG.warning("diagnosis failed: %s", exc)
            return DiagnosisFailed(str(exc)[:200])
        except Exception as exc:  # noqa: BLE001 - a family the signals do not fit: the page still shows the rest
            LOG.exception("diagnosis failed")
            return DiagnosisFailed(f"it failed for this model ({type(exc).__name__})")
    return to_findings(dg, len(source), len(output))


def to_findings(dg, n_source: int, n_output: int) -> Findings:
    signals = {name: np.asarray(value, dtype=np.float32) for name, value in (dg.signals or {}).items()}
    flags = tuple((f.kind, int(f.start), int(f.end), float(f.score), dict(f.evidence)) for f in dg.flags)
    return Findings(
        sentence_score=float(dg.sentence_score),
        hallucination=read_only(np.asarray(dg.hallucination, dtype=np.float32)),
        omission=read_only(np.asarray(dg.omission, dtype=np.float32)), flags=flags,
        output_evidence={k: read_only(v) for k, v in signals.items()
                         if v.shape == (n_output,) and k in OUTPUT_SIGNALS},
        source_evidence={k: read_only(v) for k, v in signals.items()
                         if v.shape == (n_source,) and k in SOURCE_SIGNALS},
        missing=tuple(str(m) for m in (dg.missing or ())), summary=str(dg.summary))
