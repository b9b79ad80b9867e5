"""MC-dropout surprisal spread and entropy per output piece, val 0-499 own translations."""
import json, sys, pickle, torch
import numpy as np
from transformer import Translator
from transformer.diagnosis.signals import make_item
from transformer.forced import forced_pass, chosen_log_probs
m = sys.argv[1]; K = 8
tr = Translator.load(f"pretrained/{m}", device="cpu")
rows = [json.loads(l) for l in open(f"runs/s27/val.{m}.greedy.jsonl")][:500]
items = [make_item(tr, r["source"], r["output"]) for r in rows]
def ent_reduce(batch):
    lp = batch.log_probs
    ent = -(lp.exp() * lp).sum(-1).cpu().numpy()
    return [e[:n] for e, n in zip(ent, batch.lengths)]
ent = forced_pass(tr, [(it.source_ids, it.fed_ids, it.output_ids) for it in items], ent_reduce)
torch.manual_seed(0)
tr.engine.model.train()
mc = forced_pass(tr, [(it.source_ids, it.fed_ids, it.output_ids) for it in items for _ in range(K)], chosen_log_probs)
tr.engine.model.eval()
out = []
for n, it in enumerate(items):
    s = np.stack(mc[n * K:(n + 1) * K])       # (K, T)
    out.append(dict(i=n, entropy=ent[n], mc_std=s.std(0), mc_mean=s.mean(0)))
pickle.dump(out, open(f"runs/s27/feats2.{m}.pkl", "wb"))
print("done")
