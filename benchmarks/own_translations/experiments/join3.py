import pickle
import numpy as np
for m in ("en-de", "de-en"):
    F = pickle.load(open(f"runs/s27/feats.{m}.pkl", "rb")); F3 = pickle.load(open(f"runs/s27/feats3.{m}.pkl", "rb"))
    for f, f3 in zip(F[:500], F3):
        d = f3["drops"]
        for k, r in enumerate(f["out"]):
            r["_rmax"] = float(d[k].max()); r["_rneg"] = float(-d[k].min()); r["_rsum"] = float(d[k].sum())
            j = int(d[k].argmax()); r["_rshare"] = float(d[k].max() / (d[:, j].clip(min=0).sum() + 1e-6))
            r["_rpos"] = float(d[k].clip(min=0).sum())
    pickle.dump(F, open(f"runs/s27/feats.{m}.pkl", "wb"))
