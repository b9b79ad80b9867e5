"""translate(explain=True): norm-based attention, ALTI+ and saliency are faithful to the run."""
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from transformer import Translator
from transformer.explain.alti import decompose
from transformer.config import ModelConfig
from transformer.explain.explanation import Explanation, method_scores
from transformer.explain.model_view import model_view
from transformer.explain.faithfulness import (average_ranks, perturbation_summary, perturbation_test,
                                      rank_correlations, spearman)
from transformer.model import BOS_ID, MultiHeadAttention, Transformer

SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."
KINDS = ("encoder_self", "decoder_self", "cross")


@pytest.fixture(scope="module")
def post_ln(en_de):
    """A small untrained post-LN model with non-zero biases everywhere (exactness needs no training)."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=en_de.config.vocab_size, d_model=32, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=64, dropout=0.0, norm_first=False)
    model = Transformer(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".norm." in name:
                p.add_(torch.randn_like(p) * 0.1)
    return Translator(model, en_de.engine.tokenizer, device=en_de.device)


def _explained(tr, **kwargs):
    out = tr.translate(SENTENCE, explain=True, **kwargs)
    assert isinstance(out.explanation, Explanation)
    return out, out.explanation


def test_shapes_dtypes_and_default_off(en_de, monkeypatch):
    out, ex = _explained(en_de)
    c = en_de.config
    S, T, H = len(out.source_tokens), len(out.output_tokens), c.n_heads
    shapes = dict(norm_encoder_self=(c.n_encoder_layers, H, S, S), norm_decoder_self=(c.n_decoder_layers, H, T, T),
                  norm_cross=(c.n_decoder_layers, H, T, S), source_share=(T,), source_contribution=(T, S),
                  prefix_contribution=(T, T), saliency_source=(T, S), saliency_prefix=(T, T))
    for name, shape in shapes.items():
        value = getattr(ex, name)
        assert value.shape == shape and value.dtype == np.float32, name
    assert ex.logits_check <= 1e-4              # the re-run is the run: same logits
    # explain=False computes nothing: the decomposition is never called
    import transformer.explain.alti as alti
    monkeypatch.setattr(alti, "decompose", lambda *a, **k: pytest.fail("explain=False must not explain"))
    assert en_de.translate(SENTENCE).explanation is None


def _attention_io(tr, **kwargs):
    """Run translate(explain=True) with hooks on every attention module: its key/value input and
    output, per call (cached decoding calls the decoder's modules once per step)."""
    calls = {}

    def keep(module, args, output):
        calls.setdefault(module, []).append((args[1].detach().clone(), output.detach().clone()))

    modules = [m for m in tr.engine.model.modules() if isinstance(m, MultiHeadAttention)]
    handles = [m.register_forward_hook(keep) for m in modules]
    try:
        out = tr.translate(SENTENCE, explain=True, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return out, {m: calls[m] for m in modules}


@torch.no_grad()
def test_norm_vectors_sum_to_each_attention_output_of_the_real_run(en_de):
    """f_h(x_j) = W_O^h (W_V^h x_j + b_V^h) from the values the real (cached) run fed each module:
    Σ_h Σ_j α_hij f_h(x_j) + out_proj bias equals that module's output, and the explanation's
    norms are ‖α_hij f_h(x_j)‖ of exactly these vectors."""
    out, calls = _attention_io(en_de)
    ex, H, D = out.explanation, en_de.config.n_heads, en_de.config.d_model
    for module, records in calls.items():
        layer, kind = module.hook.layer, module.kind
        if kind == "decoder_self":           # one step per call: the values grow by one each step
            kv, produced = torch.cat([r[0] for r in records], 1)[0], torch.cat([r[1] for r in records], 1)[0]
        elif kind == "cross":
            kv, produced = records[0][0][0], torch.cat([r[1] for r in records], 1)[0]
        else:
            kv, produced = records[0][0][0], records[0][1][0]
        v = module.v_proj(kv).view(-1, H, D // H).transpose(0, 1)                      # (H, Tk, dh)
        f = torch.einsum("hkd,ehd->hke", v, module.out_proj.weight.view(D, H, -1))     # (H, Tk, D)
        alpha = torch.from_numpy(out.attention.get(kind)[layer]).to(f.device)          # (H, Tq, Tk)
        total = torch.einsum("hij,hjd->id", alpha, f) + module.out_proj.bias
        assert (total - produced).abs().max().item() <= 1e-5, (kind, layer)
        norms = alpha * f.norm(dim=-1)[:, None, :]
        np.testing.assert_allclose(ex.get_norm(kind)[layer], norms.cpu().numpy(), atol=1e-4, rtol=1e-4)
        if kind == "cross":                   # Kobayashi et al.'s layer-level score: heads summed first
            layer_score = torch.einsum("hij,hjd->ijd", alpha, f).norm(dim=-1)
            np.testing.assert_allclose(ex.norm_cross_layer[layer], layer_score.cpu().numpy(), atol=1e-4, rtol=1e-4)


def _block_outputs(tr, source_ids, fed_ids):
    """The real model's attention sublayer outputs (residual and norm included) in one forced pass."""
    outputs = []
    blocks = []
    for layer in tr.engine.model.encoder_layers:
        blocks.append(layer.attention_block)
    for layer in tr.engine.model.decoder_layers:
        blocks += [layer.self_attention_block, layer.cross_attention_block]
    handles = [b.register_forward_hook(lambda m, a, o: outputs.append(o[0].detach().clone())) for b in blocks]
    try:
        with torch.no_grad():
            tr.engine.model(torch.tensor([source_ids], device=tr.device), None, torch.tensor([fed_ids], device=tr.device))
    finally:
        for h in handles:
            h.remove()
    return outputs


@pytest.mark.parametrize("which", ["pre_ln", "post_ln"])
def test_alti_parts_sum_to_each_block_output_of_the_model(which, en_de, post_ln):
    tr = en_de if which == "pre_ln" else post_ln
    out = tr.translate(SENTENCE, max_len=12)
    fed = [BOS_ID] + out.output_ids[:-1]
    real = _block_outputs(tr, out.source_ids, fed)
    parts = decompose(model_view(tr), torch.tensor([out.source_ids], device=tr.device), torch.tensor([fed], device=tr.device),
                      keep_blocks=True)
    assert len(parts.blocks) == len(real)
    S = len(out.source_ids)
    for block, y in zip(parts.blocks, real):
        total = block.parts.sum(1) + block.bias
        assert (total - y).abs().max().item() <= 1e-4, (which, block.kind, block.layer)
        assert block.parts.shape[1] == (S + 1 if block.kind == "cross" else y.shape[0])
    ex = tr.translate(SENTENCE, max_len=12, explain=True).explanation
    _check_rows(ex, len(out.output_ids))


def _check_rows(ex, T):
    rows = ex.source_contribution.sum(1) + ex.prefix_contribution.sum(1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-5)
    assert (ex.source_contribution >= 0).all() and (ex.prefix_contribution >= 0).all()
    np.testing.assert_allclose(ex.source_share, ex.source_contribution.sum(1), atol=1e-6)
    upper = ~np.tril(np.ones((T, T), dtype=bool))
    assert (ex.prefix_contribution[upper] == 0).all()
    assert (ex.saliency_prefix[upper] == 0).all()
    assert (ex.norm_decoder_self[..., upper] == 0).all()
    for sal in (ex.saliency_source, ex.saliency_prefix):
        np.testing.assert_allclose(sal.sum(1), 1.0, atol=1e-5)
        assert (sal >= 0).all()
    np.testing.assert_allclose(ex.encoder_contribution.sum(1), 1.0, atol=1e-5)


@pytest.mark.parametrize("options", [dict(), dict(beam_size=3), dict(target="Ein Mann fährt Fahrrad."),
                                     dict(head_mask={("cross", 0, 1), ("decoder_self", 2, 3)})])
def test_explanation_describes_the_run(en_de, options):
    out, ex = _explained(en_de, **options)
    T, S = len(out.output_tokens), len(out.source_tokens)
    assert ex.source_contribution.shape == (T, S) and ex.norm_cross.shape[2:] == out.attention.cross.shape[2:]
    assert ex.logits_check <= 1e-4               # recomputed logits equal the run's (forced, beam, ablated)
    _check_rows(ex, T)
    for kind, _, head in options.get("head_mask", ()):
        layer = next(l for k, l, h in options["head_mask"] if k == kind and h == head)
        assert (ex.get_norm(kind)[layer, head] == 0).all()     # an ablated head moves nothing


def test_every_cross_head_off_leaves_no_source_share(en_de):
    c = en_de.config
    heads = {("cross", l, h) for l in range(c.n_decoder_layers) for h in range(c.n_heads)}
    out, ex = _explained(en_de, head_mask=heads)
    assert ex.source_share.max() <= 1e-6 and ex.source_contribution.max() <= 1e-6
    np.testing.assert_allclose(ex.prefix_contribution.sum(1), 1.0, atol=1e-5)
    assert (ex.norm_cross == 0).all()
    assert ex.saliency_source_share.max() <= 1e-6      # no gradient reaches the source at all


def test_saliency_equals_one_backward_per_step_through_the_model(en_de):
    """Independent of alti.run: gradients through the model's own forward, taken at the
    embedding lookups (tied embeddings: the encoder's call comes first, then the decoder's)."""
    out, ex = _explained(en_de, max_len=10)
    fed = [BOS_ID] + out.output_ids[:-1]
    for t in (0, len(fed) // 2, len(fed) - 1):
        looked_up = []

        def keep(module, args, output):
            output.retain_grad()
            looked_up.append(output)

        handle = en_de.engine.model.source_embedding.register_forward_hook(keep)
        try:
            logits = en_de.engine.model(torch.tensor([out.source_ids], device=en_de.device), None,
                                         torch.tensor([fed], device=en_de.device))[0]
            torch.log_softmax(logits[t], -1)[out.output_ids[t]].backward()
        finally:
            handle.remove()
            en_de.engine.model.zero_grad(set_to_none=True)
        src, tgt = ((e.grad[0] * e[0]).abs().sum(-1).detach() for e in looked_up)   # scale cancels
        np.testing.assert_allclose(ex.saliency_source[t], (src / src.sum()).cpu().numpy(), atol=1e-5)
        np.testing.assert_allclose(ex.saliency_prefix[t], (tgt / tgt.sum()).cpu().numpy(), atol=1e-5)
        share = float(src.sum() / (src.sum() + tgt.sum()))
        assert abs(ex.saliency_source_share[t] - share) <= 1e-5


def test_threads_get_their_own_explanations(en_de):
    sentences = ["A dog runs.", "Two girls play in the park.", SENTENCE]
    reference = {s: en_de.translate(s, explain=True).explanation for s in sentences}
    barrier = threading.Barrier(len(sentences))

    def run(sentence):
        barrier.wait()
        return sentence, en_de.translate(sentence, explain=True).explanation

    with ThreadPoolExecutor(max_workers=len(sentences)) as pool:
        for sentence, ex in pool.map(run, sentences):
            # Threads running at once split torch's reductions differently, so the last bits may
            # differ (norms up to ~10 moved by 5e-6 in one CI run); a trace mixed up between calls
            # would differ in shape or by whole units. Hence a relative tolerance, not bit equality.
            for name in ("source_contribution", "norm_cross", "saliency_source"):
                ours, alone = getattr(ex, name), getattr(reference[sentence], name)
                assert ours.shape == alone.shape, name
                np.testing.assert_allclose(ours, alone, rtol=1e-4, atol=1e-5)


def test_method_scores_norm_is_kobayashi_layer_level_score(en_de):
    """method_scores()["norm"]: ‖Σ_h α_hij f_h(x_j)‖ per layer (Kobayashi et al.), mean over layers,
    rows to 1; not the sum of single heads' norms, which ignores that heads cancel."""
    out, ex = _explained(en_de, max_len=10)
    score = ex.norm_cross_layer.mean(axis=0)
    np.testing.assert_allclose(method_scores(out)["norm"], score / score.sum(1, keepdims=True), atol=1e-6)
    head_sum = ex.norm_cross.sum(axis=1)                                              # (Ld, T, S)
    assert (ex.norm_cross_layer <= head_sum + 1e-4).all()                             # triangle inequality
    assert (head_sum - ex.norm_cross_layer).max() > 1e-2                              # and they differ here


def test_perturbation_and_rank_correlation(en_de):
    out, ex = _explained(en_de, max_len=8)
    frame = perturbation_test(en_de, out)
    T, S = len(out.output_ids), len(out.source_ids)
    assert set(frame.method) == {"attention", "norm", "alti+", "saliency", "random"}
    assert len(frame) == 5 * T * 2
    probs = [s.prob for s in out.steps]
    np.testing.assert_allclose(frame.p_before, [probs[t] for t in frame.step], atol=1e-5)
    assert all(S - 1 not in d and len(d) == k for d, k in zip(frame.dropped, frame.k))   # </s> stays
    np.testing.assert_allclose(frame["drop"], frame.p_before - frame.p_after)
    top = frame[(frame.method == "alti+") & (frame.k == 1)]
    assert [d[0] for d in top.dropped] == [int(np.argmax(ex.source_contribution[t, :-1])) for t in top.step]
    summary = perturbation_summary(frame)
    assert {"mean_drop", "flip_rate"} <= set(summary.columns) and len(summary) == 10
    scores = method_scores(out)
    for name, value in scores.items():
        assert value.shape == (T, S)
        np.testing.assert_allclose(value.sum(1), 1.0, atol=1e-5)
    rc = rank_correlations(scores, positions=range(S - 1))
    assert len(rc) == T * 6 and rc.spearman.between(-1, 1).all()
    np.testing.assert_array_equal(average_ranks([10, 20, 20, 30]), [1, 2.5, 2.5, 4])
    assert spearman([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_an_unknown_family_is_refused_with_a_clear_message():
    from transformer.hf.view import model_view as hf_view
    with pytest.raises(ValueError, match="gpt2.*supported: .*t5"):
        hf_view(SimpleNamespace(config=SimpleNamespace(model_type="gpt2")))


# ---- Hugging Face: BART-like families (Marian post-LN, NLLB pre-LN), tiny models built here -------
@pytest.fixture(scope="module")
def hf_tiny(hf_dirs):
    return {name: hf_dirs.load(name) for name in ("marian", "nllb")}


@pytest.mark.parametrize("name", ["marian", "nllb"])
def test_hugging_face_explanations(hf_tiny, name):
    tr = hf_tiny[name]
    out, ex = _explained(tr, max_len=12)
    assert ex.logits_check <= 1e-4
    _check_rows(ex, len(out.output_tokens))
    c = tr.config
    heads = {("cross", l, h) for l in range(c.n_decoder_layers) for h in range(c.n_heads)}
    assert tr.translate(SENTENCE, max_len=12, explain=True, head_mask=heads).explanation.source_share.max() <= 1e-6


def test_marian_parts_sum_to_its_post_ln_block_outputs(hf_tiny):
    """Marian is post-LN: each attention block ends in its own LayerNorm module, whose output
    the per-token parts plus the bias must rebuild."""
    tr = hf_tiny["marian"]
    out = tr.translate(SENTENCE, max_len=12)
    fed = tr.engine.tokenizer.piece_ids(out.target_tokens)
    enc, dec = tr.engine.model.get_encoder(), tr.engine.model.get_decoder()
    norms = [l.self_attn_layer_norm for l in enc.layers]
    for layer in dec.layers:
        norms += [layer.self_attn_layer_norm, layer.encoder_attn_layer_norm]
    real = []
    handles = [n.register_forward_hook(lambda m, a, o: real.append(o[0].detach().clone())) for n in norms]
    try:
        with torch.no_grad():
            tr.engine.model(input_ids=torch.tensor([out.source_ids], device=tr.device),
                            decoder_input_ids=torch.tensor([fed], device=tr.device))
    finally:
        for h in handles:
            h.remove()
    parts = decompose(model_view(tr), torch.tensor([out.source_ids], device=tr.device), torch.tensor([fed], device=tr.device),
                      keep_blocks=True)
    assert len(parts.blocks) == len(real)
    for block, y in zip(parts.blocks, real):
        assert (block.parts.sum(1) + block.bias - y).abs().max().item() <= 1e-4, (block.kind, block.layer)
