"""Session 28: cross-validation of the free lines within val 200-499 only (issue 51's two missed cells).

Reads runs/s28/ownfeats.{m}.pkl (runs/s28/cache.py: the current code's free features of val 0-499) and
never touches val 0-199 unless --heldout is given (one look per shipped candidate). Per candidate: 5 folds
(pair % 5) x REPEATS shuffles of the fold assignment; in each, the word models and the lines (and the
rebuild expert) are fitted on four folds as fit_free does, and the fifth is judged as bench_diagnosis
--own-only judges; the rates are pooled over the held-out folds.
"""
from __future__ import annotations

import pickle
import sys

import numpy as np

from transformer.diagnosis import fit_free as ff
from transformer.diagnosis.fit import fit_monotone
from transformer.diagnosis.free import FREE_OUTPUT_FEATURES, FREE_SOURCE_FEATURES, written_wrong

GRID = np.arange(-4.0, 4.01, 0.1)


def load(m: str):
    return pickle.load(open(f"runs/s28/ownfeats.{m}.pkl", "rb"))


class Table:
    """Per side, every flaggable word: its feature row, label (1 / 0 / -1) and case index; per case: ok, bad,
    written wrong (a flag whatever the lines)."""

    def __init__(self, cases, feats, extra=None):
        self.cases, self.n = cases, len(cases)
        self.ok = np.array([c.ok for c in cases]); self.bad = np.array([c.bad for c in cases])
        self.pair = np.array([c.pair for c in cases])
        self.side = {}
        ww_case, ww_lab = np.zeros(len(cases), bool), []
        for side in ("output", "source"):
            xs, ys, cs, ws = [], [], [], []
            for n, (c, f) in enumerate(zip(cases, feats)):
                labels = c.output_labels if side == "output" else c.source_labels
                rows = np.asarray(f[side])
                if extra is not None:
                    rows = extra(side, c, f, rows)
                for w, (g, on) in enumerate(zip(f[f"{side}_groups"], f[f"{side}_flaggable"])):
                    if on:
                        xs.append(rows[w]); ys.append(labels[g[0]]); cs.append(n); ws.append(w)
            self.side[side] = (np.array(xs), np.array(ys), np.array(cs), np.array(ws))
        for n, (c, f) in enumerate(zip(cases, feats)):
            why = written_wrong(c.item.output_pieces, f["output_groups"])
            for g, r in zip(f["output_groups"], why):
                if r:
                    ww_case[n] = True
                    ww_lab.append((n, g[0], c.output_labels[g[0]]))
        self.ww_case, self.ww_lab = ww_case, ww_lab
        _, _, c, w = self.side["output"]
        wrong = {(n, k) for n, f in enumerate(feats) for k, r in
                 enumerate(written_wrong(cases[n].item.output_pieces, f["output_groups"])) if r}
        self.ww_word = np.array([(a, b) in wrong for a, b in zip(c, w)], dtype=bool)

    def logit(self, model, side, cols):
        x = self.side[side][0][:, cols]
        return ((x - model["mean"]) / model["std"]) @ model["coef"] + model["bias"]


def evaluate(t: Table, mask, z_out, z_src, line_out, line_src, expert=None):
    """Rates on the cases in mask (bool per case) given each side's word logits and lines."""
    res = {}
    flagged = t.ww_case.copy()
    hits = total = 0
    counts = {}
    for side, z, line in (("output", z_out, line_out), ("source", z_src, line_src)):
        x, y, c, _ = t.side[side]
        on = z >= line
        if side == "source" and expert is not None:
            on = on | (x[:, 0] >= expert)
        if side == "output":                       # written wrong words are flags too
            on = on | t.ww_word
        sel = mask[c]
        np.logical_or.at(flagged, c[on], True)
        lab = y[sel]; o = on[sel]
        res[side + " recall"] = float(o[lab == 1].mean()) if (lab == 1).any() else np.nan
        counts[side + " recall"] = (int(o[lab == 1].sum()), int((lab == 1).sum()))
        hits += int((o & (lab == 1)).sum()); total += int((o & (lab >= 0)).sum())
    res["precision"] = hits / total if total else np.nan
    res["ok flagged"] = float(flagged[mask & t.ok].mean())
    res["bad flagged"] = float(flagged[mask & t.bad].mean())
    res["n_ok"] = int((mask & t.ok).sum())
    counts["precision"] = (hits, total)
    counts["ok flagged"] = (int(flagged[mask & t.ok].sum()), int((mask & t.ok).sum()))
    counts["bad flagged"] = (int(flagged[mask & t.bad].sum()), int((mask & t.bad).sum()))
    res["counts"] = counts
    return res


def choose(t: Table, mask, z_out, z_src, fa=0.08, prec=0.8, key="minsum", fa_out=None, fa_src=None):
    """fit_free.choose_lines on the cases in mask (fast: per case top logit per side)."""
    tops = {}
    for side, z in (("output", z_out), ("source", z_src)):
        x, y, c, _ = t.side[side]
        top = np.full(t.n, -np.inf)
        np.maximum.at(top, c, z)
        tops[side] = top
    okm = mask & t.ok
    xo, yo, co, _ = t.side["output"]; xs, ys, cs, _ = t.side["source"]
    so, ss = mask[co], mask[cs]
    zo, lo = z_out[so], yo[so]; zs, ls = z_src[ss], ys[ss]
    best, choice = None, (0.0, 0.0)
    for a in GRID:
        fo = tops["output"] >= a
        if fa_out is not None and fo[okm].mean() > fa_out:
            continue
        on_o = zo >= a
        h_o, t_o, r_o = int((on_o & (lo == 1)).sum()), int((on_o & (lo >= 0)).sum()), on_o[lo == 1].mean()
        for b in GRID:
            fs = tops["source"] >= b
            if fa_src is not None and fs[okm].mean() > fa_src:
                continue
            alarms = (fo | fs | t.ww_case)[okm].mean() if key != "orig" else (fo | fs)[okm].mean()
            if alarms > fa:
                continue
            on_s = zs >= b
            h, tot = h_o + int((on_s & (ls == 1)).sum()), t_o + int((on_s & (ls >= 0)).sum())
            p = h / tot if tot else 1.0
            if p < prec:
                continue
            r_s = on_s[ls == 1].mean()
            k = min(r_o, r_s) + 0.1 * (r_o + r_s)
            if best is None or k > best:
                best, choice = k, (float(a), float(b))
    return choice


def expert_depth(t, mask, z_out, z_src, a, b, prec=0.8, share=0.01):
    base = evaluate(t, mask, z_out, z_src, a, b)
    for nats in ff.REBUILD_GRID:
        r = evaluate(t, mask, z_out, z_src, a, b, expert=nats)
        if r["ok flagged"] <= base["ok flagged"] + share + 1e-12 and r["precision"] >= prec:
            return nats
    return None


def run(t: Table, out_cols, src_cols, repeats=3, fa=0.08, prec=0.8, use_expert=True, fa_out=None, fa_src=None,
        train_mask=None, test_mask=None, verbose=False):
    """Pooled held-out rates over 5 folds x repeats within t's fit pairs (pair >= 200), or, with masks, one fit
    on train_mask judged on test_mask."""
    fit = t.pair >= 200
    splits = []
    if train_mask is not None:
        splits.append((train_mask, test_mask))
    else:
        for r in range(repeats):
            perm = np.random.RandomState(r).permutation(500)
            fold = perm[t.pair] % 5
            for k in range(5):
                splits.append((fit & (fold != k), fit & (fold == k)))
    pooled, zs = [], {"output": [], "source": []}
    for tr_m, te_m in splits:
        models, z = {}, {}
        for side, cols in (("output", out_cols), ("source", src_cols)):
            x, y, c, _ = t.side[side]
            sel = tr_m[c] & (y >= 0)
            mdl = fit_monotone(x[sel][:, cols], y[sel])
            models[side] = {k: np.asarray(v) for k, v in mdl.items()}
            z[side] = t.logit(models[side], side, cols)
        a, b = choose(t, tr_m, z["output"], z["source"], fa, prec, fa_out=fa_out, fa_src=fa_src)
        e = expert_depth(t, tr_m, z["output"], z["source"], a, b, prec) if use_expert else None
        res = evaluate(t, te_m, z["output"], z["source"], a, b, e)
        res.update(line_out=a, line_src=b, expert=e)
        pooled.append(res)
        for side, line in (("output", a), ("source", b)):
            x, y, c, _ = t.side[side]
            sel = te_m[c] & (y >= 0)
            zs[side].append((z[side][sel] - line, y[sel]))
    # pooled: weight rates by counts (approximately: mean over folds)
    keys = ["ok flagged", "bad flagged", "output recall", "source recall", "precision"]
    out = {k: sum(p["counts"][k][0] for p in pooled) / max(1, sum(p["counts"][k][1] for p in pooled)) for k in keys}
    for side in ("output", "source"):
        s = np.concatenate([a for a, _ in zs[side]]); y = np.concatenate([b for _, b in zs[side]])
        out[side + " auc"] = auc(s, y)
    out["folds"] = pooled
    return out


def auc(s, y):
    from transformer.diagnosis.protocol import roc_auc
    return float(roc_auc(list(s), y))


def fmt(r):
    return (f"ok flagged {r['ok flagged']:.3f}  bad {r['bad flagged']:.3f}  unsupported {r['output recall']:.3f}  "
            f"left out {r['source recall']:.3f}  precision {r['precision']:.3f}  auc {r['output auc']:.3f}/{r['source auc']:.3f}")


if __name__ == "__main__":
    for m in sys.argv[1:] or ["en-de", "de-en"]:
        cases, feats = load(m)
        t = Table(cases, feats)
        r = run(t, list(range(len(FREE_OUTPUT_FEATURES))), list(range(len(FREE_SOURCE_FEATURES))))
        print(m, "baseline CV:", fmt(r))
