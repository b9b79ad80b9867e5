"""Activation patching: which encoder position and which head carry the difference between two sources.

`patch(tr, clean, corrupt)` forces the clean translation through both sources (the clean run and
the corrupt run), finds the step where the corrupt run stops agreeing, and measures there
m = logit(clean piece) - logit(corrupt piece). Each patched run is the corrupt run with one thing
copied from the clean run: encoder layer l's output at source position i ("encoder.{l}.resid_post"),
or one head's output before the output projection at every position ("{stack}.{l}.{kind}.z"). Its
restored fraction is (m_patched - m_corrupt) / (m_clean - m_corrupt): 0 = no effect, 1 = the clean
preference fully back. The copies are per-call hooks (interventions.py), so this works for every
engine, and all patched runs of a call go through a few batched forward passes (forced.default_budget
padded tokens each), never one pass per run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .capture import KINDS, capture, no_capture
from .forced import default_budget
from .interventions import intervening, z_name

Copy = tuple  # (point name, source/target position or None = all, head or None = all): one thing copied


@dataclass
class PatchResult:
    """What `Translator.patch` returns (docs/api.md, "Activation patching")."""
    output_tokens: list            # the clean translation's pieces, forced in both runs
    fed_ids: list                  # decoder input of both runs: start piece + output ids but the last
    clean_source_ids: list
    corrupt_source_ids: list
    step: int                      # 0-based output position the metric is read at
    clean_piece_id: int
    corrupt_piece_id: int
    clean_value: float             # m in the clean run
    corrupt_value: float           # m in the corrupt run
    encoder: np.ndarray | None     # float (n_encoder_layers, S): one layer's output at one position copied
    heads: dict                    # kind -> float (L, H): one head's z at every position copied (or None)
    output_ids: list = field(default_factory=list)
    clean_source_tokens: list = field(default_factory=list)
    corrupt_source_tokens: list = field(default_factory=list)
    seconds: float = 0.0


def _metric(logits: torch.Tensor, clean_piece: int, corrupt_piece: int) -> torch.Tensor:
    """(..., V) -> (...): logit(clean piece) - logit(corrupt piece)."""
    return (logits[..., clean_piece] - logits[..., corrupt_piece]).float()


def _choose_step(clean: torch.Tensor, corrupt: torch.Tensor, output_ids: list, step: int | None):
    """(step, corrupt piece) from the clean and corrupt logits (T, V): the first step where the
    corrupt run prefers another piece; where it never does, the step whose m changes most, against
    the corrupt run's runner-up. A given step reads the corrupt run's choice there (its runner-up
    when that is the clean piece)."""
    gold = torch.tensor(output_ids, device=corrupt.device)
    top2 = corrupt.topk(2, dim=-1).indices                                            # (T, 2)
    rival = torch.where(top2[:, 0] == gold, top2[:, 1], top2[:, 0])                   # (T,)
    if step is None:
        differs = (top2[:, 0] != gold).nonzero()
        if len(differs):
            step = int(differs[0, 0])
        else:
            rows = torch.arange(len(gold), device=corrupt.device)
            change = ((clean[rows, gold] - clean[rows, rival]) - (corrupt[rows, gold] - corrupt[rows, rival])).abs()
            step = int(change.argmax())
    elif not isinstance(step, (int, np.integer)) or not 0 <= step < len(output_ids):
        raise ValueError(f"step must be an output position 0..{len(output_ids) - 1}, got {step!r}")
    return int(step), int(rival[step])


class PatchRun:
    """The clean and corrupt runs of one pair: their metric, and every point's clean value, from
    which `restored` builds any set of patched runs."""

    @torch.inference_mode()
    def __init__(self, tr, clean: str, corrupt: str, step: int | None = None, target=None):
        self.tr, e = tr, tr.engine
        self.clean_ids, _ = tr.encode_source(clean)
        self.corrupt_ids, _ = tr.encode_source(corrupt)
        if self.clean_ids == self.corrupt_ids:
            raise ValueError("clean and corrupt read as the same pieces: edit the corrupt sentence")
        if target is None:
            self.output_ids = tr.translate(clean, capture=False, top_k=0).output_ids
        else:
            self.output_ids = tr.target_ids(target)
        self.fed_ids = [e.start_id] + self.output_ids[:-1]
        fed = torch.tensor([self.fed_ids], device=tr.device)                              # (1, T)
        with intervening(None), capture(attention=False, residual=set(e.hook_points())) as recorder:
            clean_logits = e.teacher_forced(self._source(self.clean_ids), None, fed)[0]   # (T, V)
        self.clean_values = {name: recorder.residual_stream(name) for name in recorder.residuals}
        with intervening(None), no_capture():
            corrupt_logits = e.teacher_forced(self._source(self.corrupt_ids), None, fed)[0]
        self.step, self.corrupt_piece = _choose_step(clean_logits, corrupt_logits, self.output_ids, step)
        self.clean_piece = self.output_ids[self.step]
        self.clean_value = float(_metric(clean_logits[self.step], self.clean_piece, self.corrupt_piece))
        self.corrupt_value = float(_metric(corrupt_logits[self.step], self.clean_piece, self.corrupt_piece))

    def _source(self, ids: list) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.tr.device)              # (1, S)

    @property
    def same_length(self) -> bool:
        """Encoder positions correspond only when both sources have as many pieces."""
        return len(self.clean_ids) == len(self.corrupt_ids)

    @torch.inference_mode()
    def values(self, runs: list[list[Copy]], budget: int | None = None) -> np.ndarray:
        """m (n_runs,) float64 of the corrupt run with each run's copies from the clean run, in
        batched forced passes over the fed prefix up to the step (later positions cannot change it)."""
        for copies in runs:
            for point, position, head in copies:
                self._check(point, position, head)
        T = self.step + 1
        S = len(self.corrupt_ids)
        per_pass = max(1, (budget or default_budget(self.tr)) // (S + T))
        fed = torch.tensor([self.fed_ids[:T]], device=self.tr.device)                     # (1, T)
        values = []
        for start in range(0, len(runs), per_pass):
            chunk = runs[start:start + per_pass]
            hooks = {name: self._copier(name, mask) for name, mask in self._masks(chunk, S, T).items()}
            B = len(chunk)
            with intervening(hooks), no_capture():
                logits = self.tr.engine.teacher_forced(self._source(self.corrupt_ids).expand(B, S), None,
                                                       fed.expand(B, T))                  # (B, T, V)
            values.append(_metric(logits[:, self.step], self.clean_piece, self.corrupt_piece))
        return torch.cat(values).double().cpu().numpy() if values else np.zeros(0)

    def restored(self, runs: list[list[Copy]], budget: int | None = None) -> np.ndarray:
        """(m_patched - m_corrupt) / (m_clean - m_corrupt) for each run (NaN where the two runs agree)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.values(runs, budget) - self.corrupt_value) / (self.clean_value - self.corrupt_value)

    def _check(self, point: str, position, head) -> None:
        if point not in self.clean_values:
            raise ValueError(f"unknown point {point!r}; see tr.engine.hook_points()")
        if point.startswith("encoder.") and not self.same_length:
            raise ValueError(f"{point}: the sources differ in piece count ({len(self.clean_ids)} vs "
                             f"{len(self.corrupt_ids)}), so encoder positions do not correspond")
        if head is not None and not point.endswith(".z"):
            raise ValueError(f"{point}: only a z point has heads")
        length = len(self.corrupt_ids) if point.startswith("encoder.") else len(self.fed_ids)
        if position is not None and not (isinstance(position, (int, np.integer)) and 0 <= position < length):
            raise ValueError(f"{point}: position {position!r} out of range (0..{length - 1})")
        if head is not None and not (isinstance(head, (int, np.integer)) and 0 <= head < self.tr.config.n_heads):
            raise ValueError(f"{point}: head {head!r} out of range (0..{self.tr.config.n_heads - 1})")

    def _masks(self, chunk: list[list[Copy]], S: int, T: int) -> dict[str, torch.Tensor]:
        """point -> bool mask over (B, t) positions, or (B, t, H) for z points: True = copy."""
        masks: dict[str, torch.Tensor] = {}
        H = self.tr.config.n_heads
        for b, copies in enumerate(chunk):
            for point, position, head in copies:
                t = S if point.startswith("encoder.") else T
                if position is not None and position >= t:
                    continue                     # a decoder position after the step cannot change it
                if point not in masks:
                    shape = (len(chunk), t, H) if point.endswith(".z") else (len(chunk), t)
                    masks[point] = torch.zeros(shape, dtype=torch.bool)
                where = (b, slice(None) if position is None else position)
                if point.endswith(".z"):
                    where += (slice(None) if head is None else head,)
                masks[point][where] = True
        return {name: mask.to(self.tr.device) for name, mask in masks.items()}

    def _copier(self, name: str, mask: torch.Tensor):
        """fn(name, x): x with the masked positions (and heads) taken from the clean run."""
        clean = self.clean_values[name][:, : mask.shape[1]]                              # (1, t, ...)

        def copy(_, x):
            keep = mask.view(mask.shape + (1,) * (x.dim() - mask.dim()))                  # (B, t[, H], 1)
            return torch.where(keep, clean.to(x.dtype), x)
        return copy


def head_runs(tr, kind: str) -> list[list[Copy]]:
    """One run per head of `kind`, each copying that head's z at every position."""
    layers = tr.config.n_encoder_layers if kind == "encoder_self" else tr.config.n_decoder_layers
    return [[(z_name(kind, layer), None, head)] for layer in range(layers) for head in range(tr.config.n_heads)]


def encoder_runs(tr, S: int) -> list[list[Copy]]:
    """One run per (encoder layer, source position), copying that layer's output there."""
    return [[(f"encoder.{layer}.resid_post", i, None)] for layer in range(tr.config.n_encoder_layers) for i in range(S)]


def patch(tr, clean: str, corrupt: str, step: int | None = None, target=None) -> PatchResult:
    """The full sweep: every encoder layer at every source position (when the piece counts agree)
    and every head of every kind, in one batched set of passes."""
    started = time.perf_counter()
    run = PatchRun(tr, clean, corrupt, step, target)
    S, c = len(run.corrupt_ids), tr.config
    kinds = [k for k in KINDS if k != "encoder_self" or run.same_length]
    runs = (encoder_runs(tr, S) if run.same_length else []) + [r for k in kinds for r in head_runs(tr, k)]
    restored = run.restored(runs)
    position = 0
    encoder = None
    if run.same_length:
        encoder, position = restored[: c.n_encoder_layers * S].reshape(c.n_encoder_layers, S), c.n_encoder_layers * S
    heads: dict = {"encoder_self": None}
    for kind in kinds:
        layers = c.n_encoder_layers if kind == "encoder_self" else c.n_decoder_layers
        heads[kind] = restored[position: position + layers * c.n_heads].reshape(layers, c.n_heads)
        position += layers * c.n_heads
    pieces = tr.engine.tokenizer
    return PatchResult(
        output_tokens=pieces.pieces(run.output_ids), fed_ids=list(run.fed_ids),
        clean_source_ids=list(run.clean_ids), corrupt_source_ids=list(run.corrupt_ids), step=run.step,
        clean_piece_id=int(run.clean_piece), corrupt_piece_id=int(run.corrupt_piece),
        clean_value=run.clean_value, corrupt_value=run.corrupt_value, encoder=encoder, heads=heads,
        output_ids=list(run.output_ids), clean_source_tokens=pieces.source_pieces(run.clean_ids),
        corrupt_source_tokens=pieces.source_pieces(run.corrupt_ids), seconds=time.perf_counter() - started)
