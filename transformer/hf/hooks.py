"""Capture and interventions (head ablation among them) for Hugging Face models, with hooks
registered once at load.

Two hooks per attention module, both reading per-call state from ContextVars (never from
the model), so concurrent calls in different threads cannot see each other:
- a forward hook hands the eager attention weights (B, H, Tq, Tk) to the recorder of
  `transformer.capture` that the current call installed, if any;
- a forward pre-hook on the output projection hands the heads' outputs, softmax(QK^T)V before the
  projection and its bias, the point "{stack}.{layer}.{kind}.z" (B, Tq, H, dh), to the call's
  hook (interventions.py; head_mask's gates are such a hook), which may replace them, and to the
  recorder if it names it.
One hook per residual point (arch.residual_sites) hands the stream to the call's hook, which may
replace it, then to the recorder when the call asks for that point (capture(residual=...)); with
neither it returns after two ContextVar reads. A pre-LN mid point is read at the next norm's
input but written at the sublayer's output (minus the stream at the point before, which the
call's stash keeps), so the layer carries the written value on both paths.
"""
from __future__ import annotations

from functools import partial

from ..capture import _current_recorder, record, record_residual
from ..interventions import current as current_interventions
from ..interventions import hooked, intervene, z_name
from .arch import ResidualSite, Site

def _record(kind: str, layer: int, module, args, output) -> None:
    if output[-1] is not None:
        record(kind, layer, output[-1])                           # (B, H, Tq, Tk)


def _output(name: str, module, args, output):
    state, recorder = current_interventions(), _current_recorder.get()
    if state is None and recorder is None:
        return None
    x = output[0] if isinstance(output, tuple) else output                       # (B, t, D)
    new = _carry(state, name, x, True)
    record_residual(name, new)
    if new is x:
        return None
    return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new


def _input(name: str, write: bool, module, args, kwargs):
    state, recorder = current_interventions(), _current_recorder.get()
    if state is None and recorder is None:
        return None
    x = args[0] if args else kwargs["hidden_states"]                              # (B, t, D)
    new = _carry(state, name, x, write)
    record_residual(name, new)
    if new is x:
        return None
    if args:
        return (new,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=new)


def _carry(state, name: str, x, write: bool):
    """x through the call's hook at `name` (if it writes here), kept in the call's stash: a pre-LN
    sublayer's output is added to the stream at the point before it."""
    if state is None:
        return x
    new = state.apply(name, x) if write else x
    state.stash[name] = new
    return new


def _write_sum(name: str, before: str, module, args, output):
    """Pre-LN mid point = the stream at `before` + the sublayer's output: hand that sum to the hook;
    a write W becomes the output W - that stream (dropout is off in eval: the layer carries W)."""
    if not hooked(name):
        return None
    state = current_interventions()
    residual = state.stash[before]
    out = output[0] if isinstance(output, tuple) else output
    mid = residual + out
    new = state.apply(name, mid)
    if new is mid:
        return None
    out = new - residual
    return (out,) + tuple(output[1:]) if isinstance(output, tuple) else out


def _heads(n_heads: int, name: str, module, args):
    """The z point `name`: (B, Tq, H * dh) head-major in, the same out."""
    x = args[0]                                                    # (B, Tq, H * dh)
    recorder = _current_recorder.get()
    if hooked(name) or (recorder is not None and recorder.wants(name)):
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
            partial(_heads, site.n_heads, z_name(site.kind, site.layer)))
    for point in residual:
        if point.reads == "input":
            point.module.register_forward_pre_hook(partial(_input, point.name, point.adds is None),
                                                   with_kwargs=True)
        else:
            point.module.register_forward_hook(partial(_output, point.name))
        if point.adds is not None:
            before, sublayer = point.adds
            sublayer.register_forward_hook(partial(_write_sum, point.name, before))
