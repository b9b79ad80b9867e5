"""Speed of the Hugging Face engine on a model of opus-mt-en-de's shape, side by side in one run.

    python benchmarks/bench_hf.py [--threads 2] [--repeats 15] [--steps 20]

The model is MarianMTModel with random weights and Helsinki-NLP/opus-mt-en-de's config
(6+6 layers, d_model 512, 8 heads, FFN 2048, vocabulary 58101, pad 58100 as decoder start),
written with save_pretrained and opened through Translator.load like any local model; its
tokenizer is a small sentencepiece model trained here, its vocab.json padded to 58101 ids
(only ids matter to the timings). No download.

Random weights rarely choose </s>, and a run that did would be shorter, so both sides decode
exactly --steps steps: the generation config sets min_length = max_length = steps + 1, so
generate's own MinLengthLogitsProcessor suppresses </s> for us and for generate alike
(Marian's forced EOS then lands on the last step for both).

Goals: capture on / off <= 1.3x; generate / ours >= 1.0x (ours no slower than generate() on the
same eager model). For information, generate() on a second copy loaded with transformers'
default sdpa attention.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.training.data import DEFAULT_DATA_DIR, read_split  # noqa: E402

SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."
VOCAB = 58101


def alternate(fns: dict, repeats: int) -> dict:
    """Run each function once per round, in turn; the median time of each."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def build(out: Path, steps: int) -> Path:
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    try:
        lines = read_split(DEFAULT_DATA_DIR, "train", "en")[:2000] + read_split(DEFAULT_DATA_DIR, "train", "de")[:2000]
    except FileNotFoundError:
        lines = [SENTENCE, "Ein Mann in einer roten Jacke fährt mit dem Fahrrad eine enge Straße entlang."] * 50
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(out / "spm"), vocab_size=1000,
                                   character_coverage=1.0, pad_id=-1, unk_id=0, bos_id=-1, eos_id=1,
                                   num_threads=1, minloglevel=2, hard_vocab_limit=False)
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    vocab.update({f"<unused{i}>": i for i in range(len(vocab), VOCAB - 1)})
    vocab["<pad>"] = VOCAB - 1
    (out / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = MarianTokenizer(str(out / "spm.model"), str(out / "spm.model"), str(out / "vocab.json"),
                                source_lang="en", target_lang="de")
    config = MarianConfig(vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                          encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                          decoder_ffn_dim=2048, max_position_embeddings=512, pad_token_id=VOCAB - 1,
                          eos_token_id=0, decoder_start_token_id=VOCAB - 1, scale_embedding=True,
                          activation_function="swish", share_encoder_decoder_embeddings=True)
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    g = model.generation_config
    g.decoder_start_token_id, g.bad_words_ids, g.forced_eos_token_id = VOCAB - 1, [[VOCAB - 1]], 0
    g.max_length = g.min_length = steps + 1                    # exactly `steps` outputs, for both sides
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    return out / "model"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    from transformers import AutoModelForSeq2SeqLM
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), args.steps)
        tr = Translator.load(path, device="cpu")                  # eager attention, as the adapter loads it
        sdpa = AutoModelForSeq2SeqLM.from_pretrained(path, use_safetensors=True, attn_implementation="sdpa").eval()
    hf, model = tr.engine.tokenizer.hf, tr.engine.model
    enc = hf([SENTENCE], return_tensors="pt")
    memory_inputs = (enc.input_ids, enc.attention_mask)

    def theirs():
        with torch.inference_mode():
            out = model.generate(**enc, num_beams=1, do_sample=False)
        return hf.decode(out[0], skip_special_tokens=True)

    def theirs_sdpa():
        with torch.inference_mode():
            out = sdpa.generate(**enc, num_beams=1, do_sample=False)
        return hf.decode(out[0], skip_special_tokens=True)

    def our_loop():
        with torch.inference_mode():
            source, mask = memory_inputs[0], memory_inputs[1].bool()
            return tr.engine.greedy(source, mask, tr.engine.plan(source, mask, 1, None, None))

    ours = tr.translate(SENTENCE, capture=False)
    assert ours.output_ids == model.generate(**enc, num_beams=1, do_sample=False)[0, 1:].tolist()
    assert len(ours.output_ids) == args.steps, len(ours.output_ids)
    fns = {"translate(capture=True)": lambda: tr.translate(SENTENCE, capture=True),
           "translate(capture=False)": lambda: tr.translate(SENTENCE, capture=False),
           "our greedy loop": our_loop,
           "model.generate() + decode": theirs,
           "model.generate() + decode, sdpa attention": theirs_sdpa}
    for fn in fns.values():                                    # warm up
        fn()
    t = alternate(fns, args.repeats)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c = tr.config
    print(f"MarianMTModel, random weights: {c.n_encoder_layers}+{c.n_decoder_layers} layers, d_model {c.d_model}, "
          f"{c.n_heads} heads, FFN {c.d_ff}, vocab {c.vocab_size}; {len(ours.source_ids)} source pieces, "
          f"{args.steps} decoding steps; {args.threads} threads, median of {args.repeats}; "
          f"torch {torch.__version__}")
    print()
    print("| measurement | seconds |")
    print("|---|---|")
    for name, seconds in t.items():
        print(f"| {name} | {seconds * 1000:.1f} ms |")
    print()
    capture = t["translate(capture=True)"] / t["translate(capture=False)"]
    speed = t["model.generate() + decode"] / t["translate(capture=False)"]
    loop = t["model.generate() + decode"] / t["our greedy loop"]
    print("| ratio | value | goal | met |")
    print("|---|---|---|---|")
    print(f"| capture on / off | {capture:.2f}x | <= 1.3x | {'yes' if capture <= 1.3 else 'NO'} |")
    print(f"| generate / translate(capture=False) | {speed:.2f}x | >= 1.0x | {'yes' if speed >= 1.0 else 'NO'} |")
    print(f"| generate / our greedy loop | {loop:.2f}x | >= 1.0x | {'yes' if loop >= 1.0 else 'NO'} |")
    sdpa_ratio = t["model.generate() + decode, sdpa attention"] / t["translate(capture=False)"]
    print(f"| generate (sdpa) / translate(capture=False) | {sdpa_ratio:.2f}x | (for information) | |")
    print(f"\npeak RSS: {rss:.0f} MiB (two copies of the model: eager for us and generate(), sdpa)")


if __name__ == "__main__":
    main()
