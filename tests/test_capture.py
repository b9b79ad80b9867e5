"""Attention capture: shapes, row sums, exact zeros, faithfulness, per-call state, threads."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from conftest import random_sentences
from transformer.capture import capture, is_capturing, trace_from
from transformer.decoding import forced_logits
from transformer.model import MultiHeadAttention

SENTENCE = "red dog runs big tree"


def test_trace_shapes_and_tokens(tiny):
    out = tiny.translate(SENTENCE, capture=True)
    c = tiny.config
    S, T = len(out.source_tokens), len(out.output_tokens)
    assert out.source_tokens[-1] == "</s>" and "<s>" not in out.source_tokens
    assert out.target_tokens[0] == "<s>" and out.target_tokens[1:] == out.output_tokens[:-1]
    assert out.output_tokens[-1] == "</s>"
    att = out.attention
    assert att.encoder_self.shape == (c.n_encoder_layers, c.n_heads, S, S)
    assert att.decoder_self.shape == (c.n_decoder_layers, c.n_heads, T, T)
    assert att.cross.shape == (c.n_decoder_layers, c.n_heads, T, S)
    for array in (att.encoder_self, att.decoder_self, att.cross):
        assert array.dtype == np.float32
    assert out.masks.source_padding.shape == (S,) and out.masks.source_padding.all()
    assert out.masks.target_causal.shape == (T, T) and out.masks.target_causal.dtype == bool
    assert out.positional_encoding.shape == (max(S, T), c.d_model)
    assert out.source_embeddings.shape == (S, c.d_model)
    assert len(out.steps) == T
    assert tiny.translate(SENTENCE, capture=False).attention is None


def test_rows_sum_to_one_and_masked_cells_are_exact_zero(tiny):
    out = tiny.translate(SENTENCE, capture=True)
    att = out.attention
    for array in (att.encoder_self, att.decoder_self, att.cross):
        np.testing.assert_allclose(array.sum(-1), 1.0, atol=1e-5)
    T = att.decoder_self.shape[-1]
    upper = ~np.tril(np.ones((T, T), dtype=bool))
    assert (att.decoder_self[..., upper] == 0.0).all()
    assert np.array_equal(att.decoder_self, np.tril(att.decoder_self))
    np.testing.assert_array_equal(out.masks.target_causal, ~upper)


@torch.no_grad()
def test_captured_weights_reproduce_every_attention_output(tiny):
    """Recompute each attention sublayer's output from the captured weights and that layer's
    own value/output projections; it must equal what the model produced during decoding."""
    calls = {}

    def keep_io(module, args, output):
        key_value = args[1]
        calls.setdefault(module, []).append((key_value.detach().clone(), output.detach().clone()))

    modules = [m for m in tiny.engine.model.modules() if isinstance(m, MultiHeadAttention)]
    handles = [m.register_forward_hook(keep_io) for m in modules]
    try:
        out = tiny.translate(SENTENCE, capture=True)
    finally:
        for h in handles:
            h.remove()
    c = tiny.config
    H, dh = c.n_heads, c.d_head
    att = out.attention
    checked = 0
    for module in modules:
        layer = module.hook.layer
        records = calls[module]
        if module.kind == "decoder_self":
            # cached decoding: one call per step; keys/values grow by one each step
            values = torch.cat([module.v_proj(kv) for kv, _ in records], dim=1)        # (1, T, D)
        else:
            values = module.v_proj(records[0][0])                                      # (1, Tk, D)
        v = values.view(1, -1, H, dh).transpose(1, 2)[0]                               # (H, Tk, dh)
        weights = torch.from_numpy(att.get(module.kind)[layer]).to(v.device)          # (H, Tq, Tk)
        for step, (_, produced) in enumerate(records):
            rows = weights if module.kind == "encoder_self" else weights[:, step:step + 1]
            if module.kind == "decoder_self":
                rows = rows[..., : step + 1]
                vv = v[:, : step + 1]
            else:
                vv = v
            context = (rows @ vv).transpose(0, 1).reshape(1, rows.shape[1], -1)        # (1, q, D)
            recomputed = module.out_proj(context)
            assert (recomputed - produced).abs().max().item() <= 1e-5
            checked += 1
    T = len(out.output_tokens)
    assert checked == c.n_encoder_layers + 2 * c.n_decoder_layers * T


def test_cached_decoding_equals_one_teacher_forced_pass(tiny):
    for sentence in random_sentences(4, seed=11):
        out = tiny.translate(sentence, capture=True)
        source = torch.tensor([out.source_ids], device=tiny.device)
        with torch.no_grad(), capture() as recorder:
            logits = forced_logits(tiny.engine.model, source, source != 0, out.output_ids)
        assert logits.argmax(-1).tolist() == out.output_ids
        forced = trace_from(recorder, tiny.config, len(out.source_ids), len(out.output_ids))
        for kind in ("encoder_self", "decoder_self", "cross"):
            assert np.abs(forced.get(kind) - out.attention.get(kind)).max() <= 1e-5
        probs = torch.softmax(logits, -1)
        for t, step in enumerate(out.steps):
            assert abs(step.prob - probs[t, out.output_ids[t]].item()) <= 1e-5


def test_step_records_hold_that_steps_attention_rows(tiny):
    out = tiny.translate(SENTENCE, capture=True, top_k=3)
    for t, step in enumerate(out.steps):
        assert step.token == out.output_tokens[t]
        assert len(step.top_k) == 3
        probs = [p for _, p in step.top_k]
        assert probs == sorted(probs, reverse=True) and probs[0] >= step.prob - 1e-7
        np.testing.assert_array_equal(step.cross_attention, out.attention.cross[:, :, t])
        np.testing.assert_array_equal(step.decoder_self_attention, out.attention.decoder_self[:, :, t, : t + 1])


def test_capture_state_is_per_call_and_always_reset(tiny):
    assert not is_capturing()
    tiny.translate(SENTENCE, capture=True)
    assert not is_capturing()
    try:
        with capture():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert not is_capturing()
    # nothing about a call is left on the model's modules
    for module in tiny.engine.model.modules():
        for name, value in vars(module).items():
            if name.startswith("_") or name == "training":
                continue
            assert not isinstance(value, (torch.Tensor, list, dict)) or name in ("kind",), (module, name)


def test_threads_get_their_own_traces(tiny):
    sentences = random_sentences(6, seed=5, min_len=3, max_len=8)
    reference = {s: tiny.translate(s, capture=True) for s in sentences}
    barrier = threading.Barrier(len(sentences))

    def run(sentence):
        barrier.wait()                  # start together so the calls really overlap
        return sentence, [tiny.translate(sentence, capture=True) for _ in range(3)]

    with ThreadPoolExecutor(max_workers=len(sentences)) as pool:
        outputs = list(pool.map(run, sentences))
    for sentence, results in outputs:
        ref = reference[sentence]
        for out in results:
            assert out.output_tokens == ref.output_tokens
            for kind in ("encoder_self", "decoder_self", "cross"):
                got, want = out.attention.get(kind), ref.attention.get(kind)
                assert got.shape == want.shape
                assert np.abs(got - want).max() <= 1e-6
