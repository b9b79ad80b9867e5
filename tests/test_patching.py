"""Activation patching (issue 53, docs/api.md "Activation patching"): the result describes the two
forced runs; copying the last encoder layer everywhere restores exactly 1 and copying nothing 0;
batching changes nothing; and for Hugging Face families every number equals one computed apart,
with plain PyTorch forward hooks on the transformers modules."""
import math

import numpy as np
import pytest
import torch

from transformer.interventions import z_name
from transformer.patching import PatchRun, encoder_runs, head_runs

CLEAN, CORRUPT = "A man is riding a bike.", "A man is riding a horse."
TINY_CLEAN, TINY_CORRUPT = "red dog runs big tree", "red cat runs big tree"
# per family, a pair whose runs differ clearly at the tiny models' level of training; the next ones are
# for tiny models built without the Multi30k data (hf_tiny's generated sentences), whose pieces differ
HF_PAIRS = {"marian": ("Two women are sitting on a bench.", "Two men are sitting on a bench."),
            "m2m100": (CLEAN, CORRUPT), "nllb": (CLEAN, CORRUPT), "mbart50": (CLEAN, CORRUPT),
            "bart": ("Two dogs play in the snow.", "Two dogs play in the water."), "t5": (CLEAN, CORRUPT)}
MORE_PAIRS = [("A dog runs in the snow.", "A cat runs in the snow."), (TINY_CLEAN, TINY_CORRUPT),
              ("old man sits by the river", "old girl sits by the river"), ("big red ball", "big blue ball")]


def same_length_pair(tr, name):
    """The family's pair, or the first of MORE_PAIRS, whose sources have as many pieces."""
    for clean, corrupt in [HF_PAIRS[name]] + MORE_PAIRS:
        if len(tr.encode_source(clean)[0]) == len(tr.encode_source(corrupt)[0]):
            return clean, corrupt
    raise AssertionError(f"{name}: no same-length pair")


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in HF_PAIRS}


def forced_logits(tr, source_ids, fed_ids):
    with torch.no_grad():
        return tr.engine.teacher_forced(torch.tensor([source_ids], device=tr.device), None,
                                        torch.tensor([fed_ids], device=tr.device))[0]   # (T, V)


def full_copies(tr):
    """Runs that make the corrupt run the clean one: each residual point copied everywhere (a decoder
    point with the encoder's output, which cross-attention reads), and every z at once."""
    runs = []
    for point in tr.engine.hook_points():
        if not point.endswith(".z"):
            runs.append([(point, None, None)] + ([] if point.startswith("encoder.") else [("encoder.final_norm", None, None)]))
    runs.append([(p, None, None) for p in tr.engine.hook_points() if p.endswith(".z")])
    return runs


# ---- ours ----------------------------------------------------------------------------------------------
def test_the_result_describes_both_forced_runs(en_de):
    res = en_de.patch(clean=CLEAN, corrupt=CORRUPT)
    clean = en_de.translate(CLEAN, capture=False)
    assert res.output_tokens == clean.output_tokens and res.fed_ids == [en_de.engine.start_id] + clean.output_ids[:-1]
    assert res.clean_source_ids == clean.source_ids == en_de.encode_source(CLEAN)[0]
    assert res.corrupt_source_ids == en_de.encode_source(CORRUPT)[0]
    clean_logits = forced_logits(en_de, res.clean_source_ids, res.fed_ids)
    corrupt_logits = forced_logits(en_de, res.corrupt_source_ids, res.fed_ids)
    choices = corrupt_logits.argmax(-1).tolist()
    step = next(t for t, i in enumerate(clean.output_ids) if choices[t] != i)
    assert (res.step, res.clean_piece_id, res.corrupt_piece_id) == (step, clean.output_ids[step], choices[step])
    for logits, value in ((clean_logits, res.clean_value), (corrupt_logits, res.corrupt_value)):
        assert value == pytest.approx(float(logits[step, res.clean_piece_id] - logits[step, res.corrupt_piece_id]), abs=1e-4)
    assert res.corrupt_value < 0 < res.clean_value
    c, S = en_de.config, len(res.clean_source_ids)
    assert res.encoder.shape == (c.n_encoder_layers, S)
    assert {k: v.shape for k, v in res.heads.items()} == {
        "encoder_self": (c.n_encoder_layers, c.n_heads), "decoder_self": (c.n_decoder_layers, c.n_heads),
        "cross": (c.n_decoder_layers, c.n_heads)}
    # "fährt" against "reitet": after layer 0, the edited piece and the verb it tells apart carry it
    bike, riding = (res.clean_source_ids.index(en_de.engine.tokenizer.piece_ids([p])[0]) for p in ("▁bike", "▁riding"))
    assert set(np.argsort(res.encoder[0])[-2:].tolist()) == {bike, riding}
    assert np.isfinite(res.encoder).all() and all(np.isfinite(v).all() for v in res.heads.values())


@pytest.mark.parametrize("model", ["en_de", "tiny"])
def test_the_last_encoder_layer_everywhere_restores_one_and_nothing_restores_zero(model, request):
    tr = request.getfixturevalue(model)
    clean, corrupt = (CLEAN, CORRUPT) if model == "en_de" else (TINY_CLEAN, TINY_CORRUPT)
    run = PatchRun(tr, clean, corrupt)
    last = f"encoder.{tr.config.n_encoder_layers - 1}.resid_post"
    np.testing.assert_allclose(run.restored([[(last, None, None)], []]), [1.0, 0.0], atol=1e-4)
    np.testing.assert_allclose(run.restored(full_copies(tr)), 1.0, atol=1e-4)


def test_batched_runs_equal_one_run_at_a_time_in_a_few_passes(en_de, monkeypatch):
    run = PatchRun(en_de, CLEAN, CORRUPT)
    runs = encoder_runs(en_de, len(run.corrupt_ids)) + [r for k in ("encoder_self", "decoder_self", "cross")
                                                          for r in head_runs(en_de, k)]
    passes = []
    forward = en_de.engine.teacher_forced
    monkeypatch.setattr(en_de.engine, "teacher_forced", lambda *a, **k: passes.append(a[0].shape[0]) or forward(*a, **k))
    batched = run.restored(runs)
    assert sum(passes) == len(runs) and len(passes) <= math.ceil(len(runs) / 40)
    passes.clear()
    one_by_one = run.restored(runs, budget=1)
    assert passes == [1] * len(runs)
    np.testing.assert_allclose(batched, one_by_one, atol=1e-4)
    res = en_de.patch(clean=CLEAN, corrupt=CORRUPT)
    np.testing.assert_allclose(res.encoder.ravel(), batched[: res.encoder.size], atol=1e-6)


def test_step_rules(tiny, en_de):
    res = tiny.patch(clean=TINY_CLEAN, corrupt=TINY_CORRUPT)
    output = res.output_ids
    corrupt_logits = forced_logits(tiny, res.corrupt_source_ids, res.fed_ids)
    for k in range(len(output)):
        at = tiny.patch(clean=TINY_CLEAN, corrupt=TINY_CORRUPT, step=k)
        top2 = corrupt_logits[k].topk(2).indices.tolist()
        assert at.step == k and at.corrupt_piece_id == (top2[1] if top2[0] == output[k] else top2[0])
    with pytest.raises(ValueError, match="step"):
        tiny.patch(clean=TINY_CLEAN, corrupt=TINY_CORRUPT, step=len(output))
    with pytest.raises(ValueError, match="same pieces"):
        tiny.patch(clean=TINY_CLEAN, corrupt=TINY_CLEAN + "  ")
    # a corrupt source translated the same way: the step of the largest change of m, against its runner-up
    same = en_de.patch(clean=CLEAN, corrupt="A man is riding a bicycle.")
    output = same.output_ids
    clean_logits = forced_logits(en_de, same.clean_source_ids, same.fed_ids)
    corrupt_logits = forced_logits(en_de, same.corrupt_source_ids, same.fed_ids)
    assert corrupt_logits.argmax(-1).tolist() == output
    runner_up = corrupt_logits.topk(2, dim=-1).indices[:, 1]
    rows = torch.arange(len(output), device=corrupt_logits.device)
    change = ((clean_logits[rows, output] - clean_logits[rows, runner_up])
              - (corrupt_logits[rows, output] - corrupt_logits[rows, runner_up])).abs()
    assert (same.step, same.corrupt_piece_id) == (int(change.argmax()), int(runner_up[change.argmax()]))
    assert same.clean_value > 0 and same.corrupt_value > 0    # both runs prefer the clean piece there


def test_sources_of_different_lengths_patch_heads_only(tiny):
    res = tiny.patch(clean=TINY_CLEAN, corrupt="red cat runs big tree green")
    assert len(res.clean_source_ids) != len(res.corrupt_source_ids)
    assert res.encoder is None and res.heads["encoder_self"] is None
    assert res.heads["cross"].shape == (2, 4) and res.heads["decoder_self"].shape == (2, 4)
    with pytest.raises(ValueError, match="piece count"):
        PatchRun(tiny, TINY_CLEAN, "red cat runs big tree green").restored([[("encoder.0.resid_post", 0, None)]])


def test_copies_are_checked_and_decoder_positions_after_the_step_change_nothing(tiny):
    run = PatchRun(tiny, TINY_CLEAN, TINY_CORRUPT)
    late = len(run.fed_ids) - 1
    assert run.step < late
    np.testing.assert_allclose(run.restored([[("decoder.1.resid_post", late, None)], [("decoder.1.cross.z", late, 0)]]),
                               0.0, atol=1e-6)
    for copy, message in ((("encoder.0.resid_post", len(run.corrupt_ids), None), "out of range"),
                          (("decoder.0.cross.z", None, tiny.config.n_heads), "out of range"),
                          (("decoder.0.resid_post", 0, 1), "only a z point"), (("decoder.7.resid_post", 0, None), "unknown")):
        with pytest.raises(ValueError, match=message):
            run.restored([[copy]])


# ---- Hugging Face: the same numbers from plain forward hooks -----------------------------------------------
def modules(model):
    """(encoder layers, {kind: [output projection per layer]}) found directly on the transformers model."""
    enc, dec = model.get_encoder(), model.get_decoder()
    if model.config.model_type == "t5":
        return list(enc.block), {"encoder_self": [b.layer[0].SelfAttention.o for b in enc.block],
                                 "decoder_self": [b.layer[0].SelfAttention.o for b in dec.block],
                                 "cross": [b.layer[1].EncDecAttention.o for b in dec.block]}
    return list(enc.layers), {"encoder_self": [x.self_attn.out_proj for x in enc.layers],
                              "decoder_self": [x.self_attn.out_proj for x in dec.layers],
                              "cross": [x.encoder_attn.out_proj for x in dec.layers]}


def reference(tr, res):
    """Clean and corrupt m, and m of every patched run, one plain forward pass each."""
    model = tr.engine.model
    layers, projections = modules(model)
    H = tr.config.n_heads

    def run(source_ids, hooks=()):
        handles = [module.register_forward_hook(fn) if kind == "post" else module.register_forward_pre_hook(fn)
                   for kind, module, fn in hooks]
        try:
            with torch.no_grad():
                src = torch.tensor([source_ids], device=tr.device)
                logits = model(input_ids=src, attention_mask=torch.ones_like(src),
                               decoder_input_ids=torch.tensor([res.fed_ids], device=tr.device), use_cache=False).logits[0]
        finally:
            for h in handles:
                h.remove()
        return logits[res.step, res.clean_piece_id] - logits[res.step, res.corrupt_piece_id], logits

    first = lambda o: o[0] if isinstance(o, tuple) else o                      # noqa: E731
    clean_layers, clean_z = {}, {}
    keep = [("post", m, lambda mod, a, o, i=i: clean_layers.__setitem__(i, first(o).clone())) for i, m in enumerate(layers)]
    keep += [("pre", m, lambda mod, a, key=(k, i): clean_z.__setitem__(key, a[0].clone()))
             for k, ms in projections.items() for i, m in enumerate(ms)]
    clean_m, clean_logits = run(res.clean_source_ids, keep)
    corrupt_m, corrupt_logits = run(res.corrupt_source_ids)

    def put_position(i, position):
        def hook(mod, a, o):
            x = first(o).clone()
            x[:, position] = clean_layers[i][:, position]
            return (x,) + tuple(o[1:]) if isinstance(o, tuple) else x
        return hook

    def put_head(key, head):
        def hook(mod, a):
            x = a[0].clone().unflatten(-1, (H, -1))                              # (B, T, H, dh)
            x[:, :, head] = clean_z[key].unflatten(-1, (H, -1))[:, :, head]
            return (x.flatten(-2),) + tuple(a[1:])
        return hook

    encoder = np.array([[float(run(res.corrupt_source_ids, [("post", m, put_position(i, p))])[0])
                         for p in range(len(res.corrupt_source_ids))] for i, m in enumerate(layers)])
    heads = {k: np.array([[float(run(res.corrupt_source_ids, [("pre", m, put_head((k, i), h))])[0]) for h in range(H)]
                          for i, m in enumerate(ms)]) for k, ms in projections.items()}
    return float(clean_m), float(corrupt_m), (clean_logits, corrupt_logits), encoder, heads


def reference_step(clean, corrupt, output):
    """api.md's rule, written out: the first step where the corrupt run prefers another piece; else
    the step where m against the corrupt run's runner-up changes most."""
    for t, piece in enumerate(output):
        ranked = corrupt[t].argsort(descending=True).tolist()
        if ranked[0] != piece:
            return t, ranked[0]
    best = max(range(len(output)), key=lambda t: abs(
        float(clean[t, output[t]] - clean[t, corrupt[t].argsort(descending=True)[1]])
        - float(corrupt[t, output[t]] - corrupt[t, corrupt[t].argsort(descending=True)[1]])))
    return best, int(corrupt[best].argsort(descending=True)[1])


@pytest.mark.parametrize("name", list(HF_PAIRS))
def test_hf_patching_equals_plain_forward_hooks(hf, name):
    tr = hf[name]
    res = tr.patch(*same_length_pair(tr, name))
    clean_m, corrupt_m, (clean_logits, corrupt_logits), encoder, heads = reference(tr, res)
    assert (res.step, res.corrupt_piece_id) == reference_step(clean_logits, corrupt_logits, res.output_ids)
    assert res.clean_value == pytest.approx(clean_m, abs=1e-5) and res.corrupt_value == pytest.approx(corrupt_m, abs=1e-5)
    span = res.clean_value - res.corrupt_value
    atol = 1e-5                                                                  # logits (batched vs one pass)
    assert np.ptp(np.concatenate([encoder.ravel()] + [h.ravel() for h in heads.values()])) > 2 * atol
    value = lambda restored: res.corrupt_value + restored * span               # noqa: E731  back to m, in logits
    np.testing.assert_allclose(value(res.encoder), encoder, atol=atol, rtol=0)
    for kind, expected in heads.items():
        np.testing.assert_allclose(value(res.heads[kind]), expected, atol=atol, rtol=0, err_msg=kind)


@pytest.mark.parametrize("name", list(HF_PAIRS))
def test_hf_full_copies_give_the_clean_run_and_no_copy_the_corrupt_one(hf, name):
    """Every point written everywhere carries the clean run (pre-LN mid points included)."""
    tr = hf[name]
    run = PatchRun(tr, *same_length_pair(tr, name))
    last = f"encoder.{tr.config.n_encoder_layers - 1}.resid_post"
    np.testing.assert_allclose(run.values([[(last, None, None)], []]), [run.clean_value, run.corrupt_value], atol=1e-5)
    np.testing.assert_allclose(run.values(full_copies(tr)), run.clean_value, atol=1e-5)
    assert z_name("cross", 1) in tr.engine.hook_points()
