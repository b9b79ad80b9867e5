"""Per-piece reverse deletion drops for every flaggable output word, val 0-499."""
import json, sys, pickle
import numpy as np
from transformer import Translator
from transformer.diagnosis.signals import make_item, output_words, forced_passes
from transformer.diagnosis.reverse import reverse_for
m = sys.argv[1]
tr = Translator.load(f"pretrained/{m}", device="cpu"); rev = reverse_for(tr)
special = frozenset(tr.engine.special_ids)
V = [json.loads(l) for l in open(f"runs/s27/val.{m}.greedy.jsonl")][:500]
items = [make_item(tr, r["source"], r["output"]) for r in V]
rows, plan = [], []
for it in items:
    groups, on = output_words(it, len(it.output_ids), special)
    reads, writes = list(it.output_ids), list(it.source_ids)
    fed = [rev.engine.start_id] + writes[:-1]
    null = [i for i in reads if i in special] or reads[-1:]
    start = len(rows); rows.append((reads, fed, writes))
    for g in groups:
        gone = set(g); rows.append(([i for j, i in enumerate(reads) if j not in gone] or null, fed, writes))
    plan.append((start, groups))
P = forced_passes(rev, rows, None)
out = []
for it, (start, groups) in zip(items, plan):
    full = P[start][0]
    drops = np.stack([full - P[start + 1 + k][0] for k in range(len(groups))])   # (Wo, S)
    out.append(dict(full=full, drops=drops))
pickle.dump(out, open(f"runs/s27/feats3.{m}.pkl", "wb")); print("done")
