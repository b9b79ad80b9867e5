"""Attribution: which source pieces mattered for each output piece, by four methods, and how
faithful each is (the perturbation test). The drawing is still views_explain.attribution_view."""
from __future__ import annotations

from ..views_explain import attribution_view
from .base import View, ViewContext


def render(ctx: ViewContext):
    return attribution_view(ctx.result, ctx.display, ctx.display.explain_note, ctx.attribution,
                            ctx.attribution_average, len(ctx.example_texts()))


VIEW = View(
    name="Attribution", title="Which source pieces mattered, by method",
    explains="For each output piece, how much each source piece mattered according to raw attention, "
             "norm-weighted attention, ALTI+ and gradients, and a test of which of them is right.",
    render=render, needs_explain=True, steps=True)
