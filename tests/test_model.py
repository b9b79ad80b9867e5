"""Model parts: positional encoding, embeddings, attention paths, sublayers, masks, config."""
import math

import numpy as np

import pytest
import torch

from transformer.capture import capture, install_hook_points
from transformer.config import ModelConfig
from transformer.masks import causal_mask, decoder_mask, padding_mask
from transformer.model import MultiHeadAttention, Sublayer, Transformer, sinusoidal_table


def test_sinusoidal_table_matches_paper_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / (10000 ** (2 * i / 16))
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def small_model(**overrides):
    cfg = dict(vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=3, d_ff=64,
               dropout=0.0)
    cfg.update(overrides)
    torch.manual_seed(0)
    return Transformer(ModelConfig(**cfg)).eval()


def test_embedding_is_scaled_by_sqrt_d_model_before_pe():
    model = small_model()
    tokens = torch.tensor([[5, 6, 7]])
    expected = model.source_embedding(tokens) * math.sqrt(32)
    assert torch.allclose(model.scaled_embedding(tokens, model.source_embedding), expected)
    embedded = model._embed(tokens, model.source_embedding)        # dropout 0 in eval
    assert torch.allclose(embedded, expected + model.positional_encoding[:3])


def batch_inputs():
    source = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    target = torch.tensor([[2, 11, 12, 13], [2, 14, 0, 0]])
    return source, source != 0, target, target != 0


@pytest.mark.parametrize("norm_first", [True, False])
def test_fused_and_explicit_attention_paths_agree(norm_first):
    model = small_model(norm_first=norm_first)
    source, source_keep, target, target_keep = batch_inputs()
    with torch.no_grad():
        fused = model(source, source_keep, target, target_keep)
        with capture() as recorder:
            explicit = model(source, source_keep, target, target_keep)
    assert recorder.records, "capture path did not run"
    assert (fused - explicit).abs().max().item() <= 1e-5


def test_training_on_cpu_takes_the_explicit_path_with_the_fused_numbers(monkeypatch):
    """CPU training skips the fused kernel (faster there: bench_core's training row) and records
    nothing; with dropout 0 its logits and gradients are the fused path's."""
    import transformer.model as model_module
    fused_calls = []
    sdpa = model_module.F.scaled_dot_product_attention
    monkeypatch.setattr(model_module.F, "scaled_dot_product_attention",
                        lambda *a, **k: fused_calls.append(1) or sdpa(*a, **k))
    source, source_keep, target, target_keep = batch_inputs()
    runs = {}
    for mode in ("eval", "train"):
        model = small_model()
        getattr(model, mode)()
        fused_calls.clear()
        logits = model(source, source_keep, target, target_keep)
        logits.square().sum().backward()
        runs[mode] = logits.detach(), model.encoder_layers[0].self_attention.q_proj.weight.grad, len(fused_calls)
    from transformer.capture import is_capturing
    assert not is_capturing()
    assert runs["eval"][2] == 2 + 2 * 3 and runs["train"][2] == 0      # 2 encoder, 3 x 2 decoder attentions
    assert (runs["train"][0] - runs["eval"][0]).abs().max().item() <= 1e-5
    assert torch.allclose(runs["train"][1], runs["eval"][1], atol=1e-5)


def test_sublayer_pre_and_post_ln_formulas():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 8)
    fn = torch.nn.Linear(8, 8)
    pre, post = Sublayer(8, 0.0, True).eval(), Sublayer(8, 0.0, False).eval()
    assert torch.allclose(pre(x, fn), x + fn(pre.norm(x)))
    assert torch.allclose(post(x, fn), post.norm(x + fn(x)))


def test_post_ln_model_has_no_final_norm_and_normalised_layer_outputs():
    post = small_model(norm_first=False)
    pre = small_model(norm_first=True)
    assert isinstance(post.encoder_norm, torch.nn.Identity)
    assert isinstance(pre.encoder_norm, torch.nn.LayerNorm)
    source, source_keep, _, _ = batch_inputs()
    memory = post.encode(source, source_keep)
    # post-LN: every layer ends in LayerNorm (weight 1, bias 0 at init)
    assert memory.mean(-1).abs().max().item() < 1e-4
    assert (memory.std(-1, unbiased=False) - 1).abs().max().item() < 1e-3


def test_tied_and_untied_embeddings():
    tied, untied = small_model(tie_embeddings=True), small_model(tie_embeddings=False)
    assert tied.output_projection.weight is tied.source_embedding.weight
    assert tied.target_embedding is tied.source_embedding
    assert untied.output_projection.weight is not untied.source_embedding.weight
    assert untied.target_embedding is not untied.source_embedding


def test_head_and_layer_counts_follow_config():
    model = small_model(n_heads=2, n_encoder_layers=1, n_decoder_layers=4, d_model=16)
    assert len(model.encoder_layers) == 1 and len(model.decoder_layers) == 4
    source, source_keep, target, target_keep = batch_inputs()
    with torch.no_grad(), capture() as recorder:
        model(source, source_keep, target, target_keep)
    assert sorted(k for k in recorder.records if k[0] == "cross") == [("cross", i) for i in range(4)]
    assert recorder.records[("encoder_self", 0)][0].shape == (2, 2, 5, 5)


def test_attention_module_masks_exactly_zero():
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4, 0.0, "encoder_self", 0).eval()
    assert install_hook_points(attention) == 2          # the weights and the heads' z
    x = torch.randn(1, 4, 16)
    mask = torch.tensor([True, True, False, True])[None, None, None, :]
    with torch.no_grad(), capture() as recorder:
        attention(x, x, mask)
    weights = recorder.records[("encoder_self", 0)][0]
    assert (weights[..., 2] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(1, 4, 4))


def test_mask_functions():
    pad = padding_mask([3, 1], 4)
    assert pad.dtype == bool and pad.tolist() == [[True, True, True, False], [True, False, False, False]]
    causal = causal_mask(3)
    assert causal.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    combined = decoder_mask([2], 3)[0]
    assert combined.tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    with pytest.raises(ValueError):
        padding_mask([5], 4)


def test_config_round_trip_and_validation(tmp_path):
    cfg = ModelConfig(vocab_size=123, d_model=64, n_heads=8, norm_first=False)
    cfg.save(tmp_path / "config.json")
    again = ModelConfig.load(tmp_path / "config.json")
    assert again == cfg
    for field in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "vocab_size",
                  "max_source_len", "max_target_len", "norm_first"):
        assert hasattr(again, field)
    assert cfg.max_source_len >= 128 and cfg.max_target_len >= 128
    with pytest.raises(ValueError):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="unknown config fields"):
        ModelConfig.from_dict({"d_model": 32, "bogus": 1})


def test_positional_table_spans_many_positions_and_is_what_translate_added():
    from transformer import Translator
    from conftest import REPO
    tr = Translator.load(REPO / "pretrained" / "en-de", device="cpu")
    table = tr.positional_table(64)
    out = tr.translate("A man is riding a bike.", capture=True)
    np.testing.assert_array_equal(table[: len(out.positional_encoding)], out.positional_encoding)
    d = tr.config.d_model
    position, i = 37, 5                                            # sin(pos / 10000^(2i/d)) at even dims
    assert table[position, 2 * i] == pytest.approx(np.sin(position / 10000 ** (2 * i / d)), abs=1e-5)
    assert tr.positional_table(10 ** 6).shape[0] == tr.config.max_source_len
