import sys; sys.path.insert(0, "benchmarks/own_translations/experiments")
import numpy as np
from judge import rows
for m in ("en-de", "de-en"):
    hs, ho, hsent = rows(m, "hand", 0, 500); ss, so, ssent = rows(m, "silver", 0, 500)
    def key(data): return {(i, r["text"], r["word"]): y for i, y, r in data}
    for side, h, s in (("omitted", hs, ss), ("wrong", ho, so)):
        H, S = key(h), key(s)
        common = [k for k in H if k in S]
        tp = sum(H[k] and S[k] for k in common); fp = sum((not H[k]) and S[k] for k in common); fn = sum(H[k] and not S[k] for k in common)
        print(m, side, "silver precision %.2f recall %.2f (words %d)" % (tp / max(1, tp + fp), tp / max(1, tp + fn), len(common)))
    hok = {s["i"]: s["ok"] for s in hsent if s["ok"] or s["bad"]}; sok = {s["i"]: s["ok"] for s in ssent}
    agree = np.mean([hok[i] == sok[i] for i in hok]); print(m, "ok agreement silver vs hand %.2f" % agree)
