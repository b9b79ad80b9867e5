"""Command line: translate, train, evaluate, analyze, heads, lexicon, diagnose (see docs/api.md)."""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from .training.data import DEFAULT_DATA_DIR


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("translate", help="translate one sentence")
    p.add_argument("--model", default="pretrained/en-de")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("text", nargs="+")

    from .training.train import add_train_args
    add_train_args(sub.add_parser("train", help="train a model on Multi30k"))

    p = sub.add_parser("evaluate", help="sacreBLEU and chrF on a split")
    p.add_argument("--model", default="pretrained/en-de")
    p.add_argument("--data-dir", default=None, help=f"Multi30k folder (default {DEFAULT_DATA_DIR})")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default=None)

    p = sub.add_parser("analyze", help="which heads matter: ablation loss, Michel importance, pruning curve")
    p.add_argument("--model", default="pretrained/en-de")
    p.add_argument("--data-dir", default=None, help=f"Multi30k folder (default {DEFAULT_DATA_DIR})")
    p.add_argument("--split", default="val")
    p.add_argument("--limit", type=int, default=None, help="only the first N sentence pairs")
    p.add_argument("--bleu-sentences", type=int, default=200, help="sentences decoded per pruning point")
    p.add_argument("--prune-step", type=float, default=0.1, help="fraction of all heads removed per point")
    p.add_argument("--max-tokens", type=int, default=3000, help="padded tokens per batch (each side)")
    p.add_argument("--out", default=None, help="result file (default MODEL/head_importance.json)")
    p.add_argument("--resume-file", default=None, help="partial state (default runs/analyze-NAME-SPLIT.json)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing resume file")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default=None)

    p = sub.add_parser("source-pieces", help="write MODEL/source_pieces.json: the pieces the source side of "
                                             "the training data uses (embedding neighbours stay in that language)")
    p.add_argument("model", nargs="?", default="pretrained/en-de")
    p.add_argument("--data-dir", default=None, help=f"Multi30k folder (default {DEFAULT_DATA_DIR})")
    p.add_argument("--split", default="train")

    p = sub.add_parser("lexicon", help="write MODEL/lexicon.tsv.gz: which words translate which in the training "
                                       "data (diagnosis's lexicon gap)")
    p.add_argument("model", nargs="?", default="pretrained/en-de")
    p.add_argument("--data-dir", default=None, help=f"Multi30k folder (default {DEFAULT_DATA_DIR})")
    p.add_argument("--split", default="train")

    from .analysis.heads_cli import add_args as add_heads_args
    add_heads_args(sub.add_parser("heads", help="head roles (positional, rare word, sink, alignment) over a corpus; "
                                                "writes MODEL/head_roles.json"))

    from .diagnosis.cli import add_args as add_diagnose_args
    add_diagnose_args(sub.add_parser("diagnose", help="flag hallucinated and omitted pieces; rank sentences"))

    args = parser.parse_args(argv)
    if args.command == "train" and not args.no_jemalloc:
        _reexec_with_jemalloc()
    import torch
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    if args.command == "translate":
        from .translator import Translator
        tr = Translator.load(args.model, device=args.device)
        try:
            out = tr.translate(" ".join(args.text), beam_size=args.beam, max_len=args.max_len, capture=False)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(out.text)
        return 0
    if args.command == "source-pieces":
        from .training.data import read_split, resolve_data_dir
        from .analysis.neighbours import SOURCE_PIECES, write_source_pieces
        from .translator import Translator
        tr = Translator.load(args.model)
        lines = read_split(resolve_data_dir(args.data_dir), args.split, tr.source_lang)
        described = f"Multi30k {args.split}.{tr.source_lang} ({len(lines):,} sentences)"
        record = write_source_pieces(args.model, tr, lines, described)
        print(f"{record['pieces_seen']} of {record['vocab_size']} pieces occur in {record['data']}; "
              f"wrote {os.path.join(args.model, SOURCE_PIECES)}")
        return 0
    if args.command == "lexicon":
        from .diagnosis.lexicon import write_lexicon
        from .training.data import resolve_data_dir
        print(write_lexicon(args.model, resolve_data_dir(args.data_dir), args.split))
        return 0
    if args.command == "heads":
        from .analysis.heads_cli import run as run_heads
        return run_heads(args, argv)
    if args.command == "diagnose":
        from .diagnosis.cli import run as run_diagnose
        return run_diagnose(args)
    if args.command == "train":
        from .training.train import train
        train(args)
        return 0
    if args.command == "evaluate":
        from .training.data import resolve_data_dir
        from .training.evaluate import evaluate
        from .translator import Translator
        tr = Translator.load(args.model, device=args.device)
        result = evaluate(tr, resolve_data_dir(args.data_dir), args.split, beam_size=args.beam, limit=args.limit)
        print(result["bleu_text"])
        print(result["chrf_text"])
        print(f"signature: {result['bleu_signature']}")
        return 0
    if args.command == "analyze":
        from .analysis.head_importance import analyze
        from .training.data import resolve_data_dir
        from .translator import Translator
        tr = Translator.load(args.model, device=args.device)
        command = "python -m transformer " + shlex.join(sys.argv[1:] if argv is None else list(argv))
        result = analyze(tr, args.model, resolve_data_dir(args.data_dir), args.split, limit=args.limit,
                         out=args.out, resume_file=args.resume_file, bleu_sentences=args.bleu_sentences,
                         prune_step=args.prune_step, max_tokens=args.max_tokens, command=command,
                         fresh=args.fresh)
        print(f"base loss {result['base_loss']:.4f} on {result['sentences']} sentences; "
              f"{result['wall_seconds'] / 60:.1f} min; wrote {args.out or os.path.join(args.model, 'head_importance.json')}")
        return 0
    return 1


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def _reexec_with_jemalloc() -> None:
    """Restart under jemalloc that keeps freed pages (Debian package libjemalloc2), if present.

    glibc hands each large activation back to the OS, so every training step page-faults
    gigabytes; measured on the 2-core dev box: 1,088 -> 1,544 target tokens/s.
    """
    if os.environ.get("LD_PRELOAD", "").find("jemalloc") >= 0 or not os.path.exists(JEMALLOC):
        return
    env = dict(os.environ, LD_PRELOAD=JEMALLOC,
               MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1,background_thread:false")
    os.execve(sys.executable, [sys.executable, "-m", "transformer", *sys.argv[1:]], env)


if __name__ == "__main__":
    sys.exit(main())
