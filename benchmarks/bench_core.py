"""Speed of the model core, measured side by side in one run (medians over repeats).

    python benchmarks/bench_core.py [--model pretrained/en-de] [--threads 2] [--repeats 15]

Prints a Markdown table of ratios against the goals in issue 2:
  capture on / off (<= 1.15x), recomputed / cached greedy at 30 tokens (>= 2x),
  ours / torch.nn.Transformer training tokens/s (>= 1.0x), ours-with-capture /
  nn.Transformer greedy latency (<= 0.67x; theirs: no KV cache, last-position logits).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.capture import no_capture  # noqa: E402
from transformer.config import ModelConfig  # noqa: E402
from transformer.training.data import DEFAULT_DATA_DIR, collate, read_split, token_batches  # noqa: E402
from transformer.model import BOS_ID, PAD_ID, Transformer, sinusoidal_table  # noqa: E402
from transformer.training.train import learning_rate, train_step  # noqa: E402

SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."
LONG_SENTENCE = ("Two young men in bright orange vests and yellow helmets are repairing the old wooden "
                 "fence next to the busy road while a small brown dog watches them from the grass.")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(fns: dict, repeats: int) -> dict:
    """Run each function once per round, in turn, and return the median time of each."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn))
    return {name: statistics.median(values) for name, values in times.items()}


class TorchReference(nn.Module):
    """torch.nn.Transformer of the same size, with the same embeddings, PE and tied output."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.register_buffer("pe", sinusoidal_table(max(cfg.max_source_len, cfg.max_target_len) + 1, cfg.d_model))
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers,
                                   cfg.d_ff, cfg.dropout, batch_first=True, norm_first=cfg.norm_first)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.output.weight = self.embedding.weight

    def embed(self, tokens):
        return self.embedding(tokens) * math.sqrt(self.cfg.d_model) + self.pe[: tokens.shape[1]]

    def encode(self, src):
        return self.core.encoder(self.embed(src), src_key_padding_mask=src == PAD_ID)

    def decode(self, tgt, memory, src):
        causal = self.core.generate_square_subsequent_mask(tgt.shape[1], dtype=torch.bool)
        return self.core.decoder(self.embed(tgt), memory, tgt_mask=causal, tgt_is_causal=True,
                                 tgt_key_padding_mask=tgt == PAD_ID, memory_key_padding_mask=src == PAD_ID)

    def forward(self, src, src_keep, tgt, tgt_keep=None, gates=None):
        return self.output(self.decode(tgt, self.encode(src), src))


def training_batches(tr: Translator, count: int):
    try:
        src_text = read_split(DEFAULT_DATA_DIR, "train", tr.source_lang)[:4000]
        tgt_text = read_split(DEFAULT_DATA_DIR, "train", tr.target_lang)[:4000]
    except FileNotFoundError:            # no data: sentences of Multi30k-like lengths
        src_text = [" ".join(["a man is riding a bike"] * (1 + i % 3)) for i in range(2000)]
        tgt_text = [" ".join(["ein Mann fährt Fahrrad"] * (1 + i % 3)) for i in range(2000)]
    source = [ids[:127] + [3] for ids in tr.engine.tokenizer.encode_batch(src_text)]
    target = [ids[:127] for ids in tr.engine.tokenizer.encode_batch(tgt_text)]
    batches = token_batches(source, target, 2500, torch.Generator().manual_seed(0))[:count]
    return [collate(b, source, target) for b in batches]


def train_throughput(model, batches) -> float:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    tokens = 0
    start = time.perf_counter()
    for step, (src, fed, gold) in enumerate(batches, 1):
        _, n = train_step(model, optimizer, src, fed, gold, 0.1, 1.0, learning_rate(step, 1e-4, 100))
        tokens += n
    return tokens / (time.perf_counter() - start)


def profile_training(tr: Translator, count: int) -> None:
    """The ops each model's training spends its CPU time in (self time, top 12), after a warm-up."""
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    batches = training_batches(tr, count)
    for name, model in (("ours", Transformer(tr.config)), ("nn.Transformer", TorchReference(tr.config))):
        train_throughput(model, batches[:2])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            train_throughput(model, batches)
        print(f"== {name}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


@torch.inference_mode()
def greedy_recomputed(model: Transformer, source, steps: int):
    """Greedy without a KV cache: the whole prefix goes through the decoder at every step."""
    keep = source != PAD_ID
    memory = model.encode(source, keep)
    fed = torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(steps):
        logits = model.decode(fed, memory, keep)[:, -1]
        fed = torch.cat([fed, logits.argmax(-1, keepdim=True)], dim=1)
    return fed


@torch.inference_mode()
def greedy_cached(model: Transformer, source, steps: int):
    keep = source != PAD_ID
    memory = model.encode(source, keep)
    cache = model.new_cache()
    last = torch.full((1,), BOS_ID, dtype=torch.long)
    for position in range(steps):
        last = model.decode_step(last, position, memory, keep, cache).argmax(-1)
    return last


@torch.inference_mode()
def greedy_reference(model: TorchReference, source, steps: int):
    """How nn.Transformer is used for greedy decoding: no cache, logits for the last position."""
    memory = model.encode(source)
    fed = torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(steps):
        logits = model.output(model.decode(fed, memory, source)[:, -1])
        fed = torch.cat([fed, logits.argmax(-1, keepdim=True)], dim=1)
    return fed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(REPO / "pretrained" / "en-de"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--train-batches", type=int, default=6)
    parser.add_argument("--profile-training", action="store_true",
                        help="only profile the training of ours and nn.Transformer (torch.profiler): where each spends")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.load(args.model, device="cpu")
    cfg = tr.config
    if args.profile_training:
        profile_training(tr, args.train_batches)
        return
    rows = []

    # 1. capture on vs off, one sentence, public API
    tr.translate(SENTENCE)
    t = alternate({"off": lambda: tr.translate(SENTENCE, capture=False),
                   "on": lambda: tr.translate(SENTENCE, capture=True)}, args.repeats)
    rows.append(("capture on / off, one sentence (translate)", f"{t['on'] * 1e3:.1f} ms / {t['off'] * 1e3:.1f} ms",
                 t["on"] / t["off"], "<= 1.15x"))

    # 2. cached vs recomputed greedy at exactly 30 output tokens
    source = torch.tensor([tr.encode_source(LONG_SENTENCE)[0]])
    with no_capture():
        t = alternate({"cached": lambda: greedy_cached(tr.engine.model, source, 30),
                       "recomputed": lambda: greedy_recomputed(tr.engine.model, source, 30)}, args.repeats)
    rows.append(("recomputed / cached greedy, 30 tokens", f"{t['recomputed'] * 1e3:.1f} ms / {t['cached'] * 1e3:.1f} ms",
                 t["recomputed"] / t["cached"], ">= 2x"))

    # 3. training tokens/s against torch.nn.Transformer of the same size (alternated, median of 5)
    torch.manual_seed(0)
    ours, theirs = Transformer(cfg), TorchReference(cfg)
    batches = training_batches(tr, args.train_batches)
    train_throughput(ours, batches[:1]), train_throughput(theirs, batches[:1])     # warm-up
    speeds = {"ours": [], "theirs": []}
    for _ in range(5):
        speeds["ours"].append(train_throughput(ours, batches))
        speeds["theirs"].append(train_throughput(theirs, batches))
    ours_tps, theirs_tps = statistics.median(speeds["ours"]), statistics.median(speeds["theirs"])
    rows.append(("training target tokens/s, ours / nn.Transformer", f"{ours_tps:.0f} / {theirs_tps:.0f}",
                 ours_tps / theirs_tps, ">= 1.0x"))

    # 4. greedy latency: ours with capture (public API) vs nn.Transformer without cache
    theirs.eval()
    out = tr.translate(LONG_SENTENCE, capture=True, max_len=40)
    steps = len(out.output_tokens)
    lat = {"ours": [], "theirs": []}
    for _ in range(5):
        lat["ours"].append(timed(lambda: tr.translate(LONG_SENTENCE, capture=True, max_len=40)))
        lat["theirs"].append(timed(lambda: greedy_reference(theirs, source, steps)))
    ours_lat, theirs_lat = statistics.median(lat["ours"]), statistics.median(lat["theirs"])
    rows.append((f"greedy latency, {steps} tokens: ours with capture / nn.Transformer",
                 f"{ours_lat * 1e3:.1f} ms / {theirs_lat * 1e3:.1f} ms", ours_lat / theirs_lat, "<= 0.67x"))

    print(f"model {args.model}: d_model {cfg.d_model}, {cfg.n_heads} heads, "
          f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers; torch {torch.__version__}, "
          f"{args.threads} threads, {args.repeats} repeats")
    print()
    print("| measurement | times | ratio | goal |")
    print("|---|---|---|---|")
    for name, times, ratio, goal in rows:
        print(f"| {name} | {times} | {ratio:.2f}x | {goal} |")


if __name__ == "__main__":
    main()
