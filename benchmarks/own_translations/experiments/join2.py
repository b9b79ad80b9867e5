import json, pickle, sys
import numpy as np
from transformer import Translator
from transformer.diagnosis.signals import make_item, output_words
for m in ("en-de", "de-en"):
    tr = Translator.load(f"pretrained/{m}", device="cpu")
    special = frozenset(tr.engine.special_ids)
    F = pickle.load(open(f"runs/s27/feats.{m}.pkl", "rb"))
    F2 = pickle.load(open(f"runs/s27/feats2.{m}.pkl", "rb"))
    V = [json.loads(l) for l in open(f"runs/s27/val.{m}.greedy.jsonl")]
    for f, f2 in zip(F[:500], F2):
        it = make_item(tr, V[f["i"]]["source"], V[f["i"]]["output"])
        groups, _ = output_words(it, len(it.output_ids), special)
        assert len(groups) == len(f["out"])
        for g, r in zip(groups, f["out"]):
            r["_mc"] = float(f2["mc_std"][g].max()); r["_ent"] = float(f2["entropy"][g[0]])
            r["_mcmean"] = float(-f2["mc_mean"][g].min())
            r["_pieces"] = g
    pickle.dump(F, open(f"runs/s27/feats.{m}.pkl", "wb"))
print("ok")
