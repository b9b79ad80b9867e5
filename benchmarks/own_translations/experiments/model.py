import json, pickle, sys
import numpy as np
sys.path.insert(0, "benchmarks/own_translations/experiments")
from judge import rows
from transformer.diagnosis.protocol import roc_auc
from transformer.diagnosis.scores import OUTPUT_FEATURES, SOURCE_FEATURES
from transformer.diagnosis.fit import fit_monotone

def ocols(out, F2):
    c = {}
    X = np.array([r["x"] for _, _, r in out])
    for k, n in enumerate(OUTPUT_FEATURES): c[n] = X[:, k]
    c["rev_full"] = -np.array([r["rev_full"] for _, _, r in out])
    c["unknown"] = np.array([r["unknown"] for _, _, r in out])
    c["repeat"] = np.array([r["repeat"] for _, _, r in out])
    c["run3"] = np.array([float(r["maxrun"] >= 3) for _, _, r in out])
    c["min_pmi"] = -np.array([min(r["pmi"]) for _, _, r in out])
    mc, en = [], []
    for i, _, r in out:

        # pieces of this word: find by log_p match is fragile: store group via first piece index of x? use log_p values
        mc.append(r.get("_mc", 0.0)); en.append(r.get("_ent", 0.0))
    c["mc_std"] = np.array(mc); c["entropy"] = np.array(en)
    return c

def scols(src):
    c = {}
    X = np.array([r["x"] for _, _, r in src])
    for k, n in enumerate(SOURCE_FEATURES): c[n] = X[:, k]
    for n in ("rebuild", "rebuild_mean", "rebuild_pmi", "rebuild_sum"):
        c[n] = -np.array([r[n] for _, _, r in src])
    return c

def ocols2(out):
    c = ocols(out, None)
    c["mcmean"] = np.array([r.get("_mcmean", 0.0) for _, _, r in out])
    return c

def split(rows_, lo, hi):
    return [x for x in rows_ if lo <= x[0] < hi]

def evaluate(m, onames, snames):
    src, out, sent = rows(m, "hand", 0, 500)
    res = {}
    for side, data, cols, names in (("out", out, ocols2, onames), ("src", src, scols, snames)):
        tr_ = [x for x in data if x[0] >= 200]; te = [x for x in data if x[0] < 200]
        Ctr, Cte = cols(tr_), cols(te)
        ytr = np.array([y for _, y, _ in tr_]); yte = np.array([y for _, y, _ in te])
        Xtr = np.stack([Ctr[n] for n in names], 1); Xte = np.stack([Cte[n] for n in names], 1)
        model = fit_monotone(Xtr, ytr)
        z = (Xte - np.array(model["mean"])) / np.array(model["std"]) @ np.array(model["coef"]) + model["bias"]
        res[side] = (roc_auc(z, yte), {n: round(roc_auc(Cte[n], yte), 3) for n in names}, dict(zip(names, np.round(model["coef"], 2))))
    return res

if __name__ == "__main__":
    O = ["neg_log_p", "neg_mean_log_p", "rev_full", "mc_std", "mcmean", "entropy", "unknown", "repeat", "run3", "unmet_here", "neg_pmi", "lexicon_gap", "expected_translation", "min_pmi"]
    S = ["rebuild", "rebuild_sum", "rebuild_mean", "rebuild_pmi", "lexicon_gap", "neg_drop", "neg_drop_max", "unmet_sum", "unmet_max"]
    for m in ("en-de", "de-en"):
        r = evaluate(m, O, S)
        for side in ("out", "src"):
            print(m, side, "combined %.3f" % r[side][0]); print("   single", r[side][1]); print("   coef", r[side][2])
