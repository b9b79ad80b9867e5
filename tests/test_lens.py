"""The logit lens and DecoderLens (issue 33; api.md "Logit lens and DecoderLens"), for ours and every
Hugging Face family: the last site is the model's own output distribution, every site reads the
residual stream the model carried (HF: output_hidden_states), encoder_layer = last is the plain
translation, lens=False computes nothing, and the lens follows beam, forced, prefix and head_mask."""
import numpy as np
import pytest
import torch

from transformer.capture import Recorder
from transformer.hf import arch

FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]
NAMES = ["ours"] + FAMILIES
HF_TEXT, OURS_TEXT = "A man is riding a bike.", "red dog runs big tree"


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


@pytest.fixture
def model(request, tiny, hf):
    name = request.param
    return (tiny, OURS_TEXT) if name == "ours" else (hf[name], HF_TEXT)


def assert_last_site_is_the_output(out, k: int):
    """The last site (the last layer's feed-forward output through the model's head) is the very
    distribution the steps were read from: chosen prob, top-k pieces and probabilities, to 1e-5."""
    lens = out.lens
    np.testing.assert_allclose(lens.chosen_prob[:, -1], [s.prob for s in out.steps], atol=1e-5, rtol=0)
    for t, step in enumerate(out.steps):
        assert len(lens.top_k[t][-1]) == k
        np.testing.assert_allclose([p for _, p in lens.top_k[t][-1]], [p for _, p in step.top_k], atol=1e-5, rtol=0)
        top = [piece for piece, _ in step.top_k]
        assert [piece for piece, _ in lens.top_k[t][-1]] == top
        assert lens.chosen_rank[t, -1] == (top.index(step.token) if step.token in top else lens.chosen_rank[t, -1])
        assert step.token in top or lens.chosen_rank[t, -1] >= k


@pytest.mark.parametrize("model", NAMES, indirect=True)
def test_contract_and_the_last_site_is_the_models_own_distribution(model):
    tr, text = model
    out = tr.translate(text, lens=True, top_k=4)
    lens, L, T = out.lens, tr.config.n_decoder_layers, len(out.output_ids)
    assert lens.sites == [f"L{i}.{s}" for i in range(L) for s in ("self", "cross", "ffn")]
    assert lens.points[-1] == f"decoder.{L - 1}.resid_post" and lens.n_layers == L
    assert lens.chosen_prob.shape == lens.chosen_rank.shape == (T, 3 * L)
    assert lens.chosen_prob.dtype == np.float32 and lens.chosen_rank.dtype == np.int32
    assert lens.top_ids.shape == lens.top_probs.shape == (T, 3 * L, 4) and lens.grid(lens.top_ids).shape == (T, L, 3, 4)
    assert len(lens.top_k) == T and all(len(row) == 3 * L for row in lens.top_k)
    assert ((lens.chosen_rank == 0) == (lens.top_ids[..., 0] == np.array(out.output_ids)[:, None])).all()
    assert (lens.chosen_prob <= lens.top_probs[..., 0] + 1e-7).all()
    assert out.attention is not None and tr.translate(text, lens=True, capture=False).attention is None
    none = tr.translate(text, lens=True, top_k=0).lens
    assert none.top_k[0] == [[]] * (3 * L) and none.top_ids.shape == (T, 3 * L, 0)
    np.testing.assert_array_equal(none.chosen_rank, lens.chosen_rank)
    assert_last_site_is_the_output(out, 4)


@pytest.mark.parametrize("name", FAMILIES)
def test_each_layer_reads_what_output_hidden_states_carries(hf, name):
    """L{i}.ffn is layer i's output: hidden_states[i + 1] through the model's head (arch.read_out); for
    the last layer transformers gives the normed stream (pre-LN families), so compare its logits."""
    tr = hf[name]
    out = tr.translate(HF_TEXT, lens=True, beam_size=1)
    source = torch.tensor([out.source_ids], device=tr.device)
    fed = torch.tensor([[tr.engine.start_id] + out.output_ids[:-1]], device=tr.device)
    with torch.no_grad():
        ref = tr.engine.model(input_ids=source, decoder_input_ids=fed, output_hidden_states=True)
        L = tr.config.n_decoder_layers
        chosen = torch.tensor(out.output_ids, device=tr.device)[:, None]
        for i in range(L):
            logits = ref.logits[0] if i == L - 1 else arch.read_out(tr.engine.model, ref.decoder_hidden_states[i + 1][0])
            p = torch.softmax(logits, -1).gather(1, chosen)[:, 0].cpu().numpy()
            np.testing.assert_allclose(out.lens.chosen_prob[:, 3 * i + 2], p, atol=1e-5, rtol=0)


@pytest.mark.parametrize("model", NAMES, indirect=True)
def test_encoder_layer_last_is_the_plain_translation(model):
    tr, text = model
    last = tr.config.n_encoder_layers - 1
    for kwargs in ({}, {"beam_size": 3}):
        plain, lensed = tr.translate(text, **kwargs), tr.translate(text, encoder_layer=last, **kwargs)
        assert lensed.output_ids == plain.output_ids and lensed.encoder_layer == last and plain.encoder_layer is None
        assert [s.prob for s in lensed.steps] == pytest.approx([s.prob for s in plain.steps], abs=1e-6)
    assert tr.translate_batch([text], encoder_layer=last) == [tr.translate(text).text]
    for bad in (-1, last + 1, 1.0, "0", True):
        with pytest.raises(ValueError):
            tr.translate(text, encoder_layer=bad)
    with pytest.raises(ValueError, match="whole model"):
        tr.translate(text, encoder_layer=0, explain=True)


@pytest.mark.parametrize("model", NAMES, indirect=True)
def test_an_earlier_encoder_layer_is_read_through_the_final_encoder_norm(model):
    """encoder_layer=0 feeds the decoder norm(layer 0's output): the same probabilities as the model run
    on that memory by hand (ours: model.encode's pieces; HF: hidden_states[1] and arch.normed)."""
    tr, text = model
    out = tr.translate(text, encoder_layer=0, target=tr.translate(text).output_tokens)
    source = torch.tensor([out.source_ids], device=tr.device)
    fed = torch.tensor([[tr.engine.start_id] + out.output_ids[:-1]], device=tr.device)
    with torch.no_grad():
        if tr.engine.family != "ours":
            encoder = tr.engine.model.get_encoder()
            hidden = encoder(input_ids=source, output_hidden_states=True).hidden_states[1]
            from transformers.modeling_outputs import BaseModelOutput
            memory = BaseModelOutput(last_hidden_state=arch.normed(encoder, hidden))
            logits = tr.engine.model(encoder_outputs=memory, decoder_input_ids=fed).logits[0]
        else:
            m = tr.engine.model
            x = m.encoder_layers[0](m._embed(source, m.source_embedding), None)
            logits = m.decode(fed, m.encoder_norm(x), None)[0]
    probs = torch.softmax(logits, -1).gather(1, torch.tensor(out.output_ids, device=tr.device)[:, None])[:, 0].cpu().numpy()
    np.testing.assert_allclose([s.prob for s in out.steps], probs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("model", ["ours", "marian", "t5"], indirect=True)
def test_lens_false_computes_nothing(model, monkeypatch):
    tr, text = model
    stored, read = [], []
    original_record, original_read = Recorder.record_residual, type(tr.engine).read_out
    monkeypatch.setattr(Recorder, "record_residual", lambda self, n, x: (stored.append(n), original_record(self, n, x)))
    monkeypatch.setattr(type(tr.engine), "read_out", lambda self, h: (read.append(1), original_read(self, h))[1])
    for kwargs in ({}, {"beam_size": 2}, {"target": text}, {"capture": False}, {"explain": True}):
        assert tr.translate(text, **kwargs).lens is None
    assert stored == [] and read == []
    assert tr.translate(text, lens=True).lens is not None and stored and read


@pytest.mark.parametrize("model", NAMES, indirect=True)
def test_lens_with_beam_forced_prefix_and_head_mask(model):
    tr, text = model
    plain = tr.translate(text)
    head_mask = {("cross", 0, 1), ("decoder_self", tr.config.n_decoder_layers - 1, 0)}
    forced = list(reversed(plain.output_tokens[:-1])) + plain.output_tokens[-1:]     # not what it would say
    runs = {"beam": dict(beam_size=3), "forced": dict(target=forced),
            "prefix": dict(prefix=plain.output_tokens[:1]), "head_mask": dict(head_mask=head_mask),
            "beam+prefix+mask": dict(beam_size=2, prefix=plain.output_tokens[:1], head_mask=head_mask)}
    for what, kwargs in runs.items():
        out = tr.translate(text, lens=True, top_k=3, **kwargs)
        assert out.lens.chosen_prob.shape[0] == len(out.output_ids), what
        assert_last_site_is_the_output(out, 3)
    masked = tr.translate(text, lens=True, head_mask=head_mask, target=plain.output_tokens)
    unmasked = tr.translate(text, lens=True, target=plain.output_tokens)
    assert not np.allclose(masked.lens.chosen_prob, unmasked.lens.chosen_prob)   # the ablation reaches the lens
