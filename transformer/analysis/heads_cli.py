"""`python -m transformer heads --model M --data-dir DIR --split val [--alignments FILE] [--limit N]`.

Reads every head over the split's pairs (references forced through the model) and writes
head_roles.json beside the model (or --out): role scores per kind and head, every alignment
method's AER and the method `translate(..., align=True)` uses (transformer/analysis/head_roles.py).
"""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path


def add_args(p) -> None:
    p.add_argument("--model", default="pretrained/en-de")
    p.add_argument("--data-dir", default=None, help="Multi30k folder (default ../shared/data/multi30k)")
    p.add_argument("--split", default="val")
    p.add_argument("--alignments", default=None,
                   help="Pharaoh file of gold links for the split's pairs (i-j sure, ipj possible; indices "
                        "count whitespace tokens; line n is pair n). Default: the silver eflomal alignment (val)")
    p.add_argument("--limit", type=int, default=None, help="only the first N pairs")
    p.add_argument("--out", default=None, help="result file (default MODEL/head_roles.json)")
    p.add_argument("--budget", type=int, default=None, help="padded tokens per pass (default 1500 CPU, 20000 CUDA)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default=None)


def frequencies(tr, data_dir, split: str) -> tuple[dict, str]:
    """Piece counts of the model's training data (Multi30k train through the model's tokenizer),
    or of the analysed split when the folder has no train files."""
    from ..training.data import read_split
    from .head_roles import piece_frequencies
    name = "train"
    try:
        src, tgt = read_split(data_dir, name, tr.source_lang), read_split(data_dir, name, tr.target_lang)
    except FileNotFoundError:
        name = split
        src, tgt = read_split(data_dir, name, tr.source_lang), read_split(data_dir, name, tr.target_lang)
    counted = {"source": piece_frequencies(tr, src, "source"), "target": piece_frequencies(tr, tgt, "target")}
    return counted, f"Multi30k {name}.{tr.source_lang} / {name}.{tr.target_lang} ({len(src)} lines) through the model's tokenizer"


def run(args, argv=None) -> int:
    from tqdm import tqdm

    from ..training.data import resolve_data_dir
    from ..translator import Translator
    from .head_roles import HEAD_ROLES, analyze, load_corpus, write_head_roles
    started = time.perf_counter()
    tr = Translator.load(args.model, device=args.device)
    data_dir = resolve_data_dir(args.data_dir)
    try:
        corpus = load_corpus(data_dir, args.split, tr.source_lang, tr.target_lang, args.alignments, args.limit)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    counted, described = frequencies(tr, data_dir, args.split)
    command = "python -m transformer " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    description = {"model": Path(args.model).name, "data": f"Multi30k {args.split} ({len(corpus.sources)} pairs)",
                   "frequencies": described, "command": command, "device": str(tr.device)}
    with tqdm(total=len(corpus.sources), desc="heads", unit="pair", file=sys.stderr) as bar:
        result = analyze(tr, corpus, counted, description, progress=bar.update, budget=args.budget)
    result["seconds_total"] = round(time.perf_counter() - started, 1)
    out = write_head_roles(result, args.out or Path(args.model) / HEAD_ROLES)
    head = result["best_alignment_head"]
    print(f"{result['pairs']} pairs in {result['seconds']} s ({result['seconds_total']} s with loading). "
          f"Best head (chosen on the fit half): layer {head['layer']} head {head['head']} ({head['rule']}), "
          f"AER {head['aer_held_out']} held out (truly best head there: {result['best_head_on_held_out']['aer_held_out']}); "
          f"method {result['method']} ({result['rule']}): AER {result['method_aer_held_out']} held out. Wrote {out}")
    return 0
