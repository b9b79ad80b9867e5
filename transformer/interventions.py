"""Per-call interventions, in the TransformerLens style: read *and write* any named point.

`translate(..., hooks={name: fn})` installs `fn(name, tensor)` for one call; the engine's hook
points (ours: model.py's HookPoints; Hugging Face: hf/hooks.py) hand it the tensor there, and a
tensor it returns replaces the one the model carried (None: read only). Like capture, the hooks
live in a ContextVar, never on the model or in a module global, so threads (Streamlit sessions)
never see each other's, and a call without hooks costs one ContextVar read per point.

Points: every residual point of capture.py ("encoder.1.resid_post", ...), and per attention module
its heads' output before the output projection, "{stack}.{layer}.{kind}.z", (B, t, H, d_head),
kind "self" or "cross" (z_name). Cached decoding calls a decoder point once per step (t = 1).

Head ablation is the same channel: `intervening(hooks, gates)` turns head gates (head_mask) into
hooks on the z points (gate_hooks) that run before the caller's own hook there, so every engine
applies them where it applies any hook, and no engine method takes gates.
"""
from __future__ import annotations

import contextlib
import contextvars
from functools import partial
from typing import Callable

import torch

Z_KINDS = {"encoder_self": ("encoder", "self"), "decoder_self": ("decoder", "self"), "cross": ("decoder", "cross")}

_current_hooks: contextvars.ContextVar["Interventions | None"] = contextvars.ContextVar(
    "attention_atlas_hooks", default=None)


def z_name(kind: str, layer: int) -> str:
    """("cross", 1) -> "decoder.1.cross.z": the per-head point of one attention module."""
    stack, which = Z_KINDS[kind]
    return f"{stack}.{layer}.{which}.z"


def z_names(n_encoder_layers: int, n_decoder_layers: int) -> list[str]:
    """Every per-head point of a model, in model order."""
    return ([z_name("encoder_self", i) for i in range(n_encoder_layers)]
            + [z_name(kind, i) for i in range(n_decoder_layers) for kind in ("decoder_self", "cross")])


def _gate(gate: torch.Tensor, name: str, z: torch.Tensor) -> torch.Tensor:
    """z (B, t, H, dh) times a gate (H,), every row alike, or (B, H), each row its own."""
    gate = gate.to(z.dtype)
    return z * (gate[:, None] if gate.dim() == 1 else gate[:, None, :, None])


def gate_hooks(gates: dict[str, torch.Tensor] | None, every_module: bool = False) -> dict[str, Callable]:
    """Head gates {kind: (layers, heads)} (Engine.gates; or (layers, B, heads), a gate per row) as
    hooks: z times each head's gate, on the z point of every module with a head off. A module with
    all heads on is left alone (x * 1 = x) unless `every_module` (gradients with respect to gates)."""
    hooks = {}
    for kind, table in (gates or {}).items():
        for layer, gate in enumerate(table):
            if every_module or bool((gate != 1).any()):
                hooks[z_name(kind, layer)] = partial(_gate, gate)
    return hooks


def _then(first: Callable, second: Callable, name: str, x: torch.Tensor):
    """The head gate, then the caller's hook at the same point (None from it: keep the gated z)."""
    gated = first(name, x)
    new = second(name, gated)
    return gated if new is None else new


class Interventions:
    """One call's hooks {name: fn} with its head gates folded in, and a scratch `stash` the engine's
    write sites may use within one forward (Hugging Face pre-LN mid points keep the residual a
    sublayer adds to). `rows_apart`: the caller hooked something, and a hook may treat the rows of a
    batch apart; gates treat every row alike, so rows that repeat a source may share its encoding."""

    def __init__(self, hooks: dict[str, Callable] | None, gates: dict[str, torch.Tensor] | None = None):
        self.hooks = dict(hooks or {})
        self.rows_apart = bool(hooks)
        for name, gate in gate_hooks(gates).items():
            own = self.hooks.get(name)
            self.hooks[name] = gate if own is None else partial(_then, gate, own)
        self.stash: dict[str, torch.Tensor] = {}

    def apply(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """fn(name, x) if this call hooks `name`: its tensor (shape checked) or x unchanged."""
        fn = self.hooks.get(name)
        if fn is None:
            return x
        new = fn(name, x)
        if new is None:
            return x
        if not isinstance(new, torch.Tensor) or new.shape != x.shape:
            got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
            raise ValueError(f"hook for {name!r} returned {got}; a write must be a tensor of shape {tuple(x.shape)}")
        return new.to(dtype=x.dtype, device=x.device)


# This call's interventions, or None (the fast path): the ContextVar's own getter, so the hook
# points of a call without hooks pay no Python frame for asking.
current = _current_hooks.get


def rows_apart() -> bool:
    """True when this call has hooks of its own (not only head gates): rows may be treated apart."""
    state = _current_hooks.get()
    return state is not None and state.rows_apart


def hooked(name: str) -> bool:
    """True when this call has a hook at `name`."""
    state = _current_hooks.get()
    return state is not None and name in state.hooks


def intervene(name: str, x: torch.Tensor) -> torch.Tensor:
    """x through this call's hook at `name`, if any (every engine's hook points call this)."""
    state = _current_hooks.get()
    return x if state is None else state.apply(name, x)


def check_hooks(hooks, points: list[str]) -> dict[str, Callable] | None:
    """hooks= as given to translate -> {name: fn}, or None for none; ValueError for an unknown
    point or a hook that is not callable."""
    if not hooks:
        return None
    if not isinstance(hooks, dict):
        raise ValueError("hooks must be a dict {point name: fn(name, tensor)}")
    known = set(points)
    for name, fn in hooks.items():
        if name not in known:
            raise ValueError(f"hooks: unknown point {name!r}; points look like {points[0]!r}, "
                             f"{points[-1]!r} or 'decoder.0.cross.z' ({len(points)} in this model)")
        if not callable(fn):
            raise ValueError(f"hooks: the hook for {name!r} is not callable")
    return dict(hooks)


@contextlib.contextmanager
def intervening(hooks: dict[str, Callable] | None, gates: dict[str, torch.Tensor] | None = None):
    """Install this call's hooks and head gates (None: none, also hiding an outer call's); always reset."""
    state = Interventions(hooks, gates) if hooks or gates else None
    token = _current_hooks.set(state if state is not None and state.hooks else None)
    try:
        yield
    finally:
        _current_hooks.reset(token)
