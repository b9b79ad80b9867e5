import pickle, sys, os, json
import numpy as np
from transformer import Translator
from transformer.training.data import read_split
from transformer.diagnosis import fit_free as ff
from transformer.diagnosis.own import own_cases
from transformer.diagnosis.reverse import reverse_for
from transformer.diagnosis.fit import fit_monotone
m = sys.argv[1]
tr = Translator.load(f"pretrained/{m}"); rev = reverse_for(tr)
src = read_split("../shared/data/multi30k", "val", tr.source_lang)
cache = f"runs/s27/ownfeats.{m}.pkl"
if os.path.exists(cache):
    cases, feats = pickle.load(open(cache, "rb"))
else:
    cases = own_cases(tr, src, m, 0, 500); feats = ff.featurise(tr, rev, [c.item for c in cases])
    pickle.dump((cases, feats), open(cache, "wb"))
fit = [k for k, c in enumerate(cases) if c.pair >= 200]; test = [k for k, c in enumerate(cases) if c.pair < 200]
C = lambda idx: [cases[k] for k in idx]; F = lambda idx: [feats[k] for k in idx]
models = {}
for side, names in (("output", ff.FREE_OUTPUT_FEATURES), ("source", ff.FREE_SOURCE_FEATURES)):
    x, y, _ = ff.word_rows(C(fit), F(fit), side); models[side] = fit_monotone(x, y)
for fa in (0.06, 0.08, 0.10):
    for prec in (0.75, 0.8):
        ff.FREE_FALSE_ALARMS, ff.FREE_PRECISION = fa, prec
        a, b, found = ff.choose_lines(C(fit), F(fit), models)
        ff.FREE_FALSE_ALARMS, ff.FREE_PRECISION = 1.0, 0.0
        # evaluate on test with fixed lines
        ok = np.array([c.ok for c in C(test)]); bad = np.array([c.bad for c in C(test)])
        res = {}
        flagged = np.zeros(len(test), bool); hits = tot = 0; rec = []
        for side, line in (("output", a), ("source", b)):
            z = []
            for f in F(test):
                xs = np.asarray(f[side])[np.asarray(f[f"{side}_flaggable"], bool)]
                z.append(ff._logit(models[side], xs).max() if len(xs) else -np.inf)
            flagged |= np.array(z) >= line
            x, y, w = ff.word_rows(C(test), F(test), side); zz = ff._logit(models[side], x) >= line
            hits += int((zz & (y == 1)).sum()); tot += int(zz.sum()); rec.append(zz[y == 1].mean())
        print(f"{m} fa<={fa} prec>={prec}: fit {json.dumps({k: round(v, 3) for k, v in found.items()})} | test ok flagged {flagged[ok].mean():.3f} bad flagged {flagged[bad].mean():.3f} unsupported {rec[0]:.3f} omitted {rec[1]:.3f} precision {hits / max(tot, 1):.3f}")
