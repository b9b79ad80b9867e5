"""Interventions (issue 53, docs/api.md "Interventions"): translate(hooks={name: fn}) reads and writes
every residual point and every attention module's per-head z, for ours and every Hugging Face
family, in greedy, beam and forced decoding; a hook zeroing a head's z is head_mask; hooks belong to
the call (never seen by another thread, reset after it, even when a hook raises)."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from transformer import interventions
from transformer.capture import KINDS, capture
from transformer.interventions import intervening, z_name

FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]
TINY_SENTENCE = "red dog runs big tree"
SENTENCE = "A man is riding a bike."


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


def zero_heads(heads):
    """One hook per (kind, layer): zero those heads' z, as head_mask does."""
    by_point: dict[str, list[int]] = {}
    for kind, layer, head in heads:
        by_point.setdefault(z_name(kind, layer), []).append(head)

    def hook(name, z):                                           # (B, t, H, dh)
        z = z.clone()
        z[:, :, by_point[name]] = 0
        return z
    return {name: hook for name in by_point}


def same_run(a, b, atol=0.0):
    assert a.output_ids == b.output_ids
    np.testing.assert_allclose([s.prob for s in a.steps], [s.prob for s in b.steps], atol=atol, rtol=0)
    if a.attention is not None:
        for kind in KINDS:
            np.testing.assert_allclose(a.attention.get(kind), b.attention.get(kind), atol=max(atol, 1e-7), rtol=0)


# ---- ours --------------------------------------------------------------------------------------------
def test_a_reading_hook_sees_every_point_with_its_shape_and_changes_nothing(tiny):
    seen: dict[str, list] = {}
    points = tiny.engine.hook_points()
    hooks = {p: (lambda name, x: seen.setdefault(name, []).append(tuple(x.shape))) for p in points}
    plain = tiny.translate(TINY_SENTENCE)
    out = tiny.translate(TINY_SENTENCE, hooks=hooks)
    same_run(out, plain)
    c, S, T = tiny.config, len(plain.source_ids), len(plain.output_ids)
    dh = c.d_model // c.n_heads
    assert sorted(seen) == sorted(points) and len(points) == len(set(points))
    for name, shapes in seen.items():
        width = (c.n_heads, dh) if name.endswith(".z") else (c.d_model,)
        if name.startswith("encoder."):
            assert shapes == [(1, S) + width], name
        else:                                                    # cached decoding: one call a step
            assert shapes == [(1, 1) + width] * T, name
    forced = tiny.translate(TINY_SENTENCE, target=plain.output_tokens, hooks=hooks)
    same_run(forced, plain, atol=1e-6)


def test_a_write_is_what_the_model_carries_on(tiny, hf):
    """The recorder sees the written tensor, at every kind of point (HF pre-LN mid points included)."""
    for tr in [tiny] + [hf[name] for name in ("mbart50", "m2m100", "marian", "t5")]:
        text = TINY_SENTENCE if tr is tiny else SENTENCE
        source = torch.tensor([tr.encode_source(text)[0]], device=tr.device)
        fed = torch.tensor([[tr.engine.start_id, 5, 6]], device=tr.device)
        names = ["encoder.1.resid_mid_self", "decoder.0.resid_mid_cross", "decoder.1.resid_pre", "decoder.0.cross.z"]
        hooks = {n: (lambda name, x: torch.full_like(x, 0.25)) for n in names}
        with torch.no_grad(), intervening(hooks), capture(attention=False, residual=set(names)) as recorder:
            tr.engine.teacher_forced(source, None, fed)
        for name in names:
            torch.testing.assert_close(recorder.residual_stream(name), torch.full_like(recorder.residual_stream(name), 0.25),
                                       atol=1e-6, rtol=0, msg=f"{tr.engine.family} {name}")


def test_head_mask_equals_a_hook_zeroing_the_heads_z_ours(tiny):
    heads = {("encoder_self", 0, 1), ("decoder_self", 1, 3), ("cross", 0, 0), ("cross", 1, 2)}
    for kwargs in ({}, {"beam_size": 3}, {"target": "tree big runs dog red"}):
        masked = tiny.translate(TINY_SENTENCE, head_mask=heads, **kwargs)
        hooked = tiny.translate(TINY_SENTENCE, hooks=zero_heads(heads), **kwargs)
        same_run(hooked, masked)
    sentences = [TINY_SENTENCE, "old man sits", "blue ball jumps over the river"]
    assert (tiny.translate_batch(sentences, hooks=zero_heads(heads))
            == tiny.translate_batch(sentences, head_mask=heads))


def test_bad_hooks_raise_and_hooks_belong_to_the_call(tiny):
    with pytest.raises(ValueError, match="unknown point"):
        tiny.translate(TINY_SENTENCE, hooks={"encoder.9.resid_post": lambda n, x: None})
    with pytest.raises(ValueError, match="not callable"):
        tiny.translate(TINY_SENTENCE, hooks={"encoder.0.resid_post": 3})
    with pytest.raises(ValueError, match="shape"):
        tiny.translate(TINY_SENTENCE, hooks={"encoder.0.resid_post": lambda n, x: x[:, :1]})
    with pytest.raises(ValueError, match="explain"):
        tiny.translate(TINY_SENTENCE, explain=True, hooks={"encoder.0.resid_post": lambda n, x: None})
    with pytest.raises(RuntimeError, match="boom"):
        tiny.translate(TINY_SENTENCE, hooks={"decoder.0.cross.z": lambda n, x: (_ for _ in ()).throw(RuntimeError("boom"))})
    assert interventions.current() is None
    plain = tiny.translate(TINY_SENTENCE)
    calls = []
    with intervening({"encoder.0.resid_post": lambda n, x: calls.append(n) or x * 0}):
        inner = tiny.translate(TINY_SENTENCE)                # a call without hooks hides an outer one's
    assert calls == [] and interventions.current() is None
    same_run(inner, plain)


def concurrent(tr, text, hooks):
    """One thread translates with a writing hook, another without, at the same time: each gets what
    it gets alone."""
    alone = tr.translate(text)
    alone_hooked = tr.translate(text, hooks=hooks)
    assert alone_hooked.output_ids != alone.output_ids or not np.allclose(
        [s.prob for s in alone_hooked.steps], [s.prob for s in alone.steps])
    barrier = threading.Barrier(2)

    def run(with_hooks):
        barrier.wait()
        return [tr.translate(text, hooks=hooks if with_hooks else None) for _ in range(6)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        hooked, plain = pool.map(run, [True, False])
    for out in plain:
        same_run(out, alone, atol=1e-6)
    for out in hooked:
        same_run(out, alone_hooked, atol=1e-6)
    assert interventions.current() is None


def test_a_thread_with_a_writing_hook_leaves_another_threads_numbers_unchanged(tiny):
    concurrent(tiny, TINY_SENTENCE, {"encoder.0.resid_post": lambda n, x: x * 0.5,
                                     "decoder.1.self.z": lambda n, z: z * 0})


# ---- Hugging Face -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_head_mask_equals_a_hook_zeroing_the_heads_z_hf(hf, name):
    tr = hf[name]
    heads = {("encoder_self", 1, 0), ("decoder_self", 0, 2), ("cross", 1, 1), ("cross", 0, 3)}
    for kwargs in ({}, {"beam_size": 2}, {"target": "Ein Mann fährt Fahrrad."}):
        masked = tr.translate(SENTENCE, head_mask=heads, max_len=12, **kwargs)
        hooked = tr.translate(SENTENCE, hooks=zero_heads(heads), max_len=12, **kwargs)
        same_run(hooked, masked)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_reading_hook_sees_every_point_hf(hf, name):
    tr = hf[name]
    seen = set()
    plain = tr.translate(SENTENCE, max_len=8)
    out = tr.translate(SENTENCE, max_len=8, beam_size=2,
                       hooks={p: (lambda n, x: seen.add(n)) for p in tr.engine.hook_points()})
    assert seen == set(tr.engine.hook_points())
    assert out.output_ids == tr.translate(SENTENCE, max_len=8, beam_size=2).output_ids
    assert plain.output_ids == tr.translate(SENTENCE, max_len=8, hooks={"decoder.0.resid_post": lambda n, x: x}).output_ids


def test_a_thread_with_a_writing_hook_leaves_another_threads_numbers_unchanged_hf(hf):
    concurrent(hf["marian"], SENTENCE, {"encoder.1.resid_post": lambda n, x: x * 0.5,
                                        "decoder.0.cross.z": lambda n, z: z * 0})
