"""benchmarks/bench_cached_step.py times the linears of a cached decode step: they must be exactly
the linear modules decode_step calls, each once, in its order."""
from __future__ import annotations

import torch
from torch import nn

from benchmarks.bench_cached_step import step_linears
from transformer.model import BOS_ID


@torch.inference_mode()
def test_the_benchmarks_linears_are_those_a_cached_step_calls_in_its_order(tiny):
    model = tiny.engine.model
    source = torch.tensor([tiny.encode_source("red dog runs")[0]])
    memory, cache = model.encode(source, None), model.new_cache()
    last = torch.full((1,), BOS_ID, dtype=torch.long)
    last = model.decode_step(last, 0, memory, None, cache).argmax(-1)   # the first step fills the cross cache
    called = []
    hooks = [module.register_forward_hook(lambda module, args, out: called.append(module))
             for module in model.modules() if isinstance(module, nn.Linear)]
    try:
        model.decode_step(last, 1, memory, None, cache)
    finally:
        for hook in hooks:
            hook.remove()
    expected = step_linears(model)
    assert len(expected) == 8 * len(model.decoder_layers) + 1
    assert [id(m) for m in called] == [id(m) for m in expected]
