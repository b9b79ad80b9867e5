"""Session 28's candidate columns for the free word models, derived from the cached free features
(runs/s28/ownfeats.*.pkl): each is oriented higher = more suspicious (the models are monotone)."""
from __future__ import annotations

import numpy as np

from transformer.diagnosis.lexicon import read_lexicon, stem
from transformer.diagnosis.signals import word_texts

OUT_EXTRA = ["n_pieces", "pieces_per_letter", "neighbour_neg_log_p", "sentence_missing", "sentence_neg_log_p",
             "top2_ratio", "copy_unshared", "unknown_stem", "neighbour_entropy", "sentence_missing_mean"]
SRC_EXTRA = ["sentence_max_neg_log_p", "head_lost", "head_lost_colour", "rebuild_vs_sentence", "position",
             "sentence_unshared", "pieces_n", "neighbour_rebuild"]
COLOURS = set("""red blue green yellow black white brown pink purple orange gray grey tan blond blonde dark
one two three four five six seven eight nine ten several many rot blau grün gelb schwarz weiß braun rosa lila
orange grau blond dunkel ein zwei drei vier fünf sechs sieben acht neun zehn mehrere viele""".split())
_LEX = {}


def lexicon(m):
    if m not in _LEX:
        _LEX[m] = read_lexicon(f"pretrained/{m}")
    return _LEX[m]


def extend(m: str, side: str, c, f, rows: np.ndarray) -> np.ndarray:
    sig = f["signals"]
    if side == "output":
        groups = f["output_groups"]
        texts = [w.replace("\u2581", "") for w in word_texts(c.item.output_pieces, groups)]
        nlp = rows[:, 0]
        ent = rows[:, 1]
        src = np.asarray(f["source"]); src_on = np.asarray(f["source_flaggable"], bool)
        missing = float(src[src_on, 0].max()) if src_on.any() else 0.0
        missing_mean = float(src[src_on, 0].mean()) if src_on.any() else 0.0
        lex = lexicon(m)
        extra = []
        for w, g in enumerate(groups):
            letters = sum(ch.isalpha() for ch in texts[w])
            nb = [nlp[k] for k in (w - 1, w + 1) if 0 <= k < len(groups)]
            nbe = [ent[k] for k in (w - 1, w + 1) if 0 <= k < len(groups)]
            tp = sig.top_probs[g[0]]
            key = stem(texts[w], 5)
            unknown = float(key is not None and len(key) >= 4 and not lex.by_target.get(5, {}).get(key))
            extra.append([len(g), len(g) / max(letters, 1), max(nb, default=0.0), missing, -float(sig.log_p.mean()),
                          tp[1] / tp[0], rows[w, 7] * float(np.clip(1 + rows[w, 5], 0, 2)), unknown,
                          max(nbe, default=0.0), missing_mean])
        return np.hstack([rows, np.array(extra).reshape(len(groups), -1)])
    groups = f["source_groups"]
    texts = [w.replace("\u2581", "").lower() for w in word_texts(c.item.source_pieces, groups)]
    on = np.asarray(f["source_flaggable"], bool)
    out = np.asarray(f["output"]); out_on = np.asarray(f["output_flaggable"], bool)
    max_nlp = float(out[out_on, 0].max()) if out_on.any() else 0.0
    unshared = float(out[out_on, 5].max()) if out_on.any() else -1.0
    mean_rb = float(rows[on, 0].mean()) if on.any() else 0.0
    extra = []
    for w, g in enumerate(groups):
        modifier = w + 1 < len(groups) and on[w + 1]
        head = rows[w + 1, 0] if modifier else 10.0
        colour = texts[w] in COLOURS or any(ch.isdigit() for ch in texts[w])
        nb = [rows[k, 0] for k in (w - 1, w + 1) if 0 <= k < len(groups) and on[k]]
        extra.append([max_nlp, head, 10.0 if colour else head, rows[w, 0] - mean_rb, w / max(len(groups) - 1, 1),
                      unshared, len(g), max(nb, default=0.0)])
    return np.hstack([rows, np.array(extra).reshape(len(groups), -1)])
