"""Per-call capture, in the TransformerLens style: attention weights and the residual stream.

Each capture point is an identity `HookPoint` (ours, model.py) or a module hook (Hugging Face,
hf/hooks.py over hf/arch.py's sites), registered once when the model is built or loaded. The hook
hands the tensor to whatever recorder the *current call* installed in a ContextVar. Nothing is
stored on the model or in module globals, so threads (Streamlit sessions) never see each other's.

A recorder stores only what it asks for: `capture()` attention weights (as always), and
`capture(residual=True)` or `capture(residual={names})` the residual stream too (a recorder
without attention, `capture(attention=False, residual=...)`, keeps ours on the fused path).
Residual points are named "{stack}.{layer}.{point}" (RESIDUAL_POINTS), plus "{stack}.final_norm":
- "encoder.{i}.resid_pre"        the stream entering encoder layer i (embeddings for i = 0)
- "encoder.{i}.resid_mid_self"   after its self-attention sublayer (post-LN: after that norm)
- "encoder.{i}.resid_post"       after its feed-forward sublayer: the layer's output
- "decoder.{i}.resid_pre", "decoder.{i}.resid_mid_self", "decoder.{i}.resid_mid_cross" (after
  cross-attention), "decoder.{i}.resid_post"
- "encoder.final_norm", "decoder.final_norm": the full stack's output after its final norm (the
  same tensor as the last resid_post where the model has none: post-LN ours, Marian, BART)
Each is (B, t, D) per forward; cached decoding records one row per step (`Recorder.residual_stream`
joins them). A new point is its name here plus where each engine observes it (model.py; arch.py).
The per-head points "{stack}.{layer}.{self|cross}.z" (interventions.py) are recorded only when
named (`capture(residual={...})`), never by residual=True. Every named point can also be written
per call: interventions.py.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .interventions import current as current_interventions
from .interventions import intervene

KINDS = ("encoder_self", "decoder_self", "cross")
RESIDUAL_POINTS = {"encoder": ("resid_pre", "resid_mid_self", "resid_post"),
                   "decoder": ("resid_pre", "resid_mid_self", "resid_mid_cross", "resid_post")}
FINAL_NORM = "final_norm"

_current_recorder: contextvars.ContextVar["Recorder | None"] = contextvars.ContextVar(
    "attention_atlas_recorder", default=None)


def residual_name(stack: str, layer: int, point: str) -> str:
    """"decoder.1.resid_mid_cross": the one spelling of a residual capture point."""
    if point not in RESIDUAL_POINTS[stack]:
        raise ValueError(f"unknown {stack} point {point!r}; expected one of {RESIDUAL_POINTS[stack]}")
    return f"{stack}.{layer}.{point}"


def residual_names(n_encoder_layers: int, n_decoder_layers: int) -> list[str]:
    """Every residual capture point of a model, in model order."""
    names = []
    for stack, layers in (("encoder", n_encoder_layers), ("decoder", n_decoder_layers)):
        names += [residual_name(stack, i, p) for i in range(layers) for p in RESIDUAL_POINTS[stack]]
        names.append(f"{stack}.{FINAL_NORM}")
    return names


class HookPoint(nn.Module):
    """Identity module: a stable place to observe a tensor. Attention points are (kind, layer);
    residual points carry their `name` (see the module docstring)."""

    def __init__(self, kind: str | None = None, layer: int | None = None, name: str | None = None):
        super().__init__()
        self.kind, self.layer, self.name = kind, layer, name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def record(kind: str, layer: int, weights: torch.Tensor) -> None:
    """Hand weights (B, H, Tq, Tk) to the current call's recorder, if it records attention (every
    engine's hooks call this: ours' HookPoints below, Hugging Face's in hf/hooks.py)."""
    recorder = _current_recorder.get()
    if recorder is not None and recorder.attention:
        recorder.record(kind, layer, weights)


def record_residual(name: str, x: torch.Tensor) -> None:
    """Hand the residual stream (B, t, D) at point `name` to the current call's recorder, if it asks for it."""
    recorder = _current_recorder.get()
    if recorder is not None and recorder.wants(name):
        recorder.record_residual(name, x)


def residual_wanted() -> bool:
    """True when this call records some residual point: ours then calls its residual HookPoints."""
    recorder = _current_recorder.get()
    return recorder is not None and bool(recorder.residual)


def observe(point: HookPoint | None, x: torch.Tensor) -> torch.Tensor:
    """x through a named HookPoint only when this call records residuals or hooks this point: two
    ContextVar reads when off."""
    if point is None:
        return x
    recorder, state = _current_recorder.get(), current_interventions()
    if (recorder is not None and recorder.residual) or (state is not None and point.name in state.hooks):
        return point(x)
    return x


def _record_hook(module: HookPoint, inputs, output):
    """A named point: this call's hook may replace the tensor, then the recorder sees what the
    model carries on. An attention point: the weights go to the recorder."""
    if module.name is None:
        record(module.kind, module.layer, output)
        return None
    output = intervene(module.name, output)
    record_residual(module.name, output)
    return output


def install_hook_points(model: nn.Module) -> int:
    """Register the forwarding hook on every HookPoint once, at build time."""
    count = 0
    for module in model.modules():
        if isinstance(module, HookPoint):
            module.register_forward_hook(_record_hook)
            count += 1
    return count


class Recorder:
    """One call's captures: attention (kind, layer) -> list of (B, H, Tq, Tk), when `attention`;
    residuals name -> list of (B, t, D), for the names `residual` asks for (True: every point)."""

    def __init__(self, attention: bool = True, residual=False):
        self.attention = bool(attention)
        self.residual = residual if isinstance(residual, bool) else frozenset(residual)
        self.records: dict[tuple[str, int], list[torch.Tensor]] = defaultdict(list)
        self.residuals: dict[str, list[torch.Tensor]] = defaultdict(list)

    def wants(self, name: str) -> bool:
        """residual=True: every residual point (per-head z points only when named)."""
        if self.residual is True:
            return not name.endswith(".z")
        return bool(self.residual) and name in self.residual

    def record(self, kind: str, layer: int, weights: torch.Tensor) -> None:
        self.records[(kind, layer)].append(weights.detach())

    def record_residual(self, name: str, x: torch.Tensor) -> None:
        self.residuals[name].append(x.detach())

    def residual_stream(self, name: str) -> torch.Tensor:
        """(B, T, D), or (B, T, H, d_head) for a z point: the point's records joined along positions (cached decoding: one per step)."""
        rows = self.residuals.get(name)
        if not rows:
            raise KeyError(f"no residual recorded at {name!r}; recorded: {sorted(self.residuals)}")
        return torch.cat(rows, dim=1)


def current_recorder() -> "Recorder | None":
    """This call's recorder, or None when nothing records it."""
    return _current_recorder.get()


def is_capturing() -> bool:
    """True inside a capture that records attention: ours then takes the explicit-softmax path."""
    recorder = _current_recorder.get()
    return recorder is not None and recorder.attention


@contextlib.contextmanager
def capture(attention: bool = True, residual=False):
    """Install a fresh recorder for this call (this thread/context) and always reset it.
    residual: False (none), True (every point) or a collection of point names."""
    recorder = Recorder(attention, residual)
    token = _current_recorder.set(recorder)
    try:
        yield recorder
    finally:
        _current_recorder.reset(token)


@contextlib.contextmanager
def no_capture():
    """Make sure no outer recorder sees inner work (e.g. beam search before the forced pass)."""
    token = _current_recorder.set(None)
    try:
        yield
    finally:
        _current_recorder.reset(token)


@contextlib.contextmanager
def recording(attention: bool, residual=False):
    """A call's capture (yields its Recorder) when it asks for anything; else no_capture (yields None)."""
    if not attention and not residual:
        with no_capture():
            yield None
        return
    with capture(attention, residual) as recorder:
        yield recorder


@dataclass
class AttentionTrace:
    """Every head's weights of one translation. Rows are queries, columns are keys."""
    encoder_self: np.ndarray   # float32 (n_encoder_layers, n_heads, S, S)
    decoder_self: np.ndarray   # float32 (n_decoder_layers, n_heads, T, T)
    cross: np.ndarray          # float32 (n_decoder_layers, n_heads, T, S)

    def get(self, kind: str) -> np.ndarray:
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; expected one of {KINDS}")
        return getattr(self, kind)


def trace_from(recorder: Recorder, config, S: int, T: int) -> AttentionTrace:
    """Stack one call's recorded weights into (layers, heads, Tq, Tk) arrays: the pieces of cached
    decoding (one row per step, keys growing) become rows. config: n_heads and layer counts."""
    c = config

    def stack(kind: str, layers: int, width: int) -> np.ndarray:
        per_layer = []
        for layer in range(layers):
            rows = recorder.records[(kind, layer)]
            full = torch.zeros(c.n_heads, sum(r.shape[2] for r in rows), width)
            position = 0
            for r in rows:                                   # (1, H, q, k), k <= width
                full[:, position:position + r.shape[2], : r.shape[3]] = r[0].float().cpu()
                position += r.shape[2]
            per_layer.append(full)
        return torch.stack(per_layer).numpy()

    trace = AttentionTrace(encoder_self=stack("encoder_self", c.n_encoder_layers, S),
                           decoder_self=stack("decoder_self", c.n_decoder_layers, T),
                           cross=stack("cross", c.n_decoder_layers, S))
    assert trace.decoder_self.shape[2] == T and trace.cross.shape[2] == T, "trace rows != output steps"
    return trace


@dataclass
class Masks:
    source_padding: np.ndarray   # bool (S,), True where a key may be attended
    target_causal: np.ndarray    # bool (T, T), True on and below the diagonal


def normalize_head_mask(head_mask, n_encoder_layers: int, n_decoder_layers: int, n_heads: int,
                        device=None) -> dict[str, torch.Tensor] | None:
    """{(kind, layer, head)} -> {kind: float gate (layers, heads)}, 0 where a head is off."""
    if not head_mask:
        return None
    layers = {"encoder_self": n_encoder_layers, "decoder_self": n_decoder_layers,
              "cross": n_decoder_layers}
    gates = {kind: torch.ones(n, n_heads, device=device) for kind, n in layers.items()}
    for item in head_mask:
        try:
            kind, layer, head = item
        except (TypeError, ValueError):
            raise ValueError(f"head_mask entries are (kind, layer, head) triples, got {item!r}") from None
        if kind not in layers:
            raise ValueError(f"head_mask: unknown kind {kind!r}; expected one of {KINDS}")
        if not isinstance(layer, (int, np.integer)) or not 0 <= layer < layers[kind]:
            raise ValueError(f"head_mask: layer {layer!r} out of range for {kind} (0..{layers[kind] - 1})")
        if not isinstance(head, (int, np.integer)) or not 0 <= head < n_heads:
            raise ValueError(f"head_mask: head {head!r} out of range (0..{n_heads - 1})")
        gates[kind][int(layer), int(head)] = 0.0
    return gates
