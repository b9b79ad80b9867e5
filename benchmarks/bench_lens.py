"""DecoderLens and the logit lens over the shipped models, on Multi30k val (issue 33, item 2).

    python benchmarks/bench_lens.py [--n 1014] [--threads 2] [--batch-size 64] [--data-dir DIR]
    python benchmarks/bench_lens.py --cost [--n 40] [--repeats 5] [--threads 2]

--cost: what lens=True costs (goal <= 1.3x): for both shipped models, translate(capture=True, lens=True)
against translate(capture=True) on the first --n val sentences, the two calls interleaved sentence by
sentence and round by round (load on the machine hits both alike); the ratio of the summed medians,
and also lens=True alone (capture=False, the app's Logit lens run) against capture=True.

For pretrained/en-de and pretrained/de-en, one row per layer:
- encoder layer k (DecoderLens, `translate_batch(encoder_layer=k)`): the decoder reads encoder layer k's
  output through the final encoder norm. BLEU of its greedy translations, and the mean probability of
  the reference: the mean over every reference piece (</s> included) of p(piece | source, the
  reference before it), from one teacher-forced pass with `encoder_layer=k`.
- decoder layer j (logit lens, `engine.read_out` of "decoder.{j}.resid_post"): the mean probability of
  the reference read there, and BLEU of greedy decoding that picks each piece from that read-out
  (the decoder cut after layer j; full teacher-forced passes, no cache: slower, exact).
The last row of each kind is the plain model (a check: its BLEU is translate_batch's).
BLEU: sacreBLEU through transformer.training.evaluate.score_texts, greedy, the first --n pairs of val.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer import Translator  # noqa: E402
from transformer.capture import capture, no_capture  # noqa: E402
from transformer.training.data import read_split, resolve_data_dir  # noqa: E402
from transformer.training.evaluate import score_texts  # noqa: E402


def batches(n: int, size: int, lengths: list[int]):
    """Index chunks of similar source lengths (less padding)."""
    order = sorted(range(n), key=lambda i: lengths[i])
    return [order[i:i + size] for i in range(0, n, size)]


def forced_batch(tr, sources: list[list[int]], references: list[list[int]]):
    """(source, mask, fed, gold, keep): fed = start + reference[:-1], padded; keep marks real pieces."""
    e = tr.engine
    source, mask = e.batch(sources)
    T = max(len(r) for r in references)
    fed = torch.full((len(references), T), e.pad_id, dtype=torch.long)
    gold = torch.full((len(references), T), e.pad_id, dtype=torch.long)
    keep = torch.zeros((len(references), T), dtype=torch.bool)
    for b, ref in enumerate(references):
        fed[b, : len(ref)] = torch.tensor([e.start_id] + ref[:-1])
        gold[b, : len(ref)] = torch.tensor(ref)
        keep[b, : len(ref)] = True
    return source, mask, fed.to(e.device), gold.to(e.device), keep.to(e.device)


def reference_probs(tr, sources, references, size: int) -> tuple[list[float], list[float]]:
    """Mean p(reference piece) per encoder layer (DecoderLens) and per decoder layer (logit lens)."""
    e, c = tr.engine, tr.config
    points = [f"decoder.{j}.resid_post" for j in range(c.n_decoder_layers)]
    enc_sum, dec_sum, count = [0.0] * c.n_encoder_layers, [0.0] * c.n_decoder_layers, 0
    for chunk in batches(len(sources), size, [len(s) for s in sources]):
        source, mask, fed, gold, keep = forced_batch(tr, [sources[i] for i in chunk], [references[i] for i in chunk])
        count += int(keep.sum())
        for k in range(c.n_encoder_layers):
            with no_capture():
                logits = e.teacher_forced(source, mask, fed, encoder_layer=k)                  # (B, T, V)
            enc_sum[k] += float(picked(logits, gold, keep).sum())
        with capture(attention=False, residual=points) as recorder:
            e.teacher_forced(source, mask, fed)
        for j, point in enumerate(points):
            dec_sum[j] += float(picked(e.read_out(recorder.residual_stream(point)), gold, keep).sum())
    return [s / count for s in enc_sum], [s / count for s in dec_sum]


def picked(logits, gold, keep):
    """p(gold piece) at each real position: (B, T) logits -> (n_real,)."""
    probs = torch.softmax(logits.float(), dim=-1).gather(-1, gold[..., None])[..., 0]
    return probs[keep]


def lens_greedy(tr, sources, layer: int, size: int) -> list[str]:
    """Greedy decoding that picks each piece from decoder layer `layer`'s read-out (no cache)."""
    e = tr.engine
    point = f"decoder.{layer}.resid_post"
    texts = [""] * len(sources)
    for chunk in batches(len(sources), size, [len(s) for s in sources]):
        source, mask = e.batch([sources[i] for i in chunk])
        plan = e.plan(source, mask, 1, None, None)
        B = len(chunk)
        fed = torch.full((B, 1), plan.start, dtype=torch.long, device=e.device)
        done = torch.zeros(B, dtype=torch.bool, device=e.device)
        outputs: list[list[int]] = [[] for _ in range(B)]
        for t in range(max(plan.limits)):
            with capture(attention=False, residual={point}) as recorder:
                e.teacher_forced(source, mask, fed)
            token = e.read_out(recorder.residual_stream(point)[:, -1]).argmax(-1)               # (B,)
            for b in range(B):
                if not done[b]:
                    outputs[b].append(int(token[b]))
                    done[b] = int(token[b]) in plan.ends or t + 1 >= plan.limits[b]
            if bool(done.all()):
                break
            fed = torch.cat([fed, torch.where(done, e.pad_id, token)[:, None]], dim=1)
        for b, i in enumerate(chunk):
            texts[i] = tr.engine.tokenizer.decode(outputs[b])
    return texts


@torch.inference_mode()
def bench(name: str, data_dir: Path, n: int | None, size: int) -> None:
    tr = Translator.load(REPO / "pretrained" / name, device="cpu")
    texts = read_split(data_dir, "val", tr.source_lang)[:n]
    refs = read_split(data_dir, "val", tr.target_lang)[:n]
    sources = [tr.encode_source(t)[0] for t in texts]
    references = [tr.engine.target_text_ids(r) for r in refs]
    c, started = tr.config, time.perf_counter()
    plain = score_texts(tr.translate_batch(texts, batch_size=size), refs)["bleu"]
    enc_p, dec_p = reference_probs(tr, sources, references, size)
    print(f"\n{name}: {len(texts)} val pairs, plain greedy BLEU {plain:.2f}")
    print("| reads | layer | BLEU | mean p(reference) |")
    print("|---|---|---|---|")
    for k in range(c.n_encoder_layers):
        bleu = score_texts(tr.translate_batch(texts, batch_size=size, encoder_layer=k), refs)["bleu"]
        print(f"| encoder (DecoderLens) | {k} | {bleu:.2f} | {enc_p[k]:.3f} |", flush=True)
    for j in range(c.n_decoder_layers):
        bleu = score_texts(lens_greedy(tr, sources, j, size), refs)["bleu"]
        print(f"| decoder (logit lens) | {j} | {bleu:.2f} | {dec_p[j]:.3f} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


def cost(name: str, data_dir: Path, n: int, repeats: int) -> float:
    """Median time per sentence of each call, interleaved; prints a table; returns lens / capture."""
    tr = Translator.load(REPO / "pretrained" / name, device="cpu")
    texts = read_split(data_dir, "val", tr.source_lang)[:n]
    calls = {"translate(capture=True)": dict(capture=True),
             "translate(capture=True, lens=True)": dict(capture=True, lens=True),
             "translate(capture=False, lens=True)": dict(capture=False, lens=True)}
    for text in texts[:3]:                                  # warm up
        for kwargs in calls.values():
            tr.translate(text, **kwargs)
    times = {call: [[] for _ in texts] for call in calls}
    for _ in range(repeats):
        for i, text in enumerate(texts):
            for call, kwargs in calls.items():
                started = time.perf_counter()
                tr.translate(text, **kwargs)
                times[call][i].append(time.perf_counter() - started)
    totals = {call: sum(statistics.median(per) for per in rows) for call, rows in times.items()}
    base = totals["translate(capture=True)"]
    pieces = sum(len(tr.translate(text, capture=False).output_tokens) for text in texts)
    print(f"\n{name}: {len(texts)} val sentences ({pieces} output pieces), median of {repeats} per sentence, "
          f"torch threads {torch.get_num_threads()}")
    print("| call | ms per sentence | / capture=True | goal |")
    print("|---|---|---|---|")
    for call, total in totals.items():
        goal = "<= 1.3x" if call == "translate(capture=True, lens=True)" else ""
        print(f"| {call} | {1e3 * total / len(texts):.1f} | {total / base:.2f}x | {goal} |")
    return totals["translate(capture=True, lens=True)"] / base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None, help="the first N val pairs (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cost", action="store_true", help="time lens=True against capture=True (goal <= 1.3x)")
    parser.add_argument("--repeats", type=int, default=5, help="--cost: rounds over the sentences")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data_dir = resolve_data_dir(args.data_dir)
    if args.cost:
        ratios = {name: cost(name, data_dir, args.n or 40, args.repeats) for name in ("en-de", "de-en")}
        worst = max(ratios.values())
        print("\nlens=True / capture=True: " + ", ".join(f"{name} {r:.2f}x" for name, r in ratios.items())
              + f" ({'meets' if worst <= 1.3 else 'misses'} the <= 1.3x goal)")
        return
    for name in ("en-de", "de-en"):
        bench(name, data_dir, args.n, args.batch_size)
    print(f"\nsacreBLEU {score_texts(['a'], ['a'])['bleu_signature']}; torch threads {args.threads}")


if __name__ == "__main__":
    main()
