"""Hugging Face encoder-decoders behind the Translator API, fully offline, on tiny models of
every supported family (tests/hf_tiny.py): loading, the Translation contract, decoding equal
to generate(), faithful capture, ablation, threads, and every loading error."""
import copy
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from conftest import REPO, TEST_DEVICE
from hf_tiny import LANGUAGES
from transformer import Translator
from transformer.capture import is_capturing
from transformer.interventions import current as current_interventions

FAMILIES = ["marian", "m2m100", "nllb", "mbart50", "bart", "t5"]
SENTENCES = ["A man is riding a bike.", "Two dogs play in the snow.", "A girl in a red dress.",
             "People are walking down a busy street near a market."]
KINDS = ("encoder_self", "decoder_self", "cross")


@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in FAMILIES}


def generate_ids(tr, text, **kwargs) -> list[int]:
    """transformers' own generate() on the same encoder input; outputs after the start token,
    up to the first end token."""
    enc = tr.engine.tokenizer.hf([tr.engine.langs.prefix + text], return_tensors="pt").to(tr.device)
    ids = tr.engine.model.generate(**enc, do_sample=False, **tr.engine.langs.overrides, **kwargs)[0, 1:].tolist()
    eos = tr.engine.model.generation_config.eos_token_id
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def forced_pass(tr, out, **kwargs):
    """transformers' full forward, teacher-forced over the pieces the decoder was fed."""
    source = torch.tensor([out.source_ids], device=tr.device)
    fed = torch.tensor([tr.engine.tokenizer.piece_ids(out.target_tokens)], device=tr.device)
    with torch.no_grad():
        return tr.engine.model(input_ids=source, attention_mask=torch.ones_like(source), decoder_input_ids=fed,
                        **kwargs)


# ---- loading -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_loads_as_the_one_translator_with_our_field_names(hf, name):
    tr = hf[name]
    assert type(tr) is Translator and type(tr.engine).__name__ == "HFEngine"
    assert tr.engine.family == tr.engine.model.config.model_type != "ours"
    c, hc = tr.config, tr.engine.model.config
    assert (c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff) == (32, 4, 2, 2, 64)
    assert c.vocab_size == hc.vocab_size and c.max_source_len >= 128 and c.max_target_len >= 128
    assert c.norm_first == (name not in ("marian", "bart"))
    assert tr.device == torch.device(TEST_DEVICE) and tr.engine.model.config._attn_implementation == "eager"
    assert {"name", "family", "path"} <= set(tr.card) and tr.card["family"] == hc.model_type
    assert (tr.source_lang, tr.target_lang) == LANGUAGES.get(name, ("en", "de") if name == "marian" else ("", ""))


def test_our_model_directories_open_as_before():
    tr = Translator.load(REPO / "pretrained" / "en-de", device="cpu")
    assert type(tr) is Translator and tr.translate("A dog.").output_tokens[-1] == "</s>"
    with pytest.raises(ValueError, match="translates en->de"):
        Translator.load(REPO / "pretrained" / "en-de", source_lang="fr")


# ---- the Translation contract ------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_tokens_shapes_masks_and_rows(hf, name):
    tr = hf[name]
    hft = tr.engine.tokenizer.hf
    out = tr.translate(SENTENCES[0], top_k=3)
    S, T, c = len(out.source_tokens), len(out.output_tokens), tr.config
    assert out.source_ids == hft(tr.engine.langs.prefix + SENTENCES[0]).input_ids
    assert out.source_tokens == hft.convert_ids_to_tokens(out.source_ids)
    start = tr.engine.model.generation_config.decoder_start_token_id
    assert out.target_tokens[0] == hft.convert_ids_to_tokens(start)
    assert out.target_tokens[1:] == out.output_tokens[:-1] and len(out.steps) == T
    if name in LANGUAGES and name != "t5":          # the language code is the first output piece
        assert out.output_tokens[0] == hft.convert_ids_to_tokens(tr.engine.langs.overrides["forced_bos_token_id"])
    att = out.attention
    assert att.encoder_self.shape == (c.n_encoder_layers, c.n_heads, S, S)
    assert att.decoder_self.shape == (c.n_decoder_layers, c.n_heads, T, T)
    assert att.cross.shape == (c.n_decoder_layers, c.n_heads, T, S)
    for array in (att.encoder_self, att.decoder_self, att.cross):
        assert array.dtype == np.float32
        np.testing.assert_allclose(array.sum(-1), 1.0, atol=1e-5)
    upper = ~np.tril(np.ones((T, T), dtype=bool))
    assert (att.decoder_self[..., upper] == 0.0).all()
    assert out.masks.source_padding.shape == (S,) and out.masks.source_padding.all()
    np.testing.assert_array_equal(out.masks.target_causal, ~upper)
    assert out.positional_encoding.shape == (max(S, T), c.d_model) and out.positional_encoding.dtype == np.float32
    assert out.decoder_positional_encoding.shape == (T, c.d_model)
    assert out.source_embeddings.shape == (S, c.d_model)
    for t, step in enumerate(out.steps):
        assert step.token == out.output_tokens[t] and len(step.top_k) == 3
        np.testing.assert_array_equal(step.cross_attention, att.cross[:, :, t])
    assert tr.translate(SENTENCES[0], capture=False).attention is None


@pytest.mark.parametrize("name", FAMILIES)
def test_positional_encoding_and_embeddings_are_what_the_encoder_adds(hf, name):
    """The first encoder layer's input is f(source_embeddings + positional_encoding[:S]),
    f = BART's embedding LayerNorm or identity; T5 adds nothing and shows its relative bias."""
    tr = hf[name]
    encoder = tr.engine.model.get_encoder()
    seen = {}

    def keep_input(module, args):
        seen["x"] = args[0][0].clone()

    def keep_bias(module, args, output):
        seen["bias"] = output[1][0].clone()

    first = (encoder.block[0] if name == "t5" else encoder.layers[0])
    handle = first.register_forward_pre_hook(keep_input)
    bias_handle = (encoder.block[0].layer[0].SelfAttention.register_forward_hook(keep_bias)
                   if name == "t5" else None)
    try:
        out = tr.translate(SENTENCES[1], capture=False)
    finally:
        handle.remove()
        bias_handle and bias_handle.remove()
    S = len(out.source_ids)
    x = torch.from_numpy(out.source_embeddings + out.positional_encoding[:S]).to(tr.device)
    if hasattr(encoder, "layernorm_embedding"):
        x = encoder.layernorm_embedding(x)
    torch.testing.assert_close(x, seen["x"], atol=1e-5, rtol=0)
    kind = {"t5": "relative_bias", "bart": "learned", "mbart50": "learned"}.get(name, "sinusoidal")
    assert out.positional_kind == kind == tr.config.positional_kind
    if name == "t5":
        assert not out.positional_encoding.any()
        assert out.position_bias.shape == (tr.config.n_heads, S, S)
        np.testing.assert_allclose(out.position_bias, seen["bias"].cpu().numpy(), atol=1e-6)
        assert out.decoder_position_bias.shape[1:] == (len(out.output_ids),) * 2
    else:
        assert out.position_bias is None and out.positional_encoding.any()


# ---- decoding equals generate() ------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_and_beam_equal_generate(hf, name):
    tr = hf[name]
    for text in SENTENCES:
        greedy = tr.translate(text, capture=False)
        assert greedy.output_ids == generate_ids(tr, text, num_beams=1)
        assert greedy.text == tr.engine.tokenizer.hf.decode(greedy.output_ids, skip_special_tokens=True)
        for k in (2, 4):
            beam = tr.translate(text, beam_size=k, capture=False)
            assert beam.output_ids == generate_ids(tr, text, num_beams=k), (text, k)
    capped = tr.translate(SENTENCES[3], max_len=5)
    assert capped.output_ids == generate_ids(tr, SENTENCES[3], num_beams=1, max_new_tokens=5)
    assert len(capped.output_tokens) <= 5
    with pytest.raises(ValueError, match="max_target_len"):
        tr.translate("A dog.", max_len=tr.config.max_target_len + 1)


@pytest.mark.parametrize("name", ["marian", "bart", "t5"])
def test_beam_history_and_score(hf, name):
    tr = hf[name]
    text, k = SENTENCES[2], 3
    out = tr.translate(text, beam_size=k)
    for t, hypotheses in enumerate(out.beam):
        assert sum(not h.finished for h in hypotheses) == k
        for h in hypotheses:
            assert len(h.pieces) == t + 1
            if t == 0:
                assert h.parent is None
            else:
                parent = out.beam[t - 1][h.parent]
                assert not parent.finished and parent.pieces == h.pieces[:-1]
    step, index = out.beam_final
    final = out.beam[step][index]
    assert final.finished and final.pieces == out.output_tokens
    enc = tr.engine.tokenizer.hf([tr.engine.langs.prefix + text], return_tensors="pt").to(tr.device)
    theirs = tr.engine.model.generate(**enc, num_beams=k, do_sample=False, output_scores=True,
                               return_dict_in_generate=True, **tr.engine.langs.overrides)
    assert final.score == pytest.approx(float(theirs.sequences_scores[0]), abs=1e-4)
    # steps and attention describe the returned hypothesis
    assert [s.token for s in out.steps] == out.output_tokens
    assert out.attention.cross.shape[2] == len(out.output_tokens)
    assert tr.translate(text).beam is None


# ---- faithfulness -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_captured_weights_equal_transformers_output_attentions(hf, name):
    """Step-by-step cached decoding (greedy) and the beam's forced pass both give exactly the
    heads transformers returns with output_attentions=True over the same pieces; the step
    probabilities are the softmax of that pass's logits."""
    tr = hf[name]
    for out in (tr.translate(SENTENCES[0]), tr.translate(SENTENCES[3], beam_size=3)):
        ref = forced_pass(tr, out, output_attentions=True)
        theirs = {"encoder_self": ref.encoder_attentions, "decoder_self": ref.decoder_attentions,
                  "cross": ref.cross_attentions}
        for kind in KINDS:
            expected = torch.cat(theirs[kind]).cpu().numpy()           # (layers, H, Q, K)
            np.testing.assert_allclose(out.attention.get(kind), expected, atol=1e-5, rtol=0)
        probs = torch.softmax(ref.logits[0], -1)
        assert [s.prob for s in out.steps] == pytest.approx(
            [probs[t, i].item() for t, i in enumerate(out.output_ids)], abs=1e-5)


# ---- forced decoding ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_forced_decoding(hf, name):
    tr = hf[name]
    source, reference = SENTENCES[0], "Ein Mann fährt Fahrrad."
    out = tr.translate(source, target=reference, top_k=4)
    with tr.engine.tokenizer.lock:
        expected = tr.engine.tokenizer.hf(text_target=reference).input_ids
    assert out.output_ids == expected and out.forced
    assert out.output_tokens == tr.engine.tokenizer.hf.convert_ids_to_tokens(expected)
    probs = torch.softmax(forced_pass(tr, out).logits[0], -1)
    for t, step in enumerate(out.steps):
        assert step.prob == pytest.approx(probs[t, out.output_ids[t]].item(), abs=1e-5)
        assert step.top_k[0][1] == pytest.approx(probs[t].max().item(), abs=1e-5)
    greedy = tr.translate(source)
    again = tr.translate(source, target=list(greedy.output_tokens))
    assert again.output_tokens == greedy.output_tokens
    for kind in KINDS:
        np.testing.assert_allclose(again.attention.get(kind), greedy.attention.get(kind), atol=1e-5)
    with pytest.raises(ValueError, match="not a piece"):
        tr.translate(source, target=["▁no-such-piece-here"])
    for bad in ("   ", []):
        with pytest.raises(ValueError):
            tr.translate(source, target=bad)


# ---- ablation -----------------------------------------------------------------------------------------
def _ablated_copy(tr, kind, layer, head):
    """Reference ablation: zero the output projection's input columns of that head (bias kept)."""
    model = copy.deepcopy(tr.engine.model)
    site = next(s for s in __import__("transformer.hf.arch", fromlist=["x"]).attention_sites(model)
                if (s.kind, s.layer) == (kind, layer))
    with torch.no_grad():
        site.out_proj.weight[:, head * site.d_head:(head + 1) * site.d_head] = 0.0
    return model


@pytest.mark.parametrize("name", FAMILIES)
def test_head_mask_zeroes_that_heads_slice_before_the_projection(hf, name):
    tr = hf[name]
    text, reference = SENTENCES[1], "Zwei Hunde spielen im Schnee."
    for kind, layer, head in (("encoder_self", 0, 1), ("decoder_self", 1, 2), ("cross", 0, 3)):
        out = tr.translate(text, target=reference, head_mask={(kind, layer, head)})
        model = _ablated_copy(tr, kind, layer, head)
        source = torch.tensor([out.source_ids], device=tr.device)
        fed = torch.tensor([tr.engine.tokenizer.piece_ids(out.target_tokens)], device=tr.device)
        with torch.no_grad():
            logits = model(input_ids=source, attention_mask=torch.ones_like(source), decoder_input_ids=fed).logits
        probs = torch.softmax(logits[0], -1)
        assert [s.prob for s in out.steps] == pytest.approx(
            [probs[t, i].item() for t, i in enumerate(out.output_ids)], abs=1e-5)
        np.testing.assert_allclose(out.attention.get(kind).sum(-1), 1.0, atol=1e-5)   # shown as computed
    base = tr.translate(text, target=reference)
    assert any(abs(a.prob - b.prob) > 1e-6 for a, b in zip(base.steps, out.steps))


@pytest.mark.parametrize("name", ["marian", "t5"])
def test_every_cross_head_off_makes_the_source_irrelevant(hf, name):
    tr = hf[name]
    mask = {("cross", layer, head) for layer in range(2) for head in range(4)}
    a = tr.translate(SENTENCES[0], target="Ein Hund.", head_mask=mask, top_k=5)
    b = tr.translate(SENTENCES[3], target="Ein Hund.", head_mask=mask, top_k=5)
    assert [p for _, p in a.steps[1].top_k] == pytest.approx([p for _, p in b.steps[1].top_k], abs=1e-5)
    assert tr.translate_batch([SENTENCES[0]], head_mask=mask) == [tr.translate(SENTENCES[0], head_mask=mask).text]
    for bad in ({("attn", 0, 0)}, {("cross", 2, 0)}, {("cross", 0, 4)}, {("cross", 0)}):
        with pytest.raises(ValueError):
            tr.translate("A dog.", head_mask=bad)


# ---- batches, threads, per-call state -----------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILIES)
def test_translate_batch_matches_translate(hf, name):
    tr = hf[name]
    sentences = SENTENCES + ["Dog."]
    for beam in (1, 3):
        single = [tr.translate(s, beam_size=beam, capture=False).text for s in sentences]
        assert tr.translate_batch(sentences, beam_size=beam, batch_size=3) == single


@pytest.mark.parametrize("name", ["marian", "mbart50", "t5"])
def test_three_threads_get_serial_results(hf, name):
    tr = hf[name]
    jobs = [(SENTENCES[0], None), (SENTENCES[1], {("cross", 0, 1), ("encoder_self", 1, 0)}), (SENTENCES[3], None)]
    serial = [tr.translate(s, head_mask=m) for s, m in jobs]
    hooks_before = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in tr.engine.model.modules())
    barrier = threading.Barrier(len(jobs))

    def run(job):
        barrier.wait()                       # start together so the calls overlap
        return [tr.translate(job[0], head_mask=job[1]) for _ in range(2)]

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        results = list(pool.map(run, jobs))
    for ref, outs in zip(serial, results):
        for out in outs:
            assert out.output_ids == ref.output_ids
            for kind in KINDS:
                np.testing.assert_allclose(out.attention.get(kind), ref.attention.get(kind), atol=1e-6)
    hooks_after = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in tr.engine.model.modules())
    assert hooks_after == hooks_before and not is_capturing() and current_interventions() is None


@pytest.mark.parametrize("name", ["marian", "m2m100"])
def test_bad_text_and_truncation(hf, name):
    tr = hf[name]
    for bad in ("", "   ", 3):
        with pytest.raises(ValueError):
            tr.translate(bad)
    long = " ".join(["A man is riding a bike."] * 40)
    out = tr.translate(long, max_len=4)
    assert out.truncated and len(out.source_ids) == tr.config.max_source_len
    assert out.source_ids[-1] == tr.engine.tokenizer.hf.eos_token_id


def test_a_second_translator_over_the_same_model_does_not_record_twice(hf):
    tr = hf["marian"]
    from transformer.hf import HFEngine
    other = Translator(HFEngine(tr.engine.model, tr.engine.tokenizer.hf, dict(tr.card), tr.device, tr.source_lang, tr.target_lang))
    a, b = tr.translate(SENTENCES[0]), other.translate(SENTENCES[0])
    for kind in KINDS:
        np.testing.assert_array_equal(a.attention.get(kind), b.attention.get(kind))


# ---- imports -------------------------------------------------------------------------------
def test_after_runtime_no_session_path_imports_a_transformers_module(hf_dirs):
    """transformer/hf/runtime.py imports transformers once, under a lock; after it, loading,
    translating (greedy, beam, forced, ablated, batched, explained) and the app's language list
    import nothing more from transformers or the hub: no thread can reach a lazy import. Each
    model's generation config is cut to 8 pieces after the load (the tiny models mostly run to
    their max_length of 40): the same code paths as the app's calls (no max_len, the config's
    length rules), for less work (15 s of CPU against 23 s). Torch runs on one thread, as in the
    suite's workers: two threads on a busy machine mostly spun (22-53 s of CPU in pytest, 7 s on one)."""
    dirs = {name: str(path) for name, path in hf_dirs.items()}
    code = f"""
import json, sys
sys.path.insert(0, {str(REPO)!r})
import torch
torch.set_num_threads(1)        # as the suite's workers (conftest): tiny models, a second thread only spins
from transformer.hf.runtime import runtime
runtime()
PACKAGES = ("transformers", "huggingface_hub", "tokenizers", "sacremoses", "sentencepiece", "safetensors")
def loaded():
    return {{name for name in sys.modules if name.split(".")[0] in PACKAGES}}
before = loaded()
from atlas_ui.runs.catalogue import language_options
from transformer import Translator
dirs, languages = {dirs!r}, {LANGUAGES!r}
for name, path in dirs.items():
    source, target = languages.get(name, (None, None))
    tr = Translator.load(path, device="cpu", source_lang=source, target_lang=target)
    tr.engine.model.generation_config.max_length = 8
    out = tr.translate("A man is riding a bike.", capture=True, top_k=3)
    tr.translate("A man is riding a bike.", beam_size=2, capture=True)
    tr.translate("A man is riding a bike.", target=out.text or "x", head_mask={{("cross", 0, 0)}})
    tr.translate_batch(["Two dogs play.", "A girl in a red dress."], beam_size=2)
    if name != "t5":
        tr.translate("A man is riding a bike.", explain=True)
    language_options(str(path))
print(json.dumps(sorted(loaded() - before)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("name", FAMILIES)
def test_positional_table_is_what_the_encoder_adds(hf, name):
    tr = hf[name]
    out = tr.translate(SENTENCES[3], capture=True)
    table = tr.positional_table(64)
    assert table.shape == (min(64, tr.config.max_source_len), tr.config.d_model) and table.dtype == np.float32
    S = len(out.source_tokens)
    np.testing.assert_allclose(table[:S], out.positional_encoding[:S], atol=1e-6)
    assert (not table.any()) == (name == "t5")                 # T5 adds nothing: a relative bias instead
    with pytest.raises(ValueError):
        tr.positional_table(0)
