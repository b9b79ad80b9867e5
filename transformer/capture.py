"""Per-call attention capture, in the TransformerLens style.

Each attention module ends its softmax in an identity `HookPoint`. One forward hook per
HookPoint is registered when the model is built; it hands the tensor to whatever
recorder the *current call* installed in a ContextVar. Nothing is stored on the model
or in module globals, so threads (Streamlit sessions) never see each other's traces.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

KINDS = ("encoder_self", "decoder_self", "cross")

_current_recorder: contextvars.ContextVar["Recorder | None"] = contextvars.ContextVar(
    "attention_atlas_recorder", default=None)


class HookPoint(nn.Module):
    """Identity module: a stable place to observe a tensor."""

    def __init__(self, kind: str, layer: int):
        super().__init__()
        self.kind, self.layer = kind, layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def record(kind: str, layer: int, weights: torch.Tensor) -> None:
    """Hand weights (B, H, Tq, Tk) to the current call's recorder, if it has one (every engine's
    hooks call this: ours' HookPoints below, Hugging Face's in hf/hooks.py)."""
    recorder = _current_recorder.get()
    if recorder is not None:
        recorder.record(kind, layer, weights)


def _record_hook(module: HookPoint, inputs, output) -> None:
    record(module.kind, module.layer, output)


def install_hooks(model: nn.Module) -> int:
    """Register the forwarding hook on every HookPoint once, at build time."""
    count = 0
    for module in model.modules():
        if isinstance(module, HookPoint):
            module.register_forward_hook(_record_hook)
            count += 1
    return count


class Recorder:
    """Collects post-softmax weights for one call: (kind, layer) -> list of (B, H, Tq, Tk)."""

    def __init__(self):
        self.records: dict[tuple[str, int], list[torch.Tensor]] = defaultdict(list)

    def record(self, kind: str, layer: int, weights: torch.Tensor) -> None:
        self.records[(kind, layer)].append(weights.detach())


def is_capturing() -> bool:
    """True inside `capture()`: attention then takes the explicit-softmax path."""
    return _current_recorder.get() is not None


@contextlib.contextmanager
def capture():
    """Install a fresh recorder for this call (this thread/context) and always reset it."""
    recorder = Recorder()
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
