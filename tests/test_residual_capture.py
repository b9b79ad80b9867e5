"""Named residual-stream capture points (issue 32, item 2; capture.py's docstring names them), for ours
and every Hugging Face family: each point is the stream the model really carried there (ours: a
manual recomputation; HF: output_hidden_states and a recomputation of the sublayer in between),
cached decoding records what one teacher-forced pass does, capture stays opt-in and per call."""
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from transformer.capture import Recorder, capture, is_capturing, residual_names
from transformer.config import ModelConfig
from transformer.model import HookPoint, Transformer

FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]
SENTENCES = ["A man is riding a bike.", "Two dogs play in the snow.", "A girl in a red dress."]
TINY_SENTENCE = "red dog runs big tree"


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


def random_model(norm_first: bool) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=3,
                                   d_ff=64, dropout=0.0, norm_first=norm_first)).eval()


def forced_residuals(tr, text: str, output_ids=None) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Every residual point of one teacher-forced pass (B = 1) over tr's own greedy output."""
    source_ids = tr.encode_source(text)[0]
    output_ids = output_ids or tr.translate(text, capture=False).output_ids
    source = torch.tensor([source_ids], device=tr.device)
    fed = torch.tensor([[tr.engine.start_id] + output_ids[:-1]], device=tr.device)
    with torch.no_grad(), capture(residual=True) as recorder:
        tr.engine.teacher_forced(source, None, fed)
    return {name: recorder.residual_stream(name) for name in recorder.residuals}, source, fed


# ---- ours: a manual recomputation ---------------------------------------------------------------
def manual_residuals(model: Transformer, source, fed) -> dict:
    """The stream at every point, from the modules' own weights and the paper's formulas."""
    def sub(block, x, fn):                                   # pre-LN x + f(LN(x)); post-LN LN(x + f(x))
        return x + fn(block.norm(x)) if block.norm_first else block.norm(x + fn(x))

    out, x = {}, model._embed(source, model.source_embedding)
    for i, layer in enumerate(model.encoder_layers):
        out[f"encoder.{i}.resid_pre"] = x
        x = out[f"encoder.{i}.resid_mid_self"] = sub(layer.attention_block, x, lambda h: layer.self_attention(h, h))
        x = out[f"encoder.{i}.resid_post"] = sub(layer.feed_forward_block, x, layer.feed_forward)
    memory = out["encoder.final_norm"] = model.encoder_norm(x)
    T = fed.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=fed.device).tril()[None, None]
    x = model._embed(fed, model.target_embedding)
    for i, layer in enumerate(model.decoder_layers):
        out[f"decoder.{i}.resid_pre"] = x
        x = sub(layer.self_attention_block, x, lambda h: layer.self_attention(h, h, causal))
        out[f"decoder.{i}.resid_mid_self"] = x
        x = sub(layer.cross_attention_block, x, lambda h: layer.cross_attention(h, memory))
        out[f"decoder.{i}.resid_mid_cross"] = x
        x = out[f"decoder.{i}.resid_post"] = sub(layer.feed_forward_block, x, layer.feed_forward)
    out["decoder.final_norm"] = model.decoder_norm(x)
    return out


@pytest.mark.parametrize("which", ["tiny", "pre-LN", "post-LN"])
def test_ours_every_point_equals_a_manual_recomputation(tiny, which):
    model = tiny.engine.model if which == "tiny" else random_model(which == "pre-LN")
    on = next(model.parameters()).device                  # tiny's is ATLAS_TEST_DEVICE, the random ones the CPU
    source, fed = torch.tensor([[5, 6, 7, 8, 3]], device=on), torch.tensor([[2, 11, 12, 13]], device=on)
    with torch.no_grad(), capture(residual=True) as recorder:
        logits = model(source, None, fed)
        expected = manual_residuals(model, source, fed)
    c = model.config
    assert sorted(recorder.residuals) == sorted(residual_names(c.n_encoder_layers, c.n_decoder_layers))
    assert all(len(rows) == 1 for rows in recorder.residuals.values())    # the manual pass recorded nothing
    for name, x in expected.items():
        torch.testing.assert_close(recorder.residual_stream(name), x, atol=1e-5, rtol=0, msg=name)
    torch.testing.assert_close(model.read_out(recorder.residual_stream(f"decoder.{c.n_decoder_layers - 1}.resid_post")),
                               logits, atol=1e-5, rtol=0)


def test_ours_cached_decoding_records_one_row_per_step_equal_to_the_forced_pass(tiny):
    with torch.no_grad(), capture(attention=False, residual=True) as recorder:
        out = tiny.translate(TINY_SENTENCE, capture=False)      # a capture outside the call: its own wins
    assert recorder.residuals == {}                              # translate(capture=False) records nothing
    forced, source, _ = forced_residuals(tiny, TINY_SENTENCE, out.output_ids)
    with torch.no_grad(), capture(attention=False, residual=True) as recorder:
        tokens, _ = tiny.engine.greedy(source, None, tiny.engine.plan(source, None, 1, None, None))
    assert tokens[0].tolist() == out.output_ids and recorder.records == {}
    for name, x in forced.items():
        steps = recorder.residuals[name]
        if name.startswith("decoder."):
            assert len(steps) == len(out.output_ids) and all(s.shape[1] == 1 for s in steps), name
        torch.testing.assert_close(recorder.residual_stream(name), x, atol=1e-5, rtol=0, msg=name)


# ---- Hugging Face: output_hidden_states, and the sublayer between -------------------------------------
def _recomputed_mids(tr, res: dict, memory) -> dict:
    """mid points from the next sublayer: resid_mid_cross from resid_mid_self through cross-attention,
    resid_post from the last mid point through the feed-forward (the family's own modules)."""
    family, model = tr.engine.family, tr.engine.model
    pre_ln = tr.config.norm_first
    got = {}
    for stack_name, stack in (("encoder", model.get_encoder()), ("decoder", model.get_decoder())):
        layers = stack.block if family == "t5" else stack.layers
        for i, layer in enumerate(layers):
            p = f"{stack_name}.{i}."
            last_mid = res[p + ("resid_mid_cross" if stack_name == "decoder" else "resid_mid_self")]
            if family == "t5":
                got[p + "resid_post"] = layer.layer[-1](last_mid)
                if stack_name == "decoder":
                    got[p + "resid_mid_cross"] = layer.layer[1](res[p + "resid_mid_self"], key_value_states=memory)[0]
                continue
            ffn = lambda h: layer.fc2(layer.activation_fn(layer.fc1(h)))              # noqa: E731
            got[p + "resid_post"] = (last_mid + ffn(layer.final_layer_norm(last_mid)) if pre_ln
                                     else layer.final_layer_norm(last_mid + ffn(last_mid)))
            if stack_name == "decoder":
                x, norm = res[p + "resid_mid_self"], layer.encoder_attn_layer_norm
                cross = lambda h: layer.encoder_attn(h, key_value_states=memory)[0]     # noqa: E731
                got[p + "resid_mid_cross"] = x + cross(norm(x)) if pre_ln else norm(x + cross(x))
    return got


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_points_equal_output_hidden_states_and_the_sublayers_between(hf, name):
    """hidden_states[i] is layer i's input (resid_pre) and hidden_states[i + 1] its output (resid_post),
    except the last: transformers ties it to last_hidden_state, which is after the stack's final norm
    where it has one (mBART, M2M100/NLLB, T5), i.e. our "{stack}.final_norm"; without one (Marian,
    BART) that is the last resid_post itself."""
    tr = hf[name]
    c = tr.config
    res, source, fed = forced_residuals(tr, SENTENCES[0])
    assert sorted(res) == sorted(tr.engine.residual_sites())
    with torch.no_grad():
        ref = tr.engine.model(input_ids=source, decoder_input_ids=fed, output_hidden_states=True)
    for stack, hidden, L in (("encoder", ref.encoder_hidden_states, c.n_encoder_layers),
                             ("decoder", ref.decoder_hidden_states, c.n_decoder_layers)):
        assert len(hidden) == L + 1
        for i in range(L):
            torch.testing.assert_close(res[f"{stack}.{i}.resid_pre"], hidden[i], atol=1e-5, rtol=0)
        for i in range(L - 1):
            torch.testing.assert_close(res[f"{stack}.{i}.resid_post"], hidden[i + 1], atol=1e-5, rtol=0)
        torch.testing.assert_close(res[f"{stack}.final_norm"], hidden[L], atol=1e-5, rtol=0)
        if not c.norm_first:
            torch.testing.assert_close(res[f"{stack}.{L - 1}.resid_post"], hidden[L], atol=1e-5, rtol=0)
    torch.testing.assert_close(res["encoder.final_norm"], ref.encoder_last_hidden_state, atol=1e-5, rtol=0)
    with torch.no_grad():
        recomputed = _recomputed_mids(tr, res, ref.encoder_last_hidden_state)
        logits = tr.engine.read_out(res[f"decoder.{c.n_decoder_layers - 1}.resid_post"])
    for point, x in recomputed.items():
        torch.testing.assert_close(res[point], x, atol=1e-5, rtol=0, msg=point)
    torch.testing.assert_close(logits, ref.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_cached_decoding_records_what_the_forced_pass_does(hf, name):
    tr = hf[name]
    out = tr.translate(SENTENCES[1], capture=False)
    forced, source, _ = forced_residuals(tr, SENTENCES[1], out.output_ids)
    wanted = {f"decoder.{i}.{p}" for i in range(tr.config.n_decoder_layers)
              for p in ("resid_mid_self", "resid_mid_cross", "resid_post")}
    with torch.no_grad(), capture(attention=False, residual=wanted) as recorder:
        tokens, _ = tr.engine.greedy(source, None, tr.engine.plan(source, None, 1, None, None))
    assert tokens[0, : len(out.output_ids)].tolist() == out.output_ids
    assert set(recorder.residuals) == wanted and recorder.records == {}
    for point in wanted:
        assert len(recorder.residuals[point]) == len(out.output_ids)
        torch.testing.assert_close(recorder.residual_stream(point), forced[point], atol=1e-5, rtol=0, msg=point)


# ---- opt-in, per call --------------------------------------------------------------------------
def test_off_by_default_and_only_what_is_asked(tiny, hf, monkeypatch):
    stored = []
    original = Recorder.record_residual
    monkeypatch.setattr(Recorder, "record_residual", lambda self, n, x: (stored.append(n), original(self, n, x)))
    calls = []
    points = [m for m in tiny.engine.model.modules() if isinstance(m, HookPoint) and m.name is not None]
    handles = [m.register_forward_hook(lambda m, a, o: calls.append(m.name)) for m in points]
    try:
        for tr, text in ((tiny, TINY_SENTENCE), (hf["marian"], SENTENCES[0]), (hf["t5"], SENTENCES[0])):
            tr.translate(text, capture=True)
            tr.translate(text, capture=True, beam_size=2)
            tr.translate(text, capture=False)
            source = torch.tensor([tr.encode_source(text)[0]], device=tr.device)
            fed = torch.tensor([[tr.engine.start_id]], device=tr.device)
            with torch.no_grad(), capture() as recorder:
                tr.engine.teacher_forced(source, None, fed)
            assert recorder.records and recorder.residuals == {}
        assert stored == [] and calls == []             # ours never even calls its residual HookPoints
        for tr, text in ((tiny, TINY_SENTENCE), (hf["marian"], SENTENCES[0])):
            source = torch.tensor([tr.encode_source(text)[0]], device=tr.device)
            with torch.no_grad(), capture(attention=False, residual={"decoder.0.resid_mid_cross"}) as recorder:
                tr.engine.teacher_forced(source, None, torch.tensor([[tr.engine.start_id]], device=tr.device))
                assert not is_capturing()                   # no attention asked: ours keeps the fused path
            assert list(recorder.residuals) == ["decoder.0.resid_mid_cross"] and recorder.records == {}
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("name", ["ours", "marian", "t5"])
def test_two_threads_capturing_at_once_get_their_own(tiny, hf, name):
    tr, texts = (tiny, [TINY_SENTENCE, "big cat sits old river green"]) if name == "ours" else (hf[name], SENTENCES[:2])
    serial = [forced_residuals(tr, t)[0] for t in texts]
    barrier = threading.Barrier(len(texts))

    def run(text):
        barrier.wait()                                  # start together so the calls overlap
        return [forced_residuals(tr, text)[0] for _ in range(3)]

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        results = list(pool.map(run, texts))
    for ref, runs in zip(serial, results):
        for res in runs:
            assert sorted(res) == sorted(ref)
            for point, x in ref.items():
                torch.testing.assert_close(res[point], x, atol=1e-6, rtol=0, msg=point)
    assert not is_capturing()
