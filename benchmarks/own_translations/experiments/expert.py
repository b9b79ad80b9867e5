import pickle, numpy as np, sys
from transformer.diagnosis import fit_free as ff
for m in ("en-de", "de-en"):
    cases, feats = pickle.load(open(f"runs/s27/ownfeats.{m}.pkl", "rb"))
    for lo, hi, name in ((200, 500, "fit"), (0, 200, "test")):
        idx = [k for k, c in enumerate(cases) if lo <= c.pair < hi]
        x, y, w = ff.word_rows([cases[k] for k in idx], [feats[k] for k in idx], "source")
        ok = np.array([cases[idx[k]].ok for k in w])
        for t in (8, 9, 10, 11, 12):
            on = x[:, 0] >= t
            print(m, name, f"rebuild min < -{t}: {on.sum()} words, precision {y[on].mean():.2f}, recall {on[y == 1].mean():.2f}, in ok outputs {on[ok].sum()}")
