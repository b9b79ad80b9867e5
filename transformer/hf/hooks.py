"""Capture, ablation and interventions for Hugging Face models, with hooks registered once at load.

Two hooks per attention module, both reading per-call state from ContextVars (never from
the model), so concurrent calls in different threads cannot see each other:
- a forward hook hands the eager attention weights (B, H, Tq, Tk) to the recorder of
  `transformer.capture` that the current call installed, if any;
- a forward pre-hook on the output projection multiplies each head's slice of
  softmax(QK^T)V by that call's gate (0 = switched off), before the projection and its bias,
  then hands the heads' outputs, the point "{stack}.{layer}.{kind}.z" (B, Tq, H, dh), to the
  call's hook (interventions.py), which may replace them, and to the recorder if it names it.
One hook per residual point (arch.residual_sites) hands the stream to the call's hook, which may
replace it, then to the recorder when the call asks for that point (capture(residual=...)); with
neither it returns after two ContextVar reads. A pre-LN mid point is read at the next norm's
input but written at the sublayer's output (the residual it is added to kept from the sublayer's
pre-norm input), so the layer carries the written value on both paths.
"""
from __future__ import annotations

import contextlib
import contextvars
from functools import partial

import torch

from ..capture import current_recorder, record, record_residual
from ..interventions import current as current_interventions
from ..interventions import hooked, intervene, z_name
from .arch import ResidualSite, Site

_current_gates: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "attention_atlas_hf_gates", default=None)


def _record(kind: str, layer: int, module, args, output) -> None:
    if output[-1] is not None:
        record(kind, layer, output[-1])                           # (B, H, Tq, Tk)


def _output(name: str, module, args, output):
    x = output[0] if isinstance(output, tuple) else output                       # (B, t, D)
    new = intervene(name, x)
    record_residual(name, new)
    if new is x:
        return None
    return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new


def _input(name: str, write: bool, module, args, kwargs):
    x = args[0] if args else kwargs["hidden_states"]                              # (B, t, D)
    new = intervene(name, x) if write else x
    record_residual(name, new)
    if new is x:
        return None
    if args:
        return (new,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=new)


def _keep_residual(name: str, module, args) -> None:
    """Pre-LN: the sublayer's pre-norm input is the residual its output is added to."""
    state = current_interventions()
    if state is not None and name in state.hooks:
        state.stash[name] = args[0]                                               # (B, t, D)


def _write_sum(name: str, module, args, output):
    """Pre-LN mid point = residual + sublayer output: hand that sum to the hook; a write W becomes
    the output W - residual (dropout is off in eval, so the layer then carries W)."""
    if not hooked(name):
        return None
    state = current_interventions()
    residual = state.stash.pop(name)
    out = output[0] if isinstance(output, tuple) else output
    mid = residual + out
    new = state.apply(name, mid)
    if new is mid:
        return None
    out = new - residual
    return (out,) + tuple(output[1:]) if isinstance(output, tuple) else out


def _heads(kind: str, layer: int, n_heads: int, name: str, module, args):
    """Gate the heads, then the z point `name`: (B, Tq, H * dh) head-major in, the same out."""
    gates = _current_gates.get()
    x = args[0]                                                    # (B, Tq, H * dh)
    if gates is not None:
        gate = gates[kind][layer].to(x.dtype)                      # (H,)
        x = (x.unflatten(-1, (n_heads, -1)) * gate[:, None]).flatten(-2)
    recorder = current_recorder()
    if current_interventions() is not None or (recorder is not None and recorder.wants(name)):
        z = x.unflatten(-1, (n_heads, -1))                         # (B, Tq, H, dh)
        new = intervene(name, z)
        record_residual(name, new)
        if new is not z:
            x = new.flatten(-2)
    return None if x is args[0] else (x,) + tuple(args[1:])


def install_module_hooks(model, sites: list[Site], residual: list[ResidualSite] = ()) -> None:
    """Once per model: a second translator over the same model must not record twice."""
    if getattr(model, "_atlas_hooks_installed", False):
        return
    model._atlas_hooks_installed = True
    for site in sites:
        site.attention.register_forward_hook(partial(_record, site.kind, site.layer))
        site.out_proj.register_forward_pre_hook(
            partial(_heads, site.kind, site.layer, site.n_heads, z_name(site.kind, site.layer)))
    for point in residual:
        if point.reads == "input":
            point.module.register_forward_pre_hook(partial(_input, point.name, point.adds is None),
                                                   with_kwargs=True)
        else:
            point.module.register_forward_hook(partial(_output, point.name))
        if point.adds is not None:
            norm, sublayer = point.adds
            norm.register_forward_pre_hook(partial(_keep_residual, point.name))
            sublayer.register_forward_hook(partial(_write_sum, point.name))


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
