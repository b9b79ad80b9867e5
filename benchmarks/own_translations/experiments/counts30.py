"""Exact counts behind bench_diagnosis --own-only's rates (the rates print as whole percents), and the acceptable
outputs that get a flag: PYTHONPATH=. python benchmarks/own_translations/experiments/counts30.py en-de 500 800
(`... en-de 0 999 typed`: the typed set, session 31)"""
import sys

import numpy as np
import torch

from transformer import Translator
from transformer.diagnosis.own import _word_rows, own_cases
from transformer.diagnosis.scores import diagnose_items
from transformer.training.data import read_split

torch.set_num_threads(1)
m, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tr = Translator.load(f"pretrained/{m}")
label_set = sys.argv[4] if len(sys.argv) > 4 else "val"
sources = read_split("../shared/data/multi30k", "val", tr.source_lang) if label_set == "val" else None
cases = own_cases(tr, sources, m, lo, hi, label_set)
ds = diagnose_items(tr, [c.item for c in cases])
special = frozenset(tr.engine.special_ids)
hits = total = 0
for side, name in (("source", "left-out words flagged"), ("output", "unsupported words flagged")):
    rows = [r for c, d in zip(cases, ds) for r in _word_rows(c, d, side, special)]
    s, y = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    print(f"{m} {lo}-{hi - 1} {name}: {int(((s >= 0.5) & (y == 1)).sum())} / {int((y == 1).sum())}")
    hits += int(((s >= 0.5) & (y == 1)).sum()); total += int((s >= 0.5).sum())
print(f"{m} {lo}-{hi - 1} precision: {hits} / {total}")
bad = [bool(d.flags) for c, d in zip(cases, ds) if c.bad]
ok = [(c, d) for c, d in zip(cases, ds) if c.ok]
print(f"{m} {lo}-{hi - 1} outputs with an error flagged: {sum(bad)} / {len(bad)}; acceptable flagged: "
      f"{sum(bool(d.flags) for _, d in ok)} / {len(ok)}")
for c, d in ok:
    if d.flags:
        print(f"  {label_set} {c.pair}: {c.source}  ->  {c.output}  |  {d.summary}")
