"""Training on Multi30k: sentencepiece first, then token-batched Adam with warmup, per-epoch val BLEU.

Resume state (fp32 weights + optimizer) lives in a git-ignored run directory; only the
fp16 model directory is shipped. `--max-minutes` bounds the whole run.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from ..checkpoint import save_model_dir, weights_state, write_card
from ..config import ModelConfig
from .data import DEFAULT_DATA_DIR, REPO_ROOT, collate, read_split, resolve_data_dir, token_batches
from .evaluate import evaluate, score_texts
from ..model import PAD_ID, Transformer
from ..tokenizer import Tokenizer
from ..translator import Translator


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None, help=f"Multi30k folder (default {DEFAULT_DATA_DIR})")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--out", required=True, help="model directory to write (e.g. pretrained/en-de)")
    p.add_argument("--run-dir", default=None, help="resume checkpoints (default runs/<src>-<tgt>)")
    p.add_argument("--max-minutes", type=float, default=80.0, help="wall-clock budget for the whole run")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--encoder-layers", type=int, default=3)
    p.add_argument("--decoder-layers", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--post-ln", action="store_true", help="the paper's post-LN instead of pre-LN")
    p.add_argument("--no-tie", action="store_true", help="separate embeddings and output projection")
    p.add_argument("--max-tokens", type=int, default=2500, help="padded tokens per batch (each side)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=800, help="warmup updates")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--average", type=int, default=5, help="try averaging the last N epoch checkpoints")
    p.add_argument("--val-limit", type=int, default=None, help="score only this many val sentences per epoch")
    p.add_argument("--device", default=None)
    p.add_argument("--no-jemalloc", action="store_true", help="do not restart under jemalloc")


def learning_rate(step: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then inverse-sqrt decay."""
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def train_step(model, optimizer, src, fed, gold, label_smoothing: float, clip: float, lr: float):
    """One update on a collated batch. Returns (mean loss per target token, target tokens)."""
    logits = model(src, src != PAD_ID, fed, fed != PAD_ID)                      # (B, T, V)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), gold.view(-1),
                           ignore_index=PAD_ID, label_smoothing=label_smoothing)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return float(loss.detach()), int((gold != PAD_ID).sum())


def train(args: argparse.Namespace) -> Path:
    started = time.time()
    budget = args.max_minutes * 60
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device) if args.device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data_dir = resolve_data_dir(args.data_dir)
    run_dir = Path(args.run_dir or REPO_ROOT / "runs" / f"{args.src}-{args.tgt}")
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir / "train.log", "a", encoding="utf-8")

    def say(message: str) -> None:
        line = f"[{(time.time() - started) / 60:6.1f} min] {message}"
        tqdm.write(line)
        log.write(line + "\n")
        log.flush()

    train_src, train_tgt = read_split(data_dir, "train", args.src), read_split(data_dir, "train", args.tgt)
    spm_path = run_dir / "spm.model"
    if spm_path.is_file():
        tokenizer = Tokenizer.load(spm_path)
    else:   # a joint vocabulary, so embeddings can be shared across the two languages
        tokenizer = Tokenizer.train(train_src + train_tgt, args.vocab_size)
        tokenizer.save(spm_path)
    say(f"tokenizer: {len(tokenizer)} pieces")
    config = ModelConfig(vocab_size=len(tokenizer), d_model=args.d_model, n_heads=args.heads,
                         n_encoder_layers=args.encoder_layers, n_decoder_layers=args.decoder_layers,
                         d_ff=args.d_ff, dropout=args.dropout, norm_first=not args.post_ln,
                         tie_embeddings=not args.no_tie, source_lang=args.src, target_lang=args.tgt)
    source_ids = [ids[: config.max_source_len - 1] + [3] for ids in tokenizer.encode_batch(train_src)]
    target_ids = [ids[: config.max_target_len - 1] for ids in tokenizer.encode_batch(train_tgt)]
    model = Transformer(config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    generator = torch.Generator().manual_seed(args.seed)
    state = {"epoch": 0, "step": 0, "history": [], "best_bleu": -1.0, "elapsed": 0.0}
    resume_path = run_dir / "last.pt"
    if resume_path.is_file():
        saved = torch.load(resume_path, map_location="cpu", weights_only=True)   # never unpickle objects
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]
        say(f"resumed from {resume_path} at epoch {state['epoch']}, step {state['step']}")
        started -= state["elapsed"]          # the budget covers the run as a whole
    val_src, val_tgt = read_split(data_dir, "val", args.src), read_split(data_dir, "val", args.tgt)
    if args.val_limit:
        val_src, val_tgt = val_src[: args.val_limit], val_tgt[: args.val_limit]
    translator = Translator(model, tokenizer, device=device)
    say(f"model: {model.num_parameters():,} parameters, device {device}, threads {torch.get_num_threads()}")
    epoch_seconds = None
    stop = False
    while state["epoch"] < args.epochs and not stop:
        epoch_start = time.time()
        batches = token_batches(source_ids, target_ids, args.max_tokens, generator)
        model.train()
        bar = tqdm(batches, desc=f"epoch {state['epoch'] + 1}", unit="batch", mininterval=2.0,
                   file=sys.stderr, dynamic_ncols=True)
        total_loss, total_tokens, window_tokens, window_start = 0.0, 0, 0, time.time()
        for batch in bar:
            src, fed, gold = (t.to(device) for t in collate(batch, source_ids, target_ids))
            state["step"] += 1
            loss, n_tokens = train_step(model, optimizer, src, fed, gold, args.label_smoothing, args.clip,
                                        learning_rate(state["step"], args.lr, args.warmup))
            total_loss += loss * n_tokens
            total_tokens += n_tokens
            window_tokens += n_tokens + int((src != PAD_ID).sum())
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{window_tokens / (time.time() - window_start):.0f}",
                            lr=f"{optimizer.param_groups[0]['lr']:.2e}")
            if time.time() - started > budget:
                stop = True
                say("time budget reached inside an epoch; stopping")
                break
        bar.close()
        if stop and state["epoch"] > 0 and total_tokens < 0.5 * sum(len(t) + 1 for t in target_ids):
            break   # a partial epoch is not worth a checkpoint of its own
        state["epoch"] += 1
        model.eval()
        hypotheses = translator.translate_batch(val_src)
        val = score_texts(hypotheses, val_tgt)
        epoch_seconds = time.time() - epoch_start
        state["history"].append({"epoch": state["epoch"], "step": state["step"],
                                 "train_loss": round(total_loss / max(total_tokens, 1), 4),
                                 "val_bleu": val["bleu"], "val_chrf": val["chrf"],
                                 "seconds": round(epoch_seconds, 1)})
        say(f"epoch {state['epoch']}: loss {total_loss / max(total_tokens, 1):.4f} val BLEU {val['bleu']:.2f} "
            f"chrF {val['chrf']:.2f} ({epoch_seconds:.0f}s)")
        save_file({k: v.contiguous() for k, v in weights_state(model, torch.float32).items()},
                  str(run_dir / f"epoch{state['epoch']:03d}.safetensors"))
        if val["bleu"] > state["best_bleu"]:
            state["best_bleu"] = val["bleu"]
            state["best_epoch"] = state["epoch"]
        for old in sorted(run_dir.glob("epoch*.safetensors"))[:-max(args.average, 1)]:
            if old.name != f"epoch{state.get('best_epoch', 0):03d}.safetensors":
                old.unlink()
        state["elapsed"] = time.time() - started
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "generator": generator.get_state(), "torch_rng": torch.get_rng_state(), "state": state},
                   run_dir / "last.pt.tmp")
        os.replace(run_dir / "last.pt.tmp", resume_path)
        if time.time() - started + epoch_seconds > budget:
            say("not enough budget left for another epoch; stopping")
            break
    return finish(args, model, tokenizer, translator, state, run_dir, data_dir, started, say)


def finish(args, model, tokenizer, translator, state, run_dir, data_dir, started, say) -> Path:
    """Pick best-single vs averaged weights on val, ship fp16, then score the shipped weights."""
    val_src, val_tgt = read_split(data_dir, "val", args.src), read_split(data_dir, "val", args.tgt)
    model.eval()
    candidates = {}
    best_path = run_dir / f"epoch{state['best_epoch']:03d}.safetensors"
    best_state = load_file(str(best_path))
    model.load_state_dict(best_state, strict=False)
    candidates["best_single"] = (score_texts(translator.translate_batch(val_src), val_tgt)["bleu"], best_state)
    recent = sorted(run_dir.glob("epoch*.safetensors"))[-args.average:]
    if len(recent) >= 2:
        for n in sorted({min(3, len(recent)), len(recent)}):
            states = [load_file(str(p)) for p in recent[-n:]]
            averaged = {k: sum(s[k] for s in states) / n for k in states[0]}
            model.load_state_dict(averaged, strict=False)
            bleu = score_texts(translator.translate_batch(val_src), val_tgt)["bleu"]
            candidates[f"average_last_{n}"] = (bleu, averaged)
    say("val BLEU by candidate: " + ", ".join(f"{k} {v[0]:.2f}" for k, v in candidates.items()))
    chosen = max(candidates, key=lambda k: candidates[k][0])
    model.load_state_dict(candidates[chosen][1], strict=False)
    out = save_model_dir(args.out, model, tokenizer, card={"status": "being scored"})
    train_minutes = (time.time() - started) / 60
    # Score what ships: reload the fp16 weights as float32.
    shipped = Translator.load(out, device=translator.device)
    scores = {}
    for split in ("val", "test_2016_flickr"):
        scores[split] = {}
        for name, beam in (("greedy", 1), ("beam4", 4)):
            result = evaluate(shipped, data_dir, split, beam_size=beam)
            scores[split][name] = {k: result[k] for k in ("bleu", "chrf", "bleu_text", "chrf_text")}
            say(f"{split} {name}: {result['bleu_text']} | {result['chrf_text']}")
    first200 = evaluate(shipped, data_dir, "test_2016_flickr", beam_size=1, limit=200)
    scores["test_2016_flickr_first200"] = {"greedy": {"bleu": first200["bleu"], "chrf": first200["chrf"]}}
    card = {
        "name": f"Attention Atlas {args.src}->{args.tgt}",
        "data": {"dataset": "Multi30k task 1 (raw)", "train": "train (29,000 pairs)",
                 "model_selection": "val (1,014)", "reported": "test_2016_flickr (1,000)"},
        "config": model.config.to_dict(),
        "parameters": model.num_parameters(),
        "training": {"epochs": state["epoch"], "updates": state["step"], "chosen_weights": chosen,
                     "val_bleu_by_candidate": {k: v[0] for k, v in candidates.items()},
                     "history": state["history"], "train_wall_minutes": round(train_minutes, 1),
                     "max_tokens": args.max_tokens, "lr": args.lr, "warmup": args.warmup,
                     "label_smoothing": args.label_smoothing, "clip": args.clip, "seed": args.seed,
                     "threads": torch.get_num_threads()},
        "hardware": {"device": str(translator.device), "cpu": platform.processor() or platform.machine(),
                     "cores": os.cpu_count(), "torch": torch.__version__},
        "command": "python -m transformer " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "scores": scores,
        "sacrebleu_signature": {"bleu": first200["bleu_signature"], "chrf": first200["chrf_signature"]},
        "weights": "fp16 safetensors, loaded as float32",
    }
    card["wall_minutes_total"] = round((time.time() - started) / 60, 1)
    write_card(out, card)
    say(f"wrote {out} (chosen {chosen}); total {card['wall_minutes_total']} min")
    return out
