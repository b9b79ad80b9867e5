"""Greedy, beam, forced decoding, batches, max_len and head ablation."""
import math

import numpy as np
import pytest
import torch

from conftest import random_sentences, reverse
from transformer.decoding import forced_logits, length_normalizer

SENTENCES = random_sentences(6, seed=21, min_len=2, max_len=9)


def test_beam_size_one_equals_greedy(tiny):
    for sentence in SENTENCES:
        greedy = tiny.translate(sentence, beam_size=1)
        beam = tiny.translate(sentence, beam_size=1, length_penalty=1.0)
        assert beam.output_tokens == greedy.output_tokens
    from transformer.decoding import beam_search, greedy_decode
    source = torch.tensor([tiny.encode_source(SENTENCES[0])[0]], device=tiny.device)
    tokens, _ = greedy_decode(tiny.engine.model, source, source != 0, 20)
    result = beam_search(tiny.engine.model, source, source != 0, 1, 20)[0]
    assert result.output_ids == tokens[0].tolist()


def test_beam_search_record_and_scores(tiny):
    sentence = SENTENCES[1]
    alpha = 0.6
    out = tiny.translate(sentence, beam_size=4, length_penalty=alpha)
    assert out.beam is not None and len(out.beam) >= len(out.output_tokens)
    for t, hypotheses in enumerate(out.beam):
        alive = [h for h in hypotheses if not h.finished]
        assert len(alive) == 4
        for h in hypotheses:
            assert len(h.pieces) == t + 1
            if t == 0:
                assert h.parent is None
            else:
                assert 0 <= h.parent < 4 and not out.beam[t - 1][h.parent].finished
                assert out.beam[t - 1][h.parent].pieces == h.pieces[:-1]
            assert h.finished == (h.pieces[-1] == "</s>")
    step, index = out.beam_final
    final = out.beam[step][index]
    assert final.pieces == out.output_tokens
    # the score is sum log p / ((5 + len) / 6) ** alpha, recomputed from a forced pass
    source = torch.tensor([out.source_ids], device=tiny.device)
    logp = torch.log_softmax(forced_logits(tiny.engine.model, source, source != 0, out.output_ids), -1)
    total = sum(logp[t, i].item() for t, i in enumerate(out.output_ids))
    assert final.score == pytest.approx(total / length_normalizer(len(out.output_ids), alpha), abs=1e-4)
    assert final.score == pytest.approx(total / ((5 + len(out.output_ids)) / 6) ** alpha, abs=1e-4)
    # steps and attention describe the returned hypothesis
    assert [s.token for s in out.steps] == out.output_tokens
    assert out.attention.cross.shape[2] == len(out.output_tokens)
    for t, s in enumerate(out.steps):
        assert s.prob == pytest.approx(math.exp(logp[t, out.output_ids[t]].item()), abs=1e-5)
    assert tiny.translate(sentence).beam is None


def test_translate_batch_matches_translate(tiny):
    sentences = SENTENCES + ["red", "big old tree jumps over the river small cat"]
    for beam in (1, 3):
        batch = tiny.translate_batch(sentences, beam_size=beam, batch_size=4)
        single = [tiny.translate(s, beam_size=beam, capture=False).text for s in sentences]
        assert batch == single


def test_max_len_caps_output_and_is_checked(tiny):
    out = tiny.translate("red blue green dog cat man", max_len=3)
    assert len(out.output_tokens) == 3 and out.output_tokens[-1] != "</s>"
    assert out.attention.cross.shape[2] == 3
    with pytest.raises(ValueError, match="max_target_len"):
        tiny.translate("red", max_len=tiny.config.max_target_len + 1)
    with pytest.raises(ValueError):
        tiny.translate("red", beam_size=0)


def test_forced_decoding(tiny):
    source = "red dog runs"
    target = "dog runs red blue"
    out = tiny.translate(source, target=target, top_k=4)
    assert out.output_tokens == tiny.engine.tokenizer.encode_pieces(target) + ["</s>"]
    assert out.target_tokens == ["<s>"] + out.output_tokens[:-1]
    assert out.forced
    source = torch.tensor([out.source_ids], device=tiny.device)
    logits = forced_logits(tiny.engine.model, source, source != 0, out.output_ids)
    probs = torch.softmax(logits, -1)
    for t, step in enumerate(out.steps):
        assert step.prob == pytest.approx(probs[t, out.output_ids[t]].item(), abs=1e-6)
        assert step.top_k[0][1] == pytest.approx(probs[t].max().item(), abs=1e-6)
    # the model prefers "red" where the forced target says "blue"
    assert out.steps[3].top_k[0][0] != "▁blue" or out.steps[3].prob > 0.5
    with pytest.raises(ValueError):
        tiny.translate(source, target="   ")


def test_forced_pieces_align_two_runs(tiny):
    """A list of pieces is fed exactly: forcing a greedy output reproduces its steps and attention."""
    source = "small girl jumps river"
    greedy = tiny.translate(source, top_k=3)
    forced = tiny.translate(source, target=list(greedy.output_tokens), top_k=3)
    assert forced.output_tokens == greedy.output_tokens and forced.forced
    assert [s.prob for s in forced.steps] == pytest.approx([s.prob for s in greedy.steps], abs=1e-5)
    for kind in ("encoder_self", "decoder_self", "cross"):
        np.testing.assert_allclose(getattr(forced.attention, kind), getattr(greedy.attention, kind), atol=1e-5)
    # an unfinished prefix stays unfinished: no </s> is appended to a piece list
    prefix = tiny.translate(source, target=greedy.output_tokens[:2])
    assert prefix.output_tokens == greedy.output_tokens[:2]
    with pytest.raises(ValueError, match="not a piece"):
        tiny.translate(source, target=["▁no-such-piece-here"])
    with pytest.raises(ValueError):
        tiny.translate(source, target=[])


def all_cross_heads(tiny):
    return {("cross", layer, head) for layer in range(tiny.config.n_decoder_layers)
            for head in range(tiny.config.n_heads)}


def test_switching_off_every_cross_head_makes_the_source_irrelevant(tiny):
    mask = all_cross_heads(tiny)
    a = tiny.translate("red dog runs", target="x", head_mask=mask, top_k=10)
    b = tiny.translate("small girl jumps river old", target="x", head_mask=mask, top_k=10)
    assert [p for _, p in a.steps[0].top_k] == pytest.approx([p for _, p in b.steps[0].top_k], abs=1e-6)
    assert [w for w, _ in a.steps[0].top_k] == [w for w, _ in b.steps[0].top_k]
    normal_a = tiny.translate("red dog runs", target="x", top_k=10)
    normal_b = tiny.translate("small girl jumps river old", target="x", top_k=10)
    assert normal_a.steps[0].top_k[0] != normal_b.steps[0].top_k[0]
    # ablated heads' weights are shown as computed, not zeroed
    np.testing.assert_allclose(a.attention.cross.sum(-1), 1.0, atol=1e-5)


def test_empty_head_mask_changes_nothing(tiny):
    base = tiny.translate(SENTENCES[2])
    for empty in (set(), [], None):
        same = tiny.translate(SENTENCES[2], head_mask=empty)
        assert same.output_tokens == base.output_tokens
        assert np.array_equal(same.attention.cross, base.attention.cross)
    assert tiny.translate_batch([SENTENCES[2]], head_mask=set()) == [base.text]


def test_single_head_ablation_changes_the_layer_output(tiny):
    sentence = SENTENCES[3]
    base = tiny.translate(sentence, target=reverse(sentence))
    ablated = tiny.translate(sentence, target=reverse(sentence), head_mask={("encoder_self", 0, 1)})
    assert any(abs(a.prob - b.prob) > 1e-6 for a, b in zip(base.steps, ablated.steps))
    batch = tiny.translate_batch([sentence], head_mask={("cross", 0, 0), ("cross", 1, 0)})
    assert batch == [tiny.translate(sentence, head_mask={("cross", 0, 0), ("cross", 1, 0)}).text]


@pytest.mark.parametrize("bad", [
    {("attn", 0, 0)}, {("cross", 5, 0)}, {("cross", 0, 4)}, {("encoder_self", -1, 0)}, {("cross", 0)}])
def test_bad_head_mask_raises(tiny, bad):
    with pytest.raises(ValueError):
        tiny.translate("red dog", head_mask=bad)


def test_kv_cache_grows_by_one_and_cross_keys_are_computed_once(tiny):
    calls = {"cross": [], "decoder_self": []}
    handles = []
    for layer in tiny.engine.model.decoder_layers:
        for module in (layer.cross_attention, layer.self_attention):
            handles.append(module.k_proj.register_forward_hook(
                lambda m, args, out, kind=module.kind: calls[kind].append(args[0].shape[1])))
    try:
        out = tiny.translate("red dog runs big", capture=False)
    finally:
        for h in handles:
            h.remove()
    T, S, L = len(out.output_tokens), len(out.source_tokens), tiny.config.n_decoder_layers
    assert calls["cross"] == [S] * L                   # once per layer, over the whole source
    assert calls["decoder_self"] == [1] * (T * L)      # one new key per layer per step
