"""Choosing the free lines (fit_free.py): every flaggable word of some labelled own translations under the word
models, the sentence gate, and the joint choice of the output line, the source line and the gate's line.

A word is flagged where min(its logit - its side's line + shift, cap) >= 0, (shift, cap) the sentence gate's
(scores.free_gate): with a "hard" gate a sentence whose gate logit G is under the gate's line g gets no flag
(cap G - g < 0); with a slope s, its words' logits fall by s * (g - G). A source word's logit is the larger of
its word model's and the rebuild expert's, 2 * (-rebuild - depth).
"""
from __future__ import annotations

import numpy as np

from .fit import fit_monotone
from .free import FREE_GATE_FEATURES, FREE_SOURCE_FEATURES, gate_features, written_wrong
from .scores import FREE_FEATURES, _columns, _logit

FREE_PRECISION = 0.8            # flags on a labelled error, at least (goal 0.75)
LINE_GRID = np.arange(-4.0, 4.01, 0.1)        # word logits tried as lines
GATE = "hard"                   # None: no gate; "hard"; or a slope (float)
GATE_GRID = np.arange(-4.0, 2.01, 0.25)       # gate logits tried as its line (-4: nearly always open)
# A source word the reverse model can hardly write back at all is left out more often than the word model
# says where the lexicon knows no translation for it ("Mond"): an expert flags a word whose least likely piece
# is below -depth nats (the smallest of REBUILD_GRID), with REBUILD_SHARE more of the acceptable outputs
# flagged at most, as the forced lines' put-back expert (thresholds.py).
REBUILD_GRID = np.arange(8.0, 14.01, 0.5)
REBUILD_SHARE = 0.01
EXPERT_SLOPE = 2.0
ERROR_WEIGHT = 0.0              # weight of the share of outputs with an error flagged in the lines' choice (0.5, 1: no gain)


class Words:
    """Every flaggable word of `cases`, per side: its word model's logit (no expert, no line), label (1 / 0 /
    -1) and case; per case: acceptable, with an error, a word written wrong (a flag whatever the lines), and
    the gate's columns."""

    def __init__(self, cases: list, feats: list[dict], models: dict):
        self.n = len(cases)
        self.ok = np.array([c.ok for c in cases], dtype=bool)
        self.bad = np.array([c.bad for c in cases], dtype=bool)
        self.z, self.y, self.case, self.wrong = {}, {}, {}, None
        every = {}
        for side in ("output", "source"):
            model = {k: v for k, v in models[side].items() if k != "also"}
            every[side] = [_logit(model, _columns(model, np.asarray(f[side]), side, FREE_FEATURES))
                           if len(f[f"{side}_groups"]) else np.zeros(0) for f in feats]
            labels_of = "source_labels" if side == "source" else "output_labels"
            zs, ys, where = [], [], []
            for n, (c, f) in enumerate(zip(cases, feats)):
                on = np.asarray(f[f"{side}_flaggable"], bool)
                zs.append(every[side][n][on])
                ys.extend(getattr(c, labels_of)[g[0]] for g, o in zip(f[f"{side}_groups"], on) if o)
                where.extend([n] * int(on.sum()))
            self.z[side] = np.concatenate(zs) if zs else np.zeros(0)
            self.y[side], self.case[side] = np.array(ys, dtype=float), np.array(where, dtype=int)
            if side == "source":
                col = FREE_SOURCE_FEATURES.index("neg_rebuild_min")
                self.rebuild = np.concatenate([np.asarray(f["source"])[np.asarray(f["source_flaggable"], bool), col]
                                               for f in feats]) if feats else np.zeros(0)
            else:
                self.wrong = np.concatenate([np.array([bool(r) for r in written_wrong(c.item.output_pieces, f["output_groups"])],
                                                      dtype=bool)[np.asarray(f["output_flaggable"], bool)]
                                             for c, f in zip(cases, feats)]) if feats else np.zeros(0, bool)
        self.written_wrong = np.array([any(written_wrong(c.item.output_pieces, f["output_groups"]))
                                       for c, f in zip(cases, feats)], dtype=bool)
        self.gate_x = np.array([gate_features(f, every["output"][n], every["source"][n]) for n, f in enumerate(feats)])
        self.G, self.slope = None, None

    def fit_gate(self, fitting: np.ndarray, gate) -> dict | None:
        """The sentence gate on the cases in `fitting` (outputs with an error against acceptable ones); None
        without one (gate None)."""
        self.G, self.slope = None, None
        if gate is None:
            return None
        keep = fitting & (self.ok | self.bad)
        model = dict(fit_monotone(self.gate_x[keep], self.bad[keep].astype(float)), features=list(FREE_GATE_FEATURES))
        self.G = _logit(model, self.gate_x)
        self.slope = None if gate == "hard" else float(gate)
        return model

    def shift(self, g) -> tuple[np.ndarray, np.ndarray]:
        """Per case, the gate's (shift, cap) at gate line g (None: open)."""
        shift, cap = np.zeros(self.n), np.full(self.n, np.inf)
        if g is None or self.G is None:
            return shift, cap
        below = np.minimum(self.G - g, 0.0)
        if self.slope is None:
            return shift, np.where(below < 0, below, np.inf)
        return self.slope * below, cap

    def gated(self, side: str, g) -> np.ndarray:
        """Each word's logit with the gate applied for line choice: -inf where a hard gate is closed."""
        shift, cap = self.shift(g)
        c = self.case[side]
        return np.where(cap[c] < 0, -np.inf, self.z[side] + shift[c])

    def flags(self, a: float, b: float, g, nats: float | None = None) -> tuple[dict, np.ndarray]:
        """Per side, which words the lines (the gate's line g, the rebuild expert at depth nats) flag; per case,
        whether it gets a flag."""
        shift, cap = self.shift(g)
        source = self.z["source"] - b
        if nats is not None:
            source = np.maximum(source, EXPERT_SLOPE * (self.rebuild - nats))
        on = {}
        for side, z in (("output", self.z["output"] - a), ("source", source)):
            c = self.case[side]
            on[side] = np.minimum(z + shift[c], cap[c]) >= 0
        on["output"] = on["output"] | self.wrong
        flagged = self.written_wrong.copy()
        for side in on:
            flagged[self.case[side][on[side]]] = True
        return on, flagged

    def rates(self, a: float, b: float, g, nats: float | None = None, cases: np.ndarray | None = None) -> dict:
        """(count, of) per rate on the cases in `cases` (all by default), labelled flaggable words only."""
        cases = np.ones(self.n, bool) if cases is None else cases
        on, flagged = self.flags(a, b, g, nats)
        out, hits, total = {}, 0, 0
        for side, name in (("output", "unsupported found"), ("source", "omitted found")):
            keep = cases[self.case[side]]
            o, y = on[side][keep], self.y[side][keep]
            out[name] = (int((o & (y == 1)).sum()), int((y == 1).sum()))
            hits, total = hits + int((o & (y == 1)).sum()), total + int((o & (y >= 0)).sum())
        out["precision"] = (hits, total)
        out["acceptable flagged"] = (int(flagged[cases & self.ok].sum()), int((cases & self.ok).sum()))
        out["error flagged"] = (int(flagged[cases & self.bad].sum()), int((cases & self.bad).sum()))
        return out


def _table(words: Words, fitting: np.ndarray, g) -> dict:
    """For every (output line, source line) of LINE_GRID at gate line g, on the cases in `fitting`: the share of
    acceptable outputs flagged, the flags' precision and the share of each side's labelled errors found."""
    ok, bad = fitting & words.ok, fitting & words.bad
    per = {}
    for side in ("output", "source"):
        z, y, c = words.gated(side, g), words.y[side], words.case[side]
        keep = fitting[c] & (y >= 0)
        on = z[None, keep] >= LINE_GRID[:, None]                            # (lines, labelled words)
        if side == "output":
            on = on | words.wrong[keep][None, :]
        hits, total = (on & (y[keep] == 1)).sum(1), on.sum(1)
        found = hits / max(int((y[keep] == 1).sum()), 1)
        top = np.full(words.n, -np.inf)
        np.maximum.at(top, c, np.where(words.wrong, np.inf, z) if side == "output" else z)
        per[side] = (top[None, :] >= LINE_GRID[:, None], hits, total, found)
    (fo, ho, to, ro), (fs, hs, ts, rs) = per["output"], per["source"]

    def flagged(cases):                                                        # share of `cases` with a flag
        clean = (~words.written_wrong[cases]).astype(np.int64)
        quiet = ((~fo[:, cases]).astype(np.int64) * clean) @ (~fs[:, cases]).astype(np.int64).T
        return 1.0 - quiet / max(int(cases.sum()), 1)
    alarms = flagged(ok)
    hits, total = ho[:, None] + hs[None, :], to[:, None] + ts[None, :]
    precision = np.where(total > 0, hits / np.maximum(total, 1), 1.0)
    key = np.minimum(ro[:, None], rs[None, :]) + 0.1 * (ro[:, None] + rs[None, :])
    if ERROR_WEIGHT:
        key = key + ERROR_WEIGHT * flagged(bad)
    return {"alarms": alarms, "precision": precision, "key": key, "found": (ro, rs)}


def pick(words: Words, fitting: np.ndarray, budgets) -> dict:
    """Per budget: the (output line, source line, gate line, what they give on `fitting`) with the most words
    found (the worse side first) with at most the budget of the acceptable outputs flagged and at least
    FREE_PRECISION of the flags on a labelled error; the gate line tried from the most open up."""
    best = {fa: (None, (0.0, 0.0, None, {})) for fa in budgets}
    for g in ([None] if words.G is None else GATE_GRID):
        t = _table(words, fitting, g)
        for fa in budgets:
            allowed = (t["alarms"] <= fa + 1e-12) & (t["precision"] >= FREE_PRECISION)
            if not allowed.any():
                continue
            i, j = np.unravel_index(int(np.argmax(np.where(allowed, t["key"], -np.inf))), allowed.shape)
            if best[fa][0] is None or t["key"][i, j] > best[fa][0] + 1e-12:
                best[fa] = (t["key"][i, j], (float(LINE_GRID[i]), float(LINE_GRID[j]), None if g is None else float(g), {
                    "acceptable flagged": float(t["alarms"][i, j]), "precision": float(t["precision"][i, j]),
                    "unsupported found": float(t["found"][0][i]), "omitted found": float(t["found"][1][j])}))
    return {fa: choice for fa, (_, choice) in best.items()}


def expert_depth(words: Words, a: float, b: float, g, fitting: np.ndarray) -> float | None:
    """The smallest depth (nats) of the rebuild expert that keeps the acceptable outputs of `fitting` flagged
    within the lines' share plus REBUILD_SHARE and the flags' precision at FREE_PRECISION; None when none does."""
    ok = fitting & words.ok
    base = float(words.flags(a, b, g)[1][ok].mean()) if ok.any() else 0.0
    for nats in REBUILD_GRID:
        r = words.rates(a, b, g, float(nats), fitting)
        alarms = r["acceptable flagged"][0] / max(r["acceptable flagged"][1], 1)
        precision = r["precision"][0] / r["precision"][1] if r["precision"][1] else 1.0
        if alarms <= base + REBUILD_SHARE + 1e-12 and precision >= FREE_PRECISION:
            return float(nats)
    return None
