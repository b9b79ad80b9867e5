"""Capture and ablation for Hugging Face models, with hooks registered once at load.

Two hooks per attention module, both reading per-call state from ContextVars (never from
the model), so concurrent calls in different threads cannot see each other:
- a forward hook hands the eager attention weights (B, H, Tq, Tk) to the recorder of
  `transformer.capture` that the current call installed, if any;
- a forward pre-hook on the output projection multiplies each head's slice of
  softmax(QK^T)V by that call's gate (0 = switched off), before the projection and its bias.
One hook per residual point (arch.residual_sites) hands the stream to the recorder when the call
asks for that point (capture(residual=...)); otherwise it returns after one ContextVar read.
"""
from __future__ import annotations

import contextlib
import contextvars
from functools import partial

import torch

from ..capture import record, record_residual
from .arch import ResidualSite, Site

_current_gates: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "attention_atlas_hf_gates", default=None)


def _record(kind: str, layer: int, module, args, output) -> None:
    if output[-1] is not None:
        record(kind, layer, output[-1])                           # (B, H, Tq, Tk)


def _record_output(name: str, module, args, output) -> None:
    record_residual(name, output[0] if isinstance(output, tuple) else output)  # (B, t, D)


def _record_input(name: str, module, args, kwargs) -> None:
    record_residual(name, args[0] if args else kwargs["hidden_states"])          # (B, t, D)


def _gate(kind: str, layer: int, n_heads: int, module, args):
    gates = _current_gates.get()
    if gates is None:
        return None
    x = args[0]                                                    # (B, Tq, H * dh)
    gate = gates[kind][layer].to(x.dtype)                          # (H,)
    gated = (x.unflatten(-1, (n_heads, -1)) * gate[:, None]).flatten(-2)
    return (gated,) + tuple(args[1:])


def install_module_hooks(model, sites: list[Site], residual: list[ResidualSite] = ()) -> None:
    """Once per model: a second translator over the same model must not record twice."""
    if getattr(model, "_atlas_hooks_installed", False):
        return
    model._atlas_hooks_installed = True
    for site in sites:
        site.attention.register_forward_hook(partial(_record, site.kind, site.layer))
        site.out_proj.register_forward_pre_hook(partial(_gate, site.kind, site.layer, site.n_heads))
    for point in residual:
        if point.reads == "input":
            point.module.register_forward_pre_hook(partial(_record_input, point.name), with_kwargs=True)
        else:
            point.module.register_forward_hook(partial(_record_output, point.name))


def current_gates() -> dict | None:
    """This call's head gates, None when every head is on (tests check it is reset)."""
    return _current_gates.get()


@contextlib.contextmanager
def gating(gates: dict[str, torch.Tensor] | None):
    """Install this call's head gates ({kind: (layers, heads)}, or None for all on); always reset."""
    token = _current_gates.set(gates)
    try:
        yield
    finally:
        _current_gates.reset(token)
