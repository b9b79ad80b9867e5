"""translate(text, prefix=...): the first output pieces forced, then greedy or beam search goes on
(issue 23, item 1; api.md "What if: a forced prefix, then decoding"). Ours (the tiny reversal
model and pretrained/en-de) and every Hugging Face family (tests/hf_tiny.py, built once a session
by conftest's hf_dirs)."""
import copy
import math

import numpy as np
import pytest
import torch

from conftest import random_sentences
from hf_tiny import LANGUAGES
from transformer.capture import capture, trace_from
from transformer.decoding import forced_logits, length_normalizer

KINDS = ("encoder_self", "decoder_self", "cross")
EN = "A man in a blue shirt is riding a bike down the street."
TINY_SENTENCE = "red dog runs big tree"


@pytest.fixture(params=["tiny", "en-de"])
def ours(request, tiny, en_de):
    return (tiny, TINY_SENTENCE) if request.param == "tiny" else (en_de, EN)


def assert_same_run(a, b, atol=1e-6):
    """Same pieces, step probabilities, top-k and attention."""
    assert a.output_ids == b.output_ids and a.output_tokens == b.output_tokens
    assert [s.prob for s in a.steps] == pytest.approx([s.prob for s in b.steps], abs=atol)
    for sa, sb in zip(a.steps, b.steps):
        assert [p for p, _ in sa.top_k] == [p for p, _ in sb.top_k]
        assert [q for _, q in sa.top_k] == pytest.approx([q for _, q in sb.top_k], abs=atol)
    for kind in KINDS:
        np.testing.assert_allclose(a.attention.get(kind), b.attention.get(kind), atol=atol, rtol=0)


# ---- ours ---------------------------------------------------------------------------------------
def test_prefix_of_greedys_own_start_gives_plain_greedy(ours):
    tr, text = ours
    greedy = tr.translate(text, top_k=4)
    T = len(greedy.output_ids)
    assert greedy.prefix_length == 0 and T >= 3
    for k in sorted({1, 2, T - 1, T}):            # T: the whole output, </s> included
        out = tr.translate(text, top_k=4, prefix=greedy.output_tokens[:k])
        assert out.prefix_length == k and not out.forced
        assert_same_run(out, greedy)


def test_another_prefix_decodes_on_greedily_and_steps_carry_the_models_probabilities(en_de):
    greedy = en_de.translate(EN, top_k=5)
    second = greedy.steps[1].top_k[1][0]                 # the model's second choice at step 1
    prefix = [greedy.output_tokens[0], second]
    out = en_de.translate(EN, prefix=prefix, top_k=5)
    assert out.output_tokens[:2] == prefix and out.prefix_length == 2
    assert out.output_tokens != greedy.output_tokens and out.output_tokens[-1] == "</s>"
    # every step is what forcing the whole output gives; after the prefix each piece is the argmax
    forced = en_de.translate(EN, target=list(out.output_tokens), top_k=5)
    assert_same_run(out, forced, atol=1e-5)
    for step in out.steps[2:]:
        assert step.token == step.top_k[0][0]
    # the prefix steps carry the model's probability of the forced pieces and its own top-k
    source = torch.tensor([out.source_ids], device=en_de.device)
    probs = torch.softmax(forced_logits(en_de.engine.model, source, None, en_de.engine.tokenizer.piece_ids(prefix)), -1)
    for t in range(2):
        assert out.steps[t].prob == pytest.approx(probs[t, out.output_ids[t]].item(), abs=1e-5)
        assert out.steps[t].top_k[0][1] == pytest.approx(probs[t].max().item(), abs=1e-5)
    assert out.steps[1].prob == pytest.approx(greedy.steps[1].top_k[1][1], abs=1e-6)
    assert out.steps[1].top_k[0][0] == greedy.output_tokens[1]      # its own choice stays on top


def test_a_text_prefix_is_segmented_without_the_end_piece(en_de):
    pieces = en_de.engine.tokenizer.encode_pieces("Eine Frau")
    out = en_de.translate(EN, prefix="Eine Frau")
    assert out.prefix_length == len(pieces) and "</s>" not in pieces
    assert out.output_tokens[: len(pieces)] == pieces and out.output_tokens[-1] == "</s>"
    assert_same_run(out, en_de.translate(EN, prefix=pieces))


def test_beam_with_a_prefix(en_de):
    prefix, alpha = ["▁Eine", "▁Frau"], 0.6
    out = en_de.translate(EN, beam_size=4, prefix=prefix, length_penalty=alpha)
    P, T = len(prefix), len(out.output_ids)
    assert out.output_tokens[:P] == prefix and out.prefix_length == P and out.output_tokens[-1] == "</s>"
    # history: one hypothesis per prefix step, then the search; every hypothesis starts with the prefix
    for t, hypotheses in enumerate(out.beam):
        if t < P:
            assert len(hypotheses) == 1 and hypotheses[0].pieces == prefix[: t + 1]
            assert hypotheses[0].parent == (None if t == 0 else 0)
        else:
            assert sum(not h.finished for h in hypotheses) == 4
        for h in hypotheses:
            assert len(h.pieces) == t + 1 and h.pieces[: min(P, t + 1)] == prefix[: t + 1]
            if t > 0:
                parent = out.beam[t - 1][h.parent]
                assert not parent.finished and parent.pieces == h.pieces[:-1]
    step, index = out.beam_final
    final = out.beam[step][index]
    assert final.finished and final.pieces == out.output_tokens and step == T - 1
    # the score sums log p of the pieces after the prefix, the length penalty counts them (as generate())
    source = torch.tensor([out.source_ids], device=en_de.device)
    logp = torch.log_softmax(forced_logits(en_de.engine.model, source, None, out.output_ids), -1)
    after = sum(logp[t, out.output_ids[t]].item() for t in range(P, T))
    assert final.score == pytest.approx(after / length_normalizer(T - P, alpha), abs=1e-4)
    for t, s in enumerate(out.steps):                     # steps describe the returned hypothesis
        assert s.token == out.output_tokens[t]
        assert s.prob == pytest.approx(math.exp(logp[t, out.output_ids[t]].item()), abs=1e-5)
    # a beam of one is greedy, with a prefix too
    one = en_de.translate(EN, beam_size=1, prefix=prefix)
    from transformer.decoding import beam_search
    assert beam_search(en_de.engine.model, source, None, 1, 40, prefix=en_de.engine.tokenizer.piece_ids(prefix))[0].output_ids \
        == one.output_ids
    # a prefix that ends the sentence is the whole output, in the beam too
    ended = en_de.translate(EN, beam_size=4, prefix=prefix + ["</s>"])
    assert ended.output_tokens == prefix + ["</s>"] and ended.prefix_length == 3
    assert len(ended.beam) == 3 and ended.beam[ended.beam_final[0]][ended.beam_final[1]].finished


def off_path(tr, text):
    """The model's best first piece other than its own choice and </s>."""
    greedy = tr.translate(text, top_k=5)
    return next(p for p, _ in greedy.steps[0].top_k if p not in (greedy.output_tokens[0], "</s>"))


def test_beam_prefix_in_a_batch_row_is_what_every_hypothesis_starts_with(tiny):
    from transformer.decoding import beam_search
    source = torch.tensor([tiny.encode_source(TINY_SENTENCE)[0]], device=tiny.device)
    alt = off_path(tiny, TINY_SENTENCE)
    prefix = tiny.engine.tokenizer.piece_ids([alt])
    result = beam_search(tiny.engine.model, source, None, 3, 20, record=True, prefix=prefix)[0]
    assert result.output_ids[:1] == prefix
    assert all(h.pieces[:1] == prefix for step in result.history for h in step)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_captured_attention_is_a_teacher_forced_recomputation(tiny, beam_size):
    prefix = [off_path(tiny, TINY_SENTENCE)]
    for sentence in [TINY_SENTENCE] + random_sentences(2, seed=5):
        out = tiny.translate(sentence, prefix=prefix, beam_size=beam_size)
        assert out.output_tokens[0] == prefix[0]
        source = torch.tensor([out.source_ids], device=tiny.device)
        with torch.no_grad(), capture() as recorder:
            logits = forced_logits(tiny.engine.model, source, source != 0, out.output_ids)
        forced = trace_from(recorder, tiny.config, len(out.source_ids), len(out.output_ids))
        for kind in KINDS:
            assert out.attention.get(kind).shape == forced.get(kind).shape
            assert np.abs(forced.get(kind) - out.attention.get(kind)).max() <= 1e-5
        probs = torch.softmax(logits, -1)
        for t, step in enumerate(out.steps):
            assert abs(step.prob - probs[t, out.output_ids[t]].item()) <= 1e-5
            np.testing.assert_array_equal(step.cross_attention, out.attention.cross[:, :, t])


def test_explain_with_a_prefix_describes_the_output(en_de):
    out = en_de.translate(EN, prefix=["▁Eine", "▁Frau"], explain=True)
    ref = en_de.translate(EN, target=list(out.output_tokens), explain=True)
    S, T, c = len(out.source_ids), len(out.output_ids), en_de.config
    ex = out.explanation
    assert ex.source_contribution.shape == (T, S) and ex.prefix_contribution.shape == (T, T)
    assert ex.norm_cross.shape == (c.n_decoder_layers, c.n_heads, T, S) and ex.saliency_source.shape == (T, S)
    for name in ("source_contribution", "prefix_contribution", "norm_cross", "saliency_source"):
        np.testing.assert_allclose(getattr(ex, name), getattr(ref.explanation, name), atol=1e-4, rtol=0)
    assert en_de.translate(EN, prefix=["▁Eine"]).explanation is None


def test_head_mask_with_a_prefix(en_de):
    mask = {("cross", 0, 1), ("cross", 2, 2), ("decoder_self", 2, 0)}
    prefix = ["▁Eine", "▁Frau"]
    out = en_de.translate(EN, prefix=prefix, head_mask=mask, top_k=3)
    assert out.output_tokens[:2] == prefix
    assert_same_run(out, en_de.translate(EN, target=list(out.output_tokens), head_mask=mask, top_k=3), atol=1e-5)
    for step in out.steps[2:]:
        assert step.token == step.top_k[0][0]
    plain = en_de.translate(EN, prefix=prefix, top_k=3)
    assert abs(plain.steps[0].prob - out.steps[0].prob) > 1e-6      # the mask acts on the forced steps too


def test_prefix_errors_and_empty_prefix(en_de):
    greedy = en_de.translate(EN)
    for empty in ([], "", "   ", ()):
        out = en_de.translate(EN, prefix=empty)
        assert out.prefix_length == 0 and out.output_ids == greedy.output_ids
    with pytest.raises(ValueError, match="▁no-such-piece"):
        en_de.translate(EN, prefix=["▁Ein", "▁no-such-piece"])
    with pytest.raises(ValueError, match="</s>.*position 1"):
        en_de.translate(EN, prefix=["▁Ein", "</s>", "▁Mann"])
    with pytest.raises(ValueError, match="3 pieces, more than max_len=2"):
        en_de.translate(EN, prefix=["▁Ein", "▁Mann", "▁fährt"], max_len=2)
    with pytest.raises(ValueError, match="more than max_len"):
        en_de.translate(EN, prefix=["▁Ein"] * (en_de.config.max_target_len + 1), beam_size=3)
    with pytest.raises(ValueError, match="not both"):
        en_de.translate(EN, prefix=["▁Ein"], target="Ein Mann.")
    with pytest.raises(ValueError, match="list of pieces"):
        en_de.translate(EN, prefix=[5, 6])
    exact = en_de.translate(EN, prefix=["▁Ein", "▁Mann"], max_len=2)   # max_len pieces: just the prefix
    assert exact.output_tokens == ["▁Ein", "▁Mann"] and exact.prefix_length == 2
    beam = en_de.translate(EN, prefix=["▁Ein", "▁Mann"], max_len=2, beam_size=3)
    assert beam.output_tokens == ["▁Ein", "▁Mann"]


def default_max_len(tr, out) -> int:
    """translate()'s max_len when none is given (ours): min(max_target_len, 2 * source pieces + 16)."""
    return min(tr.config.max_target_len, 2 * len(out.source_ids) + 16)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_prefix_of_max_len_pieces_is_the_whole_translation(ours, beam_size):
    """api.md: only a prefix *longer* than max_len raises; one of exactly max_len pieces leaves no
    room, so the translation is the prefix, each step still carrying the model's probabilities."""
    tr, text = ours
    greedy = tr.translate(text)
    limit = default_max_len(tr, greedy)
    pieces = (greedy.output_tokens[:-1] * limit)[:limit]            # any pieces but </s>
    for max_len in (None, limit):
        out = tr.translate(text, prefix=pieces, beam_size=beam_size, top_k=4, max_len=max_len)
        assert out.output_tokens == pieces and out.prefix_length == limit and out.output_tokens[-1] != "</s>"
        assert len(out.steps) == limit and out.attention.cross.shape[2] == limit
    forced = tr.translate(text, target=pieces, top_k=4)
    assert_same_run(out, forced, atol=1e-5)
    explained = tr.translate(text, prefix=pieces, explain=True)      # what the app's Attribution asks for
    assert explained.explanation.source_contribution.shape == (limit, len(greedy.source_ids))
    with pytest.raises(ValueError, match=f"{limit + 1} pieces, more than max_len={limit}"):
        tr.translate(text, prefix=pieces + pieces[:1], beam_size=beam_size)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_prefix_of_max_len_minus_one_pieces_leaves_one_step(ours, beam_size):
    """One piece is left: the model's own best next piece (</s> or not), then the length limit."""
    tr, text = ours
    greedy = tr.translate(text)
    limit = default_max_len(tr, greedy)
    pieces = (greedy.output_tokens[:-1] * limit)[: limit - 1]
    out = tr.translate(text, prefix=pieces, beam_size=beam_size, top_k=4)
    assert len(out.output_tokens) == limit and out.output_tokens[:-1] == pieces
    assert out.prefix_length == limit - 1
    assert out.output_tokens[-1] == out.steps[-1].top_k[0][0]        # the argmax of the last step
    assert_same_run(out, tr.translate(text, target=list(out.output_tokens), top_k=4), atol=1e-5)


# ---- Hugging Face: every family, built once ------------------------------------------------------
FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]
SOURCES = ["A man is riding a bike.", "Two dogs play in the snow."]


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


def generate_ids(tr, text, prefix_ids, model=None, **kwargs) -> list[int]:
    """transformers' generate() from the decoder start token followed by the prefix ids; outputs
    after the start token, up to the first end token."""
    model = model or tr.engine.model
    enc = tr.engine.tokenizer.hf([tr.engine.langs.prefix + text], return_tensors="pt").to(model.device)
    start = model.generation_config.decoder_start_token_id
    fed = torch.tensor([[start] + list(prefix_ids)], device=model.device)
    ids = model.generate(**enc, decoder_input_ids=fed, do_sample=False, **tr.engine.langs.overrides,
                         **kwargs)[0, 1:].tolist()
    eos = model.generation_config.eos_token_id
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def branch(tr, text):
    """A prefix off the model's own path: greedy's pieces up to step j, then its best other choice
    that does not end the sentence."""
    greedy = tr.translate(text, top_k=5)
    j = 1 if len(greedy.output_ids) > 2 else 0            # step 0 is a forced language code for some
    other = next(p for p, _ in greedy.steps[j].top_k
                 if p not in (greedy.output_tokens[j], tr.engine.tokenizer.hf.eos_token, tr.engine.tokenizer.hf.pad_token))
    return greedy, greedy.output_tokens[:j] + [other]


def forced_pass(tr, out, **kwargs):
    source = torch.tensor([out.source_ids], device=tr.device)
    fed = torch.tensor([tr.engine.tokenizer.piece_ids(out.target_tokens)], device=tr.device)
    with torch.no_grad():
        return tr.engine.model(input_ids=source, attention_mask=torch.ones_like(source), decoder_input_ids=fed, **kwargs)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_prefix_of_greedys_own_start_gives_plain_greedy(hf, name):
    tr = hf[name]
    for text in SOURCES:
        greedy = tr.translate(text, top_k=3)
        T = len(greedy.output_ids)
        for k in sorted({1, 2, T}):
            out = tr.translate(text, top_k=3, prefix=greedy.output_tokens[:k])
            assert out.prefix_length == k
            assert_same_run(out, greedy)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_prefix_greedy_and_beam_equal_generate_from_the_same_decoder_input(hf, name):
    tr = hf[name]
    for text in SOURCES:
        greedy, prefix = branch(tr, text)
        ids = tr.engine.tokenizer.piece_ids(prefix)
        P, max_len = len(prefix), 24
        out = tr.translate(text, prefix=prefix, max_len=max_len)
        assert out.output_tokens[:P] == prefix and out.prefix_length == P
        assert out.output_ids == generate_ids(tr, text, ids, num_beams=1, max_new_tokens=max_len - P)
        assert out.output_ids != greedy.output_ids
        # the prefix steps carry the model's probabilities of the forced pieces (as forced decoding)
        forced = tr.translate(text, target=prefix, top_k=5)
        assert [s.prob for s in out.steps[:P]] == pytest.approx([s.prob for s in forced.steps], abs=1e-5)
        assert out.steps[P - 1].prob == pytest.approx(dict(greedy.steps[P - 1].top_k)[prefix[-1]], abs=1e-6)
        # beam: every hypothesis starts with the prefix; equal to generate(num_beams=4, ...) and its score
        beam = tr.translate(text, prefix=prefix, beam_size=4, max_len=max_len)
        assert beam.output_ids == generate_ids(tr, text, ids, num_beams=4, max_new_tokens=max_len - P)
        assert beam.output_tokens[:P] == prefix and beam.prefix_length == P
        for t, hypotheses in enumerate(beam.beam):
            for h in hypotheses:
                assert len(h.pieces) == t + 1 and h.pieces[: min(P, t + 1)] == prefix[: t + 1]
        step, index = beam.beam_final
        final = beam.beam[step][index]
        assert final.pieces == beam.output_tokens
        enc = tr.engine.tokenizer.hf([tr.engine.langs.prefix + text], return_tensors="pt").to(tr.device)
        fed = torch.tensor([[tr.engine.model.generation_config.decoder_start_token_id] + ids], device=tr.device)
        theirs = tr.engine.model.generate(**enc, decoder_input_ids=fed, num_beams=4, do_sample=False, output_scores=True,
                                   return_dict_in_generate=True, max_new_tokens=max_len - P, **tr.engine.langs.overrides)
        assert final.score == pytest.approx(float(theirs.sequences_scores[0]), abs=1e-4)


@pytest.mark.parametrize("name", ["marian", "m2m100", "mbart50"])
def test_hf_prefix_with_the_generation_configs_length_equals_generate(hf, name):
    """These models set max_length in their generation config: no max_len given on either side."""
    tr = hf[name]
    _, prefix = branch(tr, SOURCES[1])
    ids = tr.engine.tokenizer.piece_ids(prefix)
    assert tr.translate(SOURCES[1], prefix=prefix).output_ids == generate_ids(tr, SOURCES[1], ids, num_beams=1)
    assert tr.translate(SOURCES[1], prefix=prefix, beam_size=4).output_ids == \
        generate_ids(tr, SOURCES[1], ids, num_beams=4)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_text_prefix_is_tokenized_as_a_target_without_the_end(hf, name):
    tr = hf[name]
    text_prefix = "Ein Mann"
    with tr.engine.tokenizer.lock:
        expected = tr.engine.tokenizer.hf(text_target=text_prefix).input_ids[:-1]
    out = tr.translate(SOURCES[0], prefix=text_prefix)
    assert out.prefix_length == len(expected) and out.output_ids[: len(expected)] == expected
    assert tr.engine.tokenizer.hf.eos_token_id not in expected
    if name in LANGUAGES and name != "t5":            # the language code comes first, as in a target
        assert out.output_tokens[0] == tr.engine.tokenizer.hf.convert_ids_to_tokens(tr.engine.langs.overrides["forced_bos_token_id"])
    assert_same_run(out, tr.translate(SOURCES[0], prefix=tr.engine.tokenizer.pieces(expected)))


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_captured_weights_with_a_prefix_equal_transformers_output_attentions(hf, name):
    tr = hf[name]
    _, prefix = branch(tr, SOURCES[0])
    for out in (tr.translate(SOURCES[0], prefix=prefix), tr.translate(SOURCES[0], prefix=prefix, beam_size=3)):
        assert out.output_tokens[: len(prefix)] == prefix
        ref = forced_pass(tr, out, output_attentions=True)
        theirs = {"encoder_self": ref.encoder_attentions, "decoder_self": ref.decoder_attentions,
                  "cross": ref.cross_attentions}
        for kind in KINDS:
            np.testing.assert_allclose(out.attention.get(kind), torch.cat(theirs[kind]).cpu().numpy(), atol=1e-5, rtol=0)
        probs = torch.softmax(ref.logits[0], -1)
        assert [s.prob for s in out.steps] == pytest.approx(
            [probs[t, i].item() for t, i in enumerate(out.output_ids)], abs=1e-5)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_explain_with_a_prefix(hf, name):
    tr = hf[name]
    _, prefix = branch(tr, SOURCES[0])
    out = tr.translate(SOURCES[0], prefix=prefix, explain=True)
    S, T = len(out.source_ids), len(out.output_ids)
    ex = out.explanation
    assert ex.source_contribution.shape == (T, S) and ex.prefix_contribution.shape == (T, T)
    assert ex.norm_cross.shape == out.attention.cross.shape and ex.saliency_prefix.shape == (T, T)
    assert ex.logits_check < 1e-3
    ref = tr.translate(SOURCES[0], target=list(out.output_tokens), explain=True).explanation
    np.testing.assert_allclose(ex.source_contribution, ref.source_contribution, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_head_mask_with_a_prefix_equals_generate_on_the_ablated_model(hf, name):
    tr = hf[name]
    from transformer.hf.arch import attention_sites
    kind, layer, head = "cross", 0, 1
    model = copy.deepcopy(tr.engine.model)
    site = next(s for s in attention_sites(model) if (s.kind, s.layer) == (kind, layer))
    with torch.no_grad():
        site.out_proj.weight[:, head * site.d_head:(head + 1) * site.d_head] = 0.0
    _, prefix = branch(tr, SOURCES[1])
    ids = tr.engine.tokenizer.piece_ids(prefix)
    out = tr.translate(SOURCES[1], prefix=prefix, head_mask={(kind, layer, head)}, max_len=20)
    assert out.output_ids == generate_ids(tr, SOURCES[1], ids, model=model, num_beams=1,
                                          max_new_tokens=20 - len(ids))
    plain = tr.translate(SOURCES[1], prefix=prefix, max_len=20)
    assert any(abs(a.prob - b.prob) > 1e-6 for a, b in zip(plain.steps, out.steps))


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_prefix_errors_and_empty_prefix(hf, name):
    tr = hf[name]
    text = SOURCES[0]
    greedy = tr.translate(text)
    assert tr.translate(text, prefix=[]).output_ids == greedy.output_ids
    assert tr.translate(text, prefix="").prefix_length == 0
    eos = tr.engine.tokenizer.hf.eos_token
    first = greedy.output_tokens[0]
    with pytest.raises(ValueError, match="no-such-piece"):
        tr.translate(text, prefix=[first, "▁no-such-piece-here"])
    with pytest.raises(ValueError, match="before its end"):
        tr.translate(text, prefix=[first, eos, first])
    with pytest.raises(ValueError, match="more than max_len=2"):
        tr.translate(text, prefix=[first] * 3, max_len=2)
    with pytest.raises(ValueError, match="not both"):
        tr.translate(text, prefix=[first], target="Ein Mann.")
    ended = tr.translate(text, prefix=[first, eos], beam_size=3)        # ends the sentence: just the prefix
    assert ended.output_tokens == [first, eos] and ended.prefix_length == 2
    assert tr.translate(text, prefix=[first, eos]).output_tokens == [first, eos]


def test_diagnose_passes_through_with_a_prefix(en_de):
    out = en_de.translate(EN, prefix=["▁Eine", "▁Frau"], diagnose=True)
    assert out.prefix_length == 2 and out.diagnosis is not None
    assert out.diagnosis.hallucination.shape == (len(out.output_ids),)
    assert out.diagnosis.omission.shape == (len(out.source_ids),)
    assert en_de.translate(EN, prefix=["▁Eine"]).diagnosis is None


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("beam_size", [1, 3])
def test_hf_a_prefix_of_max_len_pieces_and_of_one_fewer(hf, name, beam_size):
    """As for ours (api.md): a prefix of exactly max_len pieces is the whole translation, each step
    with the model's own probabilities (a teacher-forced pass over it); one piece fewer leaves one
    step, the piece generate() picks there from the same decoder input (its logits processors
    included: a family whose generation config forces </s> at the length limit ends there)."""
    tr = hf[name]
    text, limit = SOURCES[1], 6
    greedy = tr.translate(text, top_k=4)
    ends = {tr.engine.tokenizer.hf.eos_token, tr.engine.tokenizer.hf.pad_token}
    body = [p for p in greedy.output_tokens[1:] if p not in ends] or [greedy.output_tokens[0]]
    pieces = (greedy.output_tokens[:1] + body * limit)[:limit]        # the first piece as the model starts
    out = tr.translate(text, prefix=pieces, beam_size=beam_size, top_k=4, max_len=limit)
    assert out.output_tokens == pieces and out.prefix_length == limit and len(out.steps) == limit
    assert out.attention.cross.shape[2] == limit
    assert_same_run(out, tr.translate(text, target=pieces, top_k=4), atol=1e-5)
    shorter = tr.translate(text, prefix=pieces[:-1], beam_size=beam_size, top_k=4, max_len=limit)
    assert len(shorter.output_tokens) == limit and shorter.output_tokens[:-1] == pieces[:-1]
    ids = tr.engine.tokenizer.piece_ids(pieces[:-1])
    assert shorter.output_ids == generate_ids(tr, text, ids, num_beams=beam_size, max_new_tokens=1)
    assert_same_run(shorter, tr.translate(text, target=list(shorter.output_tokens), top_k=4), atol=1e-5)
