"""Diagnosis judged on Multi30k val[:300], which no weight was fitted on, for both shipped models:
realistic in-sentence errors (issue 30, transformer/diagnosis/protocol.py) and the synthetic
protocol of issue 22, every single signal beside `diagnose`'s combination in one run, the flag
rates, natural hallucinations and the speed ratio.

    python benchmarks/bench_diagnosis.py --n 300 --threads 2

Realistic cases, from eflomal word alignments (transformer/diagnosis/word_align.py, `pip install .[dev]`):
omission (a source word's aligned reference word deleted), phrase (two), substitution (that word
replaced by another reference's content word), insertion (an adjective put into the source), and
the unedited references as correct translations. Synthetic cases (transformer/diagnosis/fit.py):
correct / detached / partial / appended (a clause added to the source). Pools: hallucinated pieces
= pieces of partial translations (after the cut = 1, before = 0) and of correct ones (0), </s> left
out; omitted pieces = source pieces of the appended cases, special pieces left out. Each piece row
again as ", flaggable words": only the pieces of words a flag may cover (scores.flaggable_pieces:
punctuation, which no flag covers by design, left out), and the column "perfect word scores": the
all-pieces row's ceiling, each flaggable word scored by its label and the rest 0. Higher score =
more suspicious for every signal.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformer.training.data import read_split, resolve_data_dir  # noqa: E402
from transformer.diagnosis.scores import diagnose_items, flaggable_pieces  # noqa: E402
from transformer.diagnosis.fit import FIT_FROM, dev_cases  # noqa: E402
from transformer.diagnosis.own import OWN_FIT, OWN_JUDGE, evaluate_own, own_cases  # noqa: E402
from transformer.diagnosis.protocol import evaluate, roc_auc  # noqa: E402
from transformer.diagnosis.signals import make_item  # noqa: E402
from transformer.translator import Translator  # noqa: E402

INSERTED = ["Kubernetes", "photosynthesis", "ALERT", "xylophone", "Zürich", "hashtag", "quantum", "Bitcoin"]


def wass_to_unif(cross: np.ndarray) -> float:
    """Guerreiro et al.: W1 distance of last-layer cross-attention (mean over heads) to uniform,
    positions scaled to [0, 1], mean over steps. cross: (H, T, S)."""
    a = cross.mean(0)
    S = a.shape[1]
    u = np.full(S, 1.0 / S)
    return float(np.mean([np.abs(np.cumsum(row) - np.cumsum(u)).sum() / max(S - 1, 1) for row in a]))


def run_model(path: str, data_dir, n: int, alti: bool, bf16: bool = False):
    tr = Translator.load(path)
    sources = read_split(data_dir, "val", tr.source_lang)[:n]
    every = dev_cases(tr, data_dir, 0, n, seed=0)
    started = time.perf_counter()
    every_diagnosis = diagnose_items(tr, [c.item for c in every], bf16=bf16)
    seconds = time.perf_counter() - started
    realistic = evaluate(every, every_diagnosis, set(tr.engine.special_ids))
    synthetic = [(c, d) for c, d in zip(every, every_diagnosis) if c.kind in ("correct", "detached", "partial", "appended")]
    cs, dgs = [c for c, _ in synthetic], [d for _, d in synthetic]
    extra = []
    for c in cs:
        if not alti:
            extra.append(None)
            continue
        out = tr.translate(c.source, target=list(c.item.output_pieces), capture=True, explain=True, top_k=0)
        ex = out.explanation
        extra.append(dict(share=ex.source_share, coverage=ex.source_contribution.sum(0),
                          wass=wass_to_unif(out.attention.cross[-1])))
    special = set(tr.engine.special_ids)
    by = {k: [(c, d, e) for c, d, e in zip(cs, dgs, extra) if c.kind == k] for k in ("correct", "detached", "partial", "appended")}
    sentence_signals = {
        "log p": lambda c, d, e: -float(d.signals["log_p"].mean()),
        "contrastive": lambda c, d, e: -float(d.signals["pmi"].mean()),
        "ALTI+": lambda c, d, e: -float(e["share"].mean()) if e else np.nan,
        "Wass-to-Unif": lambda c, d, e: e["wass"] if e else np.nan,
        "combination": lambda c, d, e: d.sentence_score}
    table = {}
    for row, bad in (("detached vs correct", "detached"), ("partial vs correct", "partial")):
        for name, f in sentence_signals.items():
            scores = [f(*x) for x in by["correct"]] + [f(*x) for x in by[bad]]
            labels = [0] * len(by["correct"]) + [1] * len(by[bad])
            table[(row, name)] = np.nan if np.isnan(scores).any() else roc_auc(scores, labels)
    piece_signals = {"log p": lambda d, e: -d.signals["log_p"], "contrastive": lambda d, e: -d.signals["pmi"],
                     "ALTI+": lambda d, e: -e["share"] if e else None,
                     "combination": lambda d, e: d.hallucination}
    # Each piece row twice: over every non-special piece (the goal's row), and over the pieces of
    # words a flag may cover (flaggable_pieces: punctuation, never flagged by design, left out); and
    # the all-pieces row's ceiling, a scorer that gives each flaggable word its label and 0 elsewhere.
    piece_rows = (("hallucinated pieces", by["correct"] + by["partial"], "output", piece_signals),
                  ("omitted pieces", by["appended"], "source", {
                      "contrastive": lambda d, e: -d.signals["deletion_drop"],
                      "ALTI+": lambda d, e: -e["coverage"] if e else None,
                      "combination": lambda d, e: d.omission}))
    for row, cases_, side, signals_ in piece_rows:
        flaggable_of = [flaggable_pieces(c.item, special, tr.source_lang, tr.target_lang)[0 if side == "output" else 1] for c, _, _ in cases_]
        for only_flaggable in (False, True):
            name_row = row + (", flaggable words" if only_flaggable else "")
            for name, f in {**signals_, "perfect word scores": None}.items():
                if only_flaggable and f is None:
                    continue
                scores, labels = [], []
                for (c, d, e), flaggable in zip(cases_, flaggable_of):
                    ids = c.item.output_ids if side == "output" else c.item.source_ids
                    truth = c.piece_labels if side == "output" else c.source_labels
                    v = np.where(flaggable, truth, -1.0) if f is None else f(d, e)
                    if v is None:
                        break
                    keep = [j for j, i in enumerate(ids) if i not in special and (flaggable[j] or not only_flaggable)]
                    scores += list(np.asarray(v)[keep])
                    labels += list(truth[keep])
                table[(name_row, name)] = roc_auc(scores, labels) if scores else np.nan
    return tr, sources, table, realistic, len(every) / seconds


def natural(tr, sources: list[str], seed: int = 0):
    """Lee et al. 2019: one inserted word at the start; hallucinated = the output shares < 20% of
    its words with the clean output (Jaccard). Returns (found, total, AUC of sentence_score)."""
    rng = random.Random(seed)
    perturbed = [f"{rng.choice(INSERTED)} {s}" for s in sources]
    clean, noisy = tr.translate_batch(sources), tr.translate_batch(perturbed)
    labels = []
    for a, b in zip(clean, noisy):
        wa, wb = set(a.lower().split()), set(b.lower().split())
        labels.append(int(len(wa & wb) / max(len(wa | wb), 1) < 0.2))
    items = [make_item(tr, s, o if o.strip() else ".") for s, o in zip(perturbed, noisy)]
    scores = [d.sentence_score for d in diagnose_items(tr, items)]
    flagged = sum(1 for s, l in zip(scores, labels) if l and s >= 0.5)
    return sum(labels), len(labels), flagged, roc_auc(scores, labels)


def speed(tr, sources: list[str], repeats: int = 15):
    """diagnose=True vs translate(capture=True), side by side, on a sentence of ~20 output pieces."""
    lengths = [(abs(len(tr.translate(s, capture=False, top_k=0).output_ids) - 20), s) for s in sources[:60]]
    text = min(lengths)[1]
    base, diag = [], []
    for _ in range(repeats):
        t = time.perf_counter(); out = tr.translate(text, capture=True); base.append(time.perf_counter() - t)
        t = time.perf_counter(); tr.translate(text, capture=True, diagnose=True); diag.append(time.perf_counter() - t)
    b, d = statistics.median(base), statistics.median(diag)
    return len(out.output_ids), b, d


OWN_SIGNALS = {"log p": ("output", -1.0, "log_p"), "entropy": ("output", 1.0, "entropy"),
               "reverse support share": ("output", -1.0, "reverse_support_share"),
               "rebuild": ("source", -1.0, "rebuild")}


ALL_ROWS = range(0, 10 ** 9)     # every row of a label set


def own_table(tr, data_dir, pairs: range = ALL_ROWS, label_set: str = OWN_JUDGE) -> dict:
    """The own-translation protocol (transformer/diagnosis/own.py) on the typed set (OWN_JUDGE: never
    fitted on) or on val[pairs] (fitted on): the model's own greedy translations, labelled by two
    annotators; judged with the free lines (what the app does) and, for comparison, as if they were given
    translations (the forced-reference lines alone)."""
    sources = read_split(data_dir, "val", tr.source_lang) if label_set == "val" else None
    cases = own_cases(tr, sources, f"{tr.source_lang}-{tr.target_lang}", pairs.start, pairs.stop, label_set)
    if not cases:
        raise SystemExit(f"no labelled own translation of {label_set} {pairs.start}-{pairs.stop - 1} in "
                         "benchmarks/own_translations/ yet")
    now = tr.translate_batch([c.source for c in cases])
    same = [c for c, o in zip(cases, now) if o == c.output]          # the labels describe these outputs
    started = time.perf_counter()
    free = diagnose_items(tr, [c.item for c in same])
    seconds = time.perf_counter() - started
    given_items = [make_item(tr, c.source, c.output) for c in same]
    given = diagnose_items(tr, given_items)
    signals = {name: (side, sign) for name, (side, sign, _) in OWN_SIGNALS.items()}
    table = evaluate_own(same, [_renamed(d) for d in free], tr.engine.special_ids, signals)
    as_given = evaluate_own(same, given, tr.engine.special_ids)
    for key, value in as_given.items():
        if key[0] in ("auc", "rate") and "(hand-labelled)" not in key[1]:
            table[key[:2] + ("as a given translation",) if key[0] == "auc" else ("rate_given", key[1])] = value
    # detached: another sentence's own translation given as this source's (free) against the own ones
    others = []
    for n, c in enumerate(same):
        item = make_item(tr, c.source, same[(n + 1) % len(same)].output)
        item.free = True
        others.append(item)
    swapped = diagnose_items(tr, others)
    table[("auc", "another sentence's own translation vs own ones", "sentence score")] = roc_auc(
        [d.sentence_score for d in free] + [d.sentence_score for d in swapped], [0] * len(free) + [1] * len(swapped))
    table[("count", "labelled outputs the model still writes")] = f"{len(same)} of {len(cases)}"
    table[("speed", "free diagnosis")] = len(same) / seconds
    return table


def _renamed(d):
    """A Diagnosis whose signals carry OWN_SIGNALS' names (the table reads them by name)."""
    d.signals = {**d.signals, **{name: d.signals[key] for name, (_, _, key) in OWN_SIGNALS.items() if key in d.signals}}
    return d


def print_own(tables: list[dict], args) -> None:
    names = " / ".join(Path(m).name for m in args.models)
    pairs = args.own_pairs
    fitted = args.own_set == "val" and pairs.start < OWN_FIT.stop and OWN_FIT.start < pairs.stop
    what = (f"val {pairs.start}-{pairs.stop - 1}" if args.own_set == "val" else
            "the typed sentences (written as a visitor types them, by people told not to read Multi30k)")
    print(f"\nThe models' own greedy translations of {what} "
          f"({'USED FOR FITTING the free lines' if fitted else 'never fitted on'}), hand-labelled by two annotators "
          f"(benchmarks/own_translations/; {names}; outputs with an error / acceptable / detached: "
          + "; ".join(str(t[("count", "outputs: error / acceptable / detached")]) for t in tables) + "; "
          + "; ".join(t[("count", "labelled outputs the model still writes")] for t in tables) + " labelled outputs are what the model writes today)\n")
    columns = ["combination", *OWN_SIGNALS, "as a given translation", "sentence score"]
    print("| ROC AUC | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in dict.fromkeys(k[1] for k in tables[0] if k[0] == "auc"):
        cells = [" / ".join(f"{t[('auc', row, n)]:.3f}" for t in tables) if ("auc", row, n) in tables[0] else ""
                 for n in columns]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("\n| flags | free lines (what the app does) | as a given translation |\n|---|---|---|")
    for key in tables[0]:
        if key[0] == "rate":
            given = " / ".join(f"{t[('rate_given', key[1])]:.0%}" for t in tables) if ("rate_given", key[1]) in tables[0] else ""
            print(f"| {key[1]} | " + " / ".join(f"{t[key]:.0%}" for t in tables) + f" | {given} |")
    print("free diagnosis: " + " / ".join(f"{t[('speed', 'free diagnosis')]:.1f}" for t in tables) + " sentences/s (batched)")


def print_realistic(realistic: list[dict], args) -> None:
    """The realistic-error table: combination beside each raw signal, then the flag rates."""
    names = " / ".join(Path(m).name for m in args.models)
    print(f"\nRealistic in-sentence errors, val pairs 0-{args.n - 1} ({names}); cases: "
          + "; ".join(str(r[("count", "cases")]) for r in realistic) + "\n")
    signals = ["combination", "deletion drop", "unmet demand", "insertion gain", "log p", "pmi", "lexicon gap",
               "expected translation", "reverse support"]
    print("| ROC AUC | " + " | ".join(signals) + " |")
    print("|---" * (len(signals) + 1) + "|")
    rows = list(dict.fromkeys(k[1] for k in realistic[0] if k[0] == "auc"))
    for row in rows:
        # a signal one model lacks (the reverse support beside de-en's weights) reads "-" there
        cells = [" / ".join(f"{r[('auc', row, n)]:.3f}" if ("auc", row, n) in r else "-" for r in realistic)
                 if any(("auc", row, n) in r for r in realistic) else "" for n in signals]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("\n| flags | " + names + " |\n|---|---|")
    for key in realistic[0]:
        if key[0] == "rate":
            print(f"| {key[1]} | " + " / ".join(f"{r[key]:.0%}" for r in realistic) + " |")
        elif key[0] == "count" and key[1] != "cases":
            print(f"| {key[1]} | " + " / ".join(str(r[key]) for r in realistic) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["pretrained/en-de", "pretrained/de-en"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n", type=int, default=300, help="val pairs per model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="diagnose under bfloat16 autocast (the CLI's --bf16)")
    parser.add_argument("--no-alti", action="store_true", help="skip the ALTI+ and Wass-to-Unif rows (slow)")
    parser.add_argument("--speed", action="store_true", help="only the speed ratio, on a ~20-piece val sentence")
    parser.add_argument("--own-only", action="store_true", help="only the own-translation table (issue 51)")
    parser.add_argument("--own-pairs", nargs=2, type=int, default=[OWN_FIT.start, OWN_FIT.stop],
                        metavar=("FROM", "TO"), help="with --own-set val: the val pairs [FROM, TO) (the free lines "
                        f"are fitted on {OWN_FIT.start}-{OWN_FIT.stop - 1})")
    parser.add_argument("--own-set", choices=["typed", "val"], default=OWN_JUDGE,
                        help="the own-translation table's sentences: the typed set (default; never fitted on: "
                        "benchmarks/own_translations/typed.*.jsonl), or Multi30k val (--own-pairs; fitted on)")
    args = parser.parse_args(argv)
    args.own_pairs = range(*args.own_pairs) if args.own_set == "val" else ALL_ROWS
    if args.n > FIT_FROM:
        parser.error(f"--n {args.n}: the sentence model was fitted on val pairs {FIT_FROM} onwards; "
                     f"the benchmark must stay within val[:{FIT_FROM}]")
    torch.set_num_threads(args.threads)
    data_dir = resolve_data_dir(args.data_dir)
    if args.speed:
        for path in args.models:
            tr = Translator.load(path)
            tokens, b, d = speed(tr, read_split(data_dir, "val", tr.source_lang)[:60])
            print(f"{path}: on a {tokens}-piece output translate(capture=True) {b * 1000:.1f} ms, with diagnose=True "
                  f"{d * 1000:.1f} ms, ratio {d / b:.2f} ({args.threads} threads)", flush=True)
        return 0
    own = [own_table(Translator.load(path), data_dir, args.own_pairs, args.own_set) for path in args.models]
    if args.own_only:
        print_own(own, args)
        return 0
    tables, realistic, notes = [], [], []
    for path in args.models:
        tr, sources, table, real, rate = run_model(path, data_dir, args.n, not args.no_alti, args.bf16)
        realistic.append(real)
        found, total, flagged, auc = natural(tr, sources)
        tokens, b, d = speed(tr, sources)
        tables.append(table)
        notes.append(f"{path}: forced diagnosis {rate:.1f} sentences/s (batched, {args.threads} threads); "
                     f"natural (inserted word): {found}/{total} hallucinated, {flagged} of them with sentence_score >= 0.5, "
                     f"AUC {auc:.3f}; speed on a {tokens}-piece output: translate(capture=True) {b * 1000:.1f} ms, "
                     f"with diagnose=True {d * 1000:.1f} ms, ratio {d / b:.2f}")
    names = ["log p", "contrastive", "ALTI+", "Wass-to-Unif", "combination", "perfect word scores"]
    rows = list(dict.fromkeys(k[0] for k in tables[0]))
    print(f"ROC AUC on Multi30k val, first {args.n} pairs ({' / '.join(Path(m).name for m in args.models)})\n")
    print("| | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for row in rows:
        cells = [" / ".join(f"{t[(row, n)]:.3f}" if not np.isnan(t[(row, n)]) else "–" for t in tables)
                 if (row, n) in tables[0] else "" for n in names]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("\nCombination minus the best single signal of its row (> 0 beats it):")
    for row in rows:
        margins = []
        for t in tables:
            singles = [t[(row, n)] for n in names[:-2] if (row, n) in t and not np.isnan(t[(row, n)])]
            margins.append(f"{t[(row, 'combination')] - max(singles):+.5f}")
        print(f"  {row}: {' / '.join(margins)}")
    print_realistic(realistic, args)
    print_own(own, args)
    print("\nlog p: Seq-Logprob (mean log p) for sentences, -log p per piece. contrastive: mean pmi = log p(y|x) - "
          "log p(y|null source) for sentences, -pmi per piece, and for source pieces -(fall of log p(translation) "
          "when the word is deleted). ALTI+: mean source share; per piece source share; per source piece coverage "
          "(total contribution received). Wass-to-Unif: last-layer cross-attention, mean over heads and steps.\n")
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
