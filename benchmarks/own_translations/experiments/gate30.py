"""How well sentence gates of several column sets tell outputs with an error from acceptable ones, held out
(5 folds x 2 by sentence within val 0-499; word models refitted per fold). Not shipped code."""
import sys
import numpy as np
import cv30
from transformer.diagnosis import fit_free as ff
from transformer.diagnosis.fit import fit_monotone
from transformer.diagnosis.free_lines import Words
from transformer.diagnosis.protocol import roc_auc
from transformer.diagnosis.scores import _logit


def extra(words, feats):
    out = []
    for n, f in enumerate(feats):
        zo = words.z["output"][words.case["output"] == n]; zs = words.z["source"][words.case["source"] == n]
        both = np.sort(np.concatenate([zo, zs]))[::-1]
        second = both[1] if len(both) > 1 else -12.0
        x = np.asarray(f["output"]); on = np.asarray(f["output_flaggable"], bool)
        out.append([max(second, -12.0), float((both > 0).sum()), float(x[on, 0].max(initial=0)), float(x[on, 1].max(initial=0)),
                    float(x[on, 5].max(initial=-1)), float(len(both))])
    return np.array(out)


m = sys.argv[1]
cases, feats, swapped = cv30.load(m)
pairs = np.array([c.pair for c in cases])
sets = {"shipped5": [0, 1, 2, 3, 4], "max only": [0, 1], "+expected": [0, 1, 2], "5+second+count": [0, 1, 2, 3, 4, 5, 6],
        "5+raw maxima": [0, 1, 2, 3, 4, 7, 8, 9], "all": list(range(11))}
res = {k: [] for k in sets}
for r in range(2):
    fold = np.random.RandomState(100 + r).permutation(500)[pairs] % 5
    scores = {k: np.zeros(len(cases)) for k in sets}
    for k in range(5):
        tr = fold != k
        models = ff.word_models([c for c, t in zip(cases, tr) if t], [f for f, t in zip(feats, tr) if t])
        w = Words(cases, feats, models)
        X = np.hstack([w.gate_x, extra(w, feats)])
        keep = tr & (w.ok | w.bad)
        for name, cols in sets.items():
            g = fit_monotone(X[keep][:, cols], w.bad[keep].astype(float))
            scores[name][~tr] = _logit(g, X[~tr][:, cols])
    lab = np.array([c.ok or c.bad for c in cases])
    for name in sets:
        res[name].append(roc_auc(list(scores[name][lab]), np.array([c.bad for c in cases])[lab]))
for name in sets:
    print(m, name, np.round(res[name], 3), round(float(np.mean(res[name])), 3))
