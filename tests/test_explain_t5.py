"""translate(explain=True) for T5: RMSNorm, relative position bias, unscaled scores, no biases,
relu or gated-gelu feed-forward. Tiny models (random weights, saved, loaded back), one like T5
(relu, decoder output scaled by d_model^-0.5) and one like T5 v1.1 (gated-gelu, no output scale,
heads × d_kv unequal to d_model, random RMSNorm gains)."""
import numpy as np
import pytest
import torch

from test_explain import SENTENCE, _check_rows
from transformer import Translator
from transformer.explain.alti import decompose, linearise_norm
from transformer.capture import capture
from transformer.explain.explanation import Explanation
from transformer.explain.model_view import model_view

NAMES = ("t5", "t5_v11")


@pytest.fixture(scope="module")
def t5(hf_dirs, tmp_path_factory):
    from hf_tiny import randomise_biases, t5_v11
    folder = hf_dirs["t5"]                                   # shared: t5_v11 writes into a copy
    v11 = t5_v11(folder, tmp_path_factory.mktemp("t5_explain") / "v11")
    folders = {"t5": folder, "t5_v11": randomise_biases(v11)}
    loaded = {name: Translator.load(f, device="cpu", source_lang="en", target_lang="de") for name, f in folders.items()}
    c = loaded["t5_v11"].config
    assert c.n_heads * c.d_head != c.d_model and loaded["t5_v11"].engine.model.config.is_gated_act
    return loaded


def _sublayers(model):
    """(kind, layer, T5Layer*Attention, its T5Attention) in forward order."""
    rows = [("encoder_self", i, b.layer[0], b.layer[0].SelfAttention) for i, b in enumerate(model.encoder.block)]
    for i, b in enumerate(model.decoder.block):
        rows += [("decoder_self", i, b.layer[0], b.layer[0].SelfAttention),
                 ("cross", i, b.layer[1], b.layer[1].EncDecAttention)]
    return rows


@torch.no_grad()
def _real_pass(tr, source_ids, fed_ids):
    """One forced pass of the HF model: per sublayer the attention's query / key-value input,
    its output, the sublayer's output (residual included) and the weights it computed."""
    seen, handles = {}, []
    for kind, layer, sub, att in _sublayers(tr.engine.model):
        def on_att(m, args, kwargs, output, key=(kind, layer)):
            q = kwargs.get("hidden_states", args[0] if args else None)
            kv = kwargs.get("key_value_states")
            seen[key] = dict(kv=(q if kv is None else kv)[0], attention_out=output[0][0])

        def on_sub(m, args, output, key=(kind, layer)):
            seen[key]["y"] = output[0][0]
        handles += [att.register_forward_hook(on_att, with_kwargs=True), sub.register_forward_hook(on_sub)]
    src, fed = torch.tensor([source_ids]), torch.tensor([fed_ids])
    try:
        with capture() as recorder:
            tr.engine.model(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=fed)
    finally:
        for h in handles:
            h.remove()
    for key in seen:
        seen[key]["alpha"] = recorder.records[key][0][0]                               # (H, Tq, Tk)
    return seen


@pytest.mark.parametrize("name", NAMES)
def test_norm_vectors_and_parts_sum_to_each_sublayer_output(t5, name):
    """f_h(x_j) = W_O^h W_V^h x_j from the real pass: Σ_h Σ_j α_hij f_h(x_j) is the attention's
    output (T5 has no biases), the explanation's norms are ‖α_hij f_h(x_j)‖, and the ALTI parts
    rebuild each sublayer's output, residual included."""
    tr = t5[name]
    out = tr.translate(SENTENCE, max_len=10, explain=True)
    ex, fed = out.explanation, tr.engine.tokenizer.piece_ids(out.target_tokens)
    real = _real_pass(tr, out.source_ids, fed)
    parts = decompose(model_view(tr), torch.tensor([out.source_ids]), torch.tensor([fed]), keep_blocks=True)
    assert [(b.kind, b.layer) for b in parts.blocks] == list(real)
    H = tr.config.n_heads
    with torch.no_grad():
        for (kind, layer, _, att), block in zip(_sublayers(tr.engine.model), parts.blocks):
            r = real[(kind, layer)]
            v = att.v(r["kv"]).view(-1, H, att.key_value_proj_dim).transpose(0, 1)          # (H, Tk, dh)
            f = torch.einsum("hkd,ehd->hke", v, att.o.weight.view(-1, H, att.key_value_proj_dim))   # (H, Tk, D)
            total = torch.einsum("hij,hjd->id", r["alpha"], f)
            assert (total - r["attention_out"]).abs().max().item() <= 1e-5, (kind, layer)
            norms = (r["alpha"] * f.norm(dim=-1)[:, None, :]).numpy()
            np.testing.assert_allclose(ex.get_norm(kind)[layer], norms, atol=1e-4, rtol=1e-4)
            assert (block.parts.sum(1) + block.bias - r["y"]).abs().max().item() <= 1e-5, (kind, layer)
            assert block.bias.abs().max().item() == 0                                        # nothing unowned
            layer_score = torch.einsum("hij,hjd->ijd", r["alpha"], f).norm(dim=-1)
            if kind == "cross":
                np.testing.assert_allclose(ex.norm_cross_layer[layer], layer_score.numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_contributions_rows_ablation_and_logits(t5, name):
    tr = t5[name]
    for options in (dict(), dict(beam_size=2), dict(head_mask={("cross", 1, 2), ("encoder_self", 0, 1)})):
        out = tr.translate(SENTENCE, max_len=10, explain=True, **options)
        ex = out.explanation
        assert isinstance(ex, Explanation) and ex.logits_check <= 1e-4, (options, ex.logits_check)
        _check_rows(ex, len(out.output_tokens))
        for kind, layer, head in options.get("head_mask", ()):
            assert (ex.get_norm(kind)[layer, head] == 0).all()
    c = tr.config
    heads = {("cross", l, h) for l in range(c.n_decoder_layers) for h in range(c.n_heads)}
    ex = tr.translate(SENTENCE, max_len=10, explain=True, head_mask=heads).explanation
    assert ex.source_share.max() == 0 and ex.source_contribution.max() == 0
    np.testing.assert_allclose(ex.prefix_contribution.sum(1), 1.0, atol=1e-5)
    assert (ex.norm_cross == 0).all() and ex.saliency_source_share.max() <= 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_saliency_equals_one_backward_per_step_through_the_model(t5, name):
    """Gradients through HF's own T5 forward, taken at the two embedding lookups (encoder first,
    then decoder)."""
    tr = t5[name]
    out = tr.translate(SENTENCE, max_len=8, explain=True)
    ex, fed = out.explanation, tr.engine.tokenizer.piece_ids(out.target_tokens)
    src = torch.tensor([out.source_ids])
    for t in (0, len(fed) - 1):
        looked_up = []

        def keep(module, args, output):
            output.retain_grad()
            looked_up.append(output)
        lookups = {id(m): m for m in (tr.engine.model.encoder.embed_tokens, tr.engine.model.decoder.embed_tokens)}
        handles = [m.register_forward_hook(keep) for m in lookups.values()]
        try:
            logits = tr.engine.model(input_ids=src, attention_mask=torch.ones_like(src),
                              decoder_input_ids=torch.tensor([fed])).logits[0]
            torch.log_softmax(logits[t], -1)[out.output_ids[t]].backward()
        finally:
            for h in handles:
                h.remove()
            tr.engine.model.zero_grad(set_to_none=True)
        s, p = ((e.grad[0] * e[0]).abs().sum(-1).detach() for e in looked_up)
        np.testing.assert_allclose(ex.saliency_source[t], (s / s.sum()).numpy(), atol=1e-5)
        np.testing.assert_allclose(ex.saliency_prefix[t], (p / p.sum()).numpy(), atol=1e-5)


def test_a_norm_made_linear_rebuilds_its_output():
    """linearise_norm: parts and bias through a post-LN norm with its scale fixed sum to the norm
    of their sum, for LayerNorm (centring, β) and for T5's RMSNorm (scale only)."""
    from transformers.models.t5.modeling_t5 import T5LayerNorm
    torch.manual_seed(0)
    parts, bias = torch.randn(5, 7, 16), torch.randn(5, 16)
    z = parts.sum(1) + bias
    layer_norm, rms = torch.nn.LayerNorm(16), T5LayerNorm(16)
    with torch.no_grad():
        for p in (layer_norm.weight, layer_norm.bias, rms.weight):
            p.normal_(mean=0.5, std=0.5)
        for norm in (layer_norm, rms):
            linear_parts, linear_bias = linearise_norm(norm, z, parts, bias)
            assert (linear_parts.sum(1) + linear_bias - norm(z)).abs().max().item() <= 1e-5, type(norm)
        _, rms_bias = linearise_norm(rms, z, parts, torch.zeros(5, 16))
        assert rms_bias.abs().max().item() == 0                     # RMSNorm adds nothing of its own
