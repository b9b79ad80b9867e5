"""Diagnosis of the model's own translation (issue 51): what a reader sees is wrong in a free translation.

Why its own signals: under the model that wrote it, its own output is likely, so log p, the source
gain and the deletion drop (signals.py, fitted on forced references) say little there; on held-out
own translations no free translation crossed a line fitted on forced references. What does see it
is the model of the other direction (reverse.py), which reads the translation as its source:

- the **rebuild** of each source word: log p_rev(source piece | translation, source prefix). A word
  the translation left out cannot be written back from it ("school" from "... neben ihrem
  Fußball."). Per word: its least likely piece and its pieces' sum. One reverse pass per sentence.
- the **reverse support** of each output word, per source piece: how much less likely each source
  piece becomes when the word is deleted from what the reverse model reads (one pass per word).
  A faithful word carries most of the support some source piece gets (its share); a wrong word,
  a repeated copy or a garbled one carries none, or even misleads (deleting it helps).
- on the output itself: a word's least likely piece and the entropy at its first step; a word
  written again (an earlier copy, or the word just before it), and runs of one letter ("Stummmmmm");
  its pieces per letter (a made-up word, "theutumputum", "smememead", is cut into many short pieces).
- what the sentence lacks: an output word counts as more suspect where some source word can hardly
  be written back (the least likely rebuild piece of the sentence's worst source word): a wrong word
  stands where a source word's translation should be, and the annotators list both.
- the lexicon gap and expected translation as for forced translations (lexicon.py).

Each side is a monotone logistic regression (fit.fit_monotone) fitted on hand-labelled own greedy
translations of Multi30k val (fit_free.py; labels in benchmarks/own_translations/), with its own flag
line, behind a sentence gate: a word is flagged only where the sentence's own chance of an error
(gate_features, a monotone logistic) is over the gate's line (scores.free_gate). About a third of the
outputs are acceptable, and the gate keeps a lone marginal word there from drawing a flag. Function
words and German verb particles ("herum", "vorbei") are never flagged here.
Without the model of the other direction (Hugging Face models, a folder copied alone) a free
translation is scored like a given one (scores.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..forced import forced_pass
from .function_words import function_word_mask, language_key
from .signals import TOP_K, Item, content_words, output_words, word_texts

FREE_OUTPUT_FEATURES = ["neg_log_p", "entropy", "reverse_unsupported_sum", "reverse_unsupported_max",
                        "reverse_misleads", "reverse_unshared", "repeat", "copy", "letter_run", "lexicon_gap",
                        "expected_translation", "pieces_per_letter", "sentence_missing"]
FREE_SOURCE_FEATURES = ["neg_rebuild_min", "neg_rebuild_sum", "lexicon_gap"]
FREE_SENTENCE_FEATURES = ["neg_mean_rebuild", "neg_mean_log_p", "omitted_share", "unsupported_share",
                          "max_omission", "max_hallucination"]
# The sentence gate's columns (fit_free.py): how likely the output has a real error at all, from the word
# models' logits (their own, before the lines) and the sentence's mean surprisal on both sides
FREE_GATE_FEATURES = ["max_output_logit", "max_source_logit", "expected_errors", "neg_mean_log_p", "neg_mean_rebuild"]
GATE_FLOOR = -12.0          # a side with no flaggable word
# Never flagged in a free translation, beside the function words: prepositions and verb particles. The
# annotation brief (../shared/docs/annotating.md) lists a lost phrase by its content word ("on the moon" ->
# "moon"), never by its preposition, and a German translation adds particles where English has none
# ("walk by a truck" -> "an einem Lastwagen vorbei gehen"); on val 0-199 such words drew false alarms only.
PARTICLES = {
    "de": frozenset("herum umher entlang vorbei hinauf herauf hinunter herunter hinab herab heraus hinaus herein "
                    "hinein hindurch hinüber herüber zurück weg los fort voran vorüber dabei daran darauf davor "
                    "dahinter über unter hinter vor neben zwischen durch gegen ohne um nach bis".split()),
    "en": frozenset("away up down out off along around about through across over past by near under behind above "
                    "below between beside inside outside toward towards against during without within upon".split()),
}
LETTER_RUN = re.compile(r"([^\W\d_])\1\1", re.UNICODE)      # one letter three times in a row
# Written wrong whoever wrote it, a given translation too: the same word twice in a row ("das das das
# das": the copies) and one letter four times in a row ("Stummmmmmmmm"; no word of the Multi30k train
# targets has one, while "Schifffahrt" has three). Such a word scores at least WRITTEN_WRONG_SCORE,
# function word or not: the model's probabilities may not see it (a given translation's stutter is
# unlikely everywhere alike), a reader always does.
LONG_LETTER_RUN = re.compile(r"([^\W\d_])\1{3,}", re.UNICODE)
WRITTEN_WRONG_SCORE = 0.9


def written_wrong(pieces: list, groups: list) -> list:
    """Per output word (groups), why it is written wrong ("the word before it again", "a letter N times
    in a row") or None."""
    texts = [word.replace("\u2581", "").replace("\u0120", "").lower() for word in word_texts(pieces, groups)]
    out = []
    for w, text in enumerate(texts):
        run = LONG_LETTER_RUN.search(text)
        if any(ch.isalpha() for ch in text) and w > 0 and text == texts[w - 1]:
            out.append("the word before it again")
        elif run:
            out.append(f"one letter {len(run.group(0))} times in a row")
        else:
            out.append(None)
    return out


@dataclass
class FreeSignals:
    """Per sentence, from one forward pass and the reverse passes."""
    log_p: np.ndarray             # (T,) log p(y_t | x, y<t)
    entropy: np.ndarray           # (T,) entropy of the step's distribution, nats
    top_ids: np.ndarray           # (T, K) the step's best pieces
    top_probs: np.ndarray         # (T, K)
    rebuild: np.ndarray           # (S,) log p_rev(x_i | y, x<i): the reverse model writing the source back
    reverse_drop: np.ndarray      # (Wo, S) rebuild - the same with output word w deleted from what it reads


def _forward(tr, items: list[Item], gates, budget, bf16) -> list[tuple]:
    def reduce(batch) -> list:
        lp = batch.log_probs                                                   # (B, T, V)
        chosen = lp.gather(-1, batch.gold.unsqueeze(-1)).squeeze(-1)           # (B, T)
        entropy = -(lp.exp() * lp).sum(-1)                                     # (B, T)
        top_lp, top_ids = lp.topk(TOP_K, dim=-1)                               # (B, T, K)
        chosen, entropy = chosen.double().cpu().numpy(), entropy.double().cpu().numpy()
        top_ids, top_p = top_ids.cpu().numpy(), top_lp.exp().cpu().numpy()
        return [(chosen[b, :n], entropy[b, :n], top_ids[b, :n], top_p[b, :n]) for b, n in enumerate(batch.lengths)]
    return forced_pass(tr, [(it.source_ids, it.fed_ids, it.output_ids) for it in items], reduce, gates, budget, bf16)


def _reverse(reverse, items: list[Item], groups: list[list], words: list[np.ndarray], budget, bf16) -> list[tuple]:
    """Per item, (rebuild (S,), reverse_drop (Wo, S)): the reverse model reads the translation and
    writes the source, once whole and once without each output word in `words` (its other rows are 0:
    special pieces and punctuation, deleted for nothing; ungated: a head mask of the forward model is
    not the judge's)."""
    special = reverse.engine.special_ids
    rows, starts = [], []
    for it, item_groups, on in zip(items, groups, words):
        reads, writes = list(it.output_ids), list(it.source_ids)
        fed = [reverse.engine.start_id] + writes[:-1]
        null = [i for i in reads if i in special] or reads[-1:]
        starts.append(len(rows))
        rows.append((reads, fed, writes))
        for g, deleted in zip(item_groups, on):
            if deleted:
                gone = set(g)
                rows.append(([i for j, i in enumerate(reads) if j not in gone] or null, fed, writes))

    def reduce(batch) -> list:
        lp = batch.log_probs.gather(-1, batch.gold.unsqueeze(-1)).squeeze(-1).double().cpu().numpy()   # (B, S)
        return [lp[b, :n] for b, n in enumerate(batch.lengths)]
    passes = forced_pass(reverse, rows, reduce, None, budget, bf16) if rows else []
    out = []
    for on, start in zip(words, starts):
        full = passes[start]
        drops = np.zeros((len(on), len(full)))                                 # (Wo, S)
        for k, w in enumerate(np.flatnonzero(on)):
            drops[w] = full - passes[start + 1 + k]
        out.append((full, drops))
    return out


def compute_free_signals(tr, reverse, items: list[Item], gates=None, budget: int | None = None,
                         bf16: bool = False) -> list[FreeSignals]:
    special = frozenset(tr.engine.special_ids)
    forward = _forward(tr, items, gates, budget, bf16)
    words = [output_words(it, len(it.output_ids), special) for it in items]
    back = _reverse(reverse, items, [g for g, _ in words], [on for _, on in words], budget, bf16)
    return [FreeSignals(lp, ent, ids, probs, rebuild, drops)
            for (lp, ent, ids, probs), (rebuild, drops) in zip(forward, back)]


def _never_flagged(words: list[str], language: str | None) -> np.ndarray:
    particles = PARTICLES.get(language_key(language), frozenset())
    return np.array(function_word_mask(words, language), dtype=bool) | \
        np.array([w.replace("\u2581", "").lower() in particles for w in words], dtype=bool)


def free_features(sig: FreeSignals, item: Item, special: frozenset, lexicon=None, piece_text=None,
                  source_language: str | None = None, target_language: str | None = None) -> dict:
    """Word features of a free translation: output words (Wo, F) and source words (W, F), columns
    FREE_OUTPUT_FEATURES and FREE_SOURCE_FEATURES (higher = more suspicious), which words a flag may
    cover, the words' raw signals per piece, and the evidence a flag names."""
    out_groups, out_on = output_words(item, len(item.output_ids), special)
    src_groups, src_on = content_words(item.source_pieces, item.source_ids, special)
    out_text, src_text = word_texts(item.output_pieces, out_groups), word_texts(item.source_pieces, src_groups)
    out_function, src_function = _never_flagged(out_text, target_language), _never_flagged(src_text, source_language)
    # a word with no letter or digit ("▁" alone before "." in a source that is only ".") is nothing to flag
    out_on = out_on & np.array([any(ch.isalnum() for ch in w) for w in out_text], dtype=bool)
    src_on = src_on & np.array([any(ch.isalnum() for ch in w) for w in src_text], dtype=bool)
    source_gap, output_gap = np.zeros(len(src_groups)), np.zeros(len(out_groups))
    expected, expected_why = np.zeros(len(out_groups)), [None] * len(out_groups)
    if lexicon is not None:
        source_gap = np.array(lexicon.gaps(src_text, out_text, "source"))
        output_gap = np.array(lexicon.gaps(out_text, src_text, "target"))
        if piece_text is not None:
            expected, expected_why = lexicon.expected(sig.top_ids, sig.top_probs, piece_text, src_text, out_text,
                                                      [g[0] for g in out_groups])
    src_rows = [[-sig.rebuild[g].min(), -sig.rebuild[g].sum(), source_gap[w]] for w, g in enumerate(src_groups)]
    src_flaggable = src_on & ~src_function
    missing = max((r[0] for r, on in zip(src_rows, src_flaggable) if on), default=0.0)
    drops = sig.reverse_drop                                                   # (Wo, S)
    support = np.clip(drops, 0.0, None).sum(0) + 1e-6                          # (S,) all words' support per piece
    seen, previous, rows = {}, None, []
    for w, g in enumerate(out_groups):
        key = out_text[w].replace("\u2581", "").lower()
        copies = seen.get(key, 0)
        seen[key] = copies + 1
        d = drops[w] if len(drops) else np.zeros(1)
        best = int(np.argmax(d))
        rows.append([-sig.log_p[g].min(), sig.entropy[g[0]], -d.sum(), -d.max(), -d.min(), -d[best] / support[best],
                     float(key == previous and bool(key)), float(copies > 0), float(bool(LETTER_RUN.search(key))),
                     output_gap[w], expected[w],
                     len(g) / max(sum(ch.isalpha() for ch in out_text[w].replace("\u2581", "")), 1), missing])
        previous = key
    return {"output": np.array(rows, dtype=np.float64).reshape(-1, len(FREE_OUTPUT_FEATURES)),
            "output_groups": out_groups, "output_flaggable": out_on & ~out_function, "output_function": out_on & out_function,
            "source": np.array(src_rows, dtype=np.float64).reshape(-1, len(FREE_SOURCE_FEATURES)),
            "source_groups": src_groups, "source_flaggable": src_flaggable, "source_function": src_on & src_function,
            "expected_why": expected_why, "signals": sig}


def gate_features(f: dict, output_logit: np.ndarray, source_logit: np.ndarray) -> np.ndarray:
    """FREE_GATE_FEATURES of one free translation (higher = likelier an error): per side the highest logit of
    a flaggable word (output_logit (Wo,), source_logit (W,): the word models' logits before their lines), the
    log of the expected number of wrong or left-out words (their probabilities summed), the mean -log p and
    the mean -rebuild. Each is non-decreasing in every word's logit."""
    sig = f["signals"]
    zo = np.asarray(output_logit, dtype=np.float64)[np.asarray(f["output_flaggable"], bool)]
    zs = np.asarray(source_logit, dtype=np.float64)[np.asarray(f["source_flaggable"], bool)]
    both = np.concatenate([zo, zs])
    expected = float((1.0 / (1.0 + np.exp(-np.clip(both, -40, 40)))).sum())
    return np.array([max(float(zo.max(initial=GATE_FLOOR)), GATE_FLOOR), max(float(zs.max(initial=GATE_FLOOR)), GATE_FLOOR),
                     float(np.log(expected + 1e-3)), -float(sig.log_p.mean()), -float(sig.rebuild.mean())])
