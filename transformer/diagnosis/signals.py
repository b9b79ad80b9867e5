"""Raw signals behind `diagnose` (transformer/diagnosis/scores.py), for any batch of (source, output).

All of them come from teacher-forced passes, batched across sentences and variants:
- log p(y_t | x, y<t): the model's confidence in each output piece under the real source;
- log p(y_t | null, y<t) with a "null" source (the source's special pieces only, e.g. `</s>`):
  what the decoder predicts from the prefix alone. pmi_t = log p(y_t|x) - log p(y_t|null) is
  contrastive conditioning on the whole source: how much the source supports piece t;
- for each source word w, log p(y_t | x without w): contrastive conditioning (Vamvas and
  Sennrich 2022). drop_w = sum_t [log p(y_t|x) - log p(y_t|x\\w)]; a word whose deletion
  costs the translation nothing was probably not translated.
- for each source word w, the unmet demand (issue 30): at each step the probability mass the word
  moves onto pieces that never appear in the rest of the translation,
      unmet_{w,t} = sum_{v in top-K of p(.|x, y<t), v not in y_t..y_T} max(0, p(v|x, y<t) - p(v|x\\w, y<t)).
  A word whose translation is missing pushes the model towards that translation at some step, and
  the translation never takes it; a translated word's push is met, a function word barely pushes.
Only content words are deleted: special pieces (</s>, language codes) and punctuation are never
"left out", so they cost no pass. Everything is local to the call (thread-safe); the passes run on
the translator's device.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..forced import chosen_log_probs, forced_pass
from .function_words import function_word_mask

WORD_START = ("\u2581", "\u0120")          # SentencePiece "▁", byte-level BPE "Ġ"
TOP_K = 32                                  # pieces per step whose mass the unmet demand follows


@dataclass
class Item:
    """One sentence to diagnose: ids as the model sees them, pieces as the user sees them."""
    source_ids: list
    fed_ids: list                 # start token + output_ids[:-1]
    output_ids: list
    source_pieces: list
    output_pieces: list
    free: bool = False            # the model's own translation (no target given): judged by free.py where it can


def make_item(tr, source: str, target) -> Item:
    """An Item for forcing `target` (text or pieces) on `source`, without a translate() call."""
    source_ids, _ = tr.encode_source(source)
    output_ids = tr.target_ids(target)
    pieces = tr.engine.tokenizer.source_pieces(source_ids)
    return Item(source_ids, [tr.engine.start_id] + output_ids[:-1], output_ids, pieces, tr.engine.tokenizer.pieces(output_ids))


@dataclass
class Signals:
    log_p: np.ndarray             # (T,) log p(y_t | x, y<t)
    log_p_null: np.ndarray        # (T,) log p(y_t | null source, y<t)
    words: list                   # source word groups: lists of source positions
    deletion: np.ndarray          # (W, T) log p(y_t | x without word w); = log_p for words never deleted
    unmet: np.ndarray             # (W, T) unmet demand of word w at step t; 0 for words never deleted
    deleted: np.ndarray           # (W,) bool: a content word (deleted); special pieces and punctuation are not
    top_ids: np.ndarray | None = None     # (T, K) the full-source pass's best pieces at each step
    top_probs: np.ndarray | None = None   # (T, K) their probabilities
    # word w -> (insertion gain in nats, pull, step, piece ids): log p(translation with the word the
    # model most wanted for w put back at a step) - log p(translation), the best of its put-backs
    # (put_back()); only words a lexicon says the translation lacks (lexicon.insertions), none without one
    insertion: dict = field(default_factory=dict)
    # (W,) bool: the words a flag may call left out, deleted ones less function words (function_words.py);
    # None (a Signals made by hand): every deleted word
    may_be_left_out: np.ndarray | None = None
    # (Wo,) per output word (output_words()): log p_rev(source | output) - log p_rev(source | output without
    # the word) under the model of the other direction (reverse.py); NaN for words not tested; None without one
    reverse_drop: np.ndarray | None = None
    # (Wo,) bool per output word (output_words()): the words a flag may call unsupported, flaggable ones less
    # function words of the target language (function_words.py); None (a Signals made by hand): every flaggable word
    may_be_unsupported: np.ndarray | None = None


def is_punctuation(piece: str) -> bool:
    body = str(piece).lstrip("".join(WORD_START)).strip()
    return bool(body) and not any(ch.isalnum() for ch in body)


def word_groups(pieces: list, ids: list, special: set) -> list[list[int]]:
    """Source positions grouped into words: a piece starts a word after a special piece, at a
    "▁"/"Ġ" marker (or, for tokenizers without markers, unless it continues with "##" / "@@")."""
    content = [str(p) for p, i in zip(pieces, ids) if i not in special]
    markers = any(p.startswith(WORD_START) for p in content)
    groups: list[list[int]] = []
    for j, (piece, idx) in enumerate(zip(pieces, ids)):
        piece = str(piece)
        if markers:
            starts = piece.startswith(WORD_START)
        else:
            starts = not (piece.startswith("##") or (j > 0 and str(pieces[j - 1]).endswith("@@")))
        # punctuation is a word of its own ("bike" and "." are deleted and scored apart)
        starts = starts or is_punctuation(piece) or (j > 0 and is_punctuation(pieces[j - 1]))
        if j == 0 or idx in special or ids[j - 1] in special or starts:
            groups.append([j])
        else:
            groups[-1].append(j)
    return groups


def content_words(pieces: list, ids: list, special) -> tuple[list[list[int]], np.ndarray]:
    """word_groups(), and which of them are content words: not only special pieces or punctuation.
    Only those are deleted here, and only those can be flagged "left out"."""
    groups = word_groups(pieces, ids, special)
    return groups, np.array([not all(ids[j] in special or is_punctuation(pieces[j]) for j in g) for g in groups],
                            dtype=bool)


def output_words(item: Item | None, T: int, special: set | frozenset = frozenset()) -> tuple[list, np.ndarray]:
    """Output pieces grouped into words, and which groups can be flagged (not special pieces,
    not punctuation). Without an item every piece is its own word."""
    if item is None:
        return [[t] for t in range(T)], np.ones(T, dtype=bool)
    pieces = [str(p) for p in item.output_pieces]
    special = set(special) | {i for i, p in zip(item.output_ids, pieces) if p.startswith("<") and p.endswith(">")}
    return content_words(pieces, list(item.output_ids), special)


@dataclass
class Demand:
    """What a full-source pass wanted at each step: its top-K pieces, their probabilities, and
    which of them never appear in the rest of the translation (their mass, if a word adds it, is
    unmet)."""
    ids: torch.Tensor             # (T, K) long
    probs: torch.Tensor           # (T, K) float32
    absent: torch.Tensor          # (T, K) bool: ids[t, k] not in output_ids[t:]


def demand_of(top_ids: np.ndarray, top_probs: np.ndarray, output_ids: list) -> Demand:
    output = np.asarray(output_ids)
    absent = np.stack([~np.isin(row, output[t:]) for t, row in enumerate(top_ids)]) if len(top_ids) \
        else np.zeros((0, top_ids.shape[-1]), dtype=bool)
    return Demand(torch.as_tensor(top_ids), torch.as_tensor(top_probs), torch.as_tensor(absent))


def forced_passes(tr, rows: list[tuple[list, list, list]], gates=None, budget: int | None = None,
                  bf16: bool = False, top: int = 0, against: list | None = None) -> list[tuple]:
    """Per row (log p (T,), extra): extra is the (T, top) ids and probabilities of the step's best
    pieces when top > 0; with against[row] = a Demand (of the same sentence's full-source pass),
    the unmet demand (T,) of this row's source against it; else None."""
    def reduce(batch) -> list:
        lps = chosen_log_probs(batch)
        if top:
            top_lp, top_ids = batch.log_probs.topk(top, dim=-1)                         # (B, T, K)
            top_ids, top_p = top_ids.cpu().numpy(), top_lp.exp().cpu().numpy()
        out = []
        for b, (r, n) in enumerate(zip(batch.rows, batch.lengths)):
            extra = None
            if top:
                extra = (top_ids[b, :n], top_p[b, :n])
            elif against is not None and against[r] is not None:
                want = against[r]
                here = batch.log_probs[b, :n].gather(-1, want.ids.to(tr.device)).exp().cpu()   # (T, K)
                extra = ((want.probs - here).clamp(min=0) * want.absent).sum(-1).double().numpy()
            out.append((lps[b], extra))
        return out
    return forced_pass(tr, rows, reduce, gates, budget, bf16)


def word_texts(pieces: list, groups: list) -> list[str]:
    """Each group's pieces joined: the words as the lexicon and the function-word list read them."""
    return ["".join(str(pieces[j]) for j in g) for g in groups]


def compute_signals(tr, items: list[Item], gates=None, budget: int | None = None, bf16: bool = False,
                    lexicon=None) -> list[Signals]:
    """Full source and null source for every item, then every content word's deletion against
    the full source's demand, in shared batches; with a lexicon, the translation with each missing
    word's expected translation put back (Signals.insertion, put_back()), function words aside.
    The reverse support (Signals.reverse_drop) is reverse.add_reverse()'s."""
    special = tr.engine.special_ids
    language, target_language = getattr(tr, "source_lang", None), getattr(tr, "target_lang", None)
    first, plans, texts, left_out = [], [], [], []
    for it in items:
        null = [i for i in it.source_ids if i in special] or [it.source_ids[-1]]
        words, deleted = content_words(it.source_pieces, it.source_ids, special)
        first.append((list(it.source_ids), list(it.fed_ids), list(it.output_ids)))
        first.append((null, list(it.fed_ids), list(it.output_ids)))
        source_words = word_texts(it.source_pieces, words)
        plans.append((null, words, deleted))
        texts.append(source_words)
        left_out.append(deleted & ~np.array(function_word_mask(source_words, language), dtype=bool))
    full = forced_passes(tr, first, gates, budget, bf16, top=TOP_K)
    rows, against, starts = [], [], []
    for n, (it, (null, words, deleted)) in enumerate(zip(items, plans)):
        want = demand_of(*full[2 * n][1], list(it.output_ids))
        starts.append(len(rows))
        for group, on in zip(words, deleted):
            if on:
                drop = set(group)
                kept = [i for j, i in enumerate(it.source_ids) if j not in drop] or null
                rows.append((kept, list(it.fed_ids), list(it.output_ids)))
                against.append(want)
    passes = forced_passes(tr, rows, gates, budget, bf16, against=against)
    out = []
    for n, (it, (null, words, deleted), start) in enumerate(zip(items, plans, starts)):
        lp, lp_null = full[2 * n][0], full[2 * n + 1][0]
        T = len(it.output_ids)
        deletion, unmet = np.tile(lp, (len(words), 1)), np.zeros((len(words), T))
        for k, w in enumerate(np.flatnonzero(deleted)):
            deletion[w], unmet[w] = passes[start + k]
        out_groups, _ = output_words(it, T, special)
        unsupported = ~np.array(function_word_mask(word_texts(it.output_pieces, out_groups), target_language), dtype=bool)
        out.append(Signals(lp, lp_null, words, deletion, unmet, deleted, *full[2 * n][1], may_be_left_out=left_out[n],
                           may_be_unsupported=unsupported))
    if lexicon is not None:
        candidates = []
        for n, (it, (null, words, deleted)) in enumerate(zip(items, plans)):
            out_words = word_texts(it.output_pieces, word_groups(it.output_pieces, it.output_ids, special))
            candidates.append(lexicon.insertions(*full[2 * n][1], tr.engine.tokenizer.id_to_piece,
                                                 texts[n], list(left_out[n]), out_words,
                                                 boundary=boundaries(it.output_ids, tr.engine.tokenizer.id_to_piece, special)))
        for n, found in enumerate(put_back(tr, items, [s.log_p for s in out], candidates, gates, budget, bf16)):
            out[n].insertion = found
    return out


# Putting a missing word's translation back (issue 30): an omitted word's translation fits back in and
# makes the translation likelier; a paraphrased word's duplicates its neighbour and costs. The lexicon
# proposes, per missing source word, the piece the model most wanted for it at its best few steps
# (Lexicon.insertions). A piece is often only the start of the word ("▁bunte" of "bunten"), and forcing
# the old continuation after half a word costs more than the word gains, so each put-back is completed
# greedily: while the model's likeliest next piece continues the word, it goes in too, one batched
# forced pass per round over the candidates still growing.
PUT_BACK_ROUNDS = 2        # continuation pieces a put-back may grow by (en-de: omitted words found +1.5 points
                           # on each val sample, runs/xp31/putback.py)


def boundaries(output_ids: list, piece_text, special) -> np.ndarray:
    """(T,) where a word may be put in: before a piece that starts a word, punctuation or a special piece."""
    return np.array([i in special or str(piece_text(i)).startswith(WORD_START) or is_punctuation(piece_text(i))
                     for i in output_ids], dtype=bool)


def _continues(piece_id: int, piece_text, special) -> bool:
    text = str(piece_text(piece_id))
    return (piece_id not in special and not text.startswith(WORD_START) and not is_punctuation(text)
            and any(ch.isalpha() for ch in text))


def put_back(tr, items: list, log_p: list, candidates: list[dict], gates=None, budget: int | None = None,
             bf16: bool = False) -> list[dict]:
    """Per item, {word: (gain, pull, step, piece ids)} for the candidates {word: [(pull, step, piece)]}
    (Lexicon.insertions): the completed put-back of largest gain, gain = log p(translation with the
    pieces put in at step) - log p(translation) (log_p: the items' (T,) log p under the full source)."""
    special = tr.engine.special_ids
    piece_text = tr.engine.tokenizer.id_to_piece
    limit = getattr(getattr(tr, "config", None), "max_target_len", None)
    live = [(n, w, step, pull, (piece,)) for n, found in enumerate(candidates)
            for w, options in found.items() for pull, step, piece in options]
    out: list[dict] = [{} for _ in items]
    for round_ in range(PUT_BACK_ROUNDS + 1):
        live = [c for c in live if limit is None or len(items[c[0]].output_ids) + len(c[4]) <= limit]
        if not live:
            break
        rows = []
        for n, w, step, pull, pieces in live:
            it = items[n]
            output = list(it.output_ids[:step]) + list(pieces) + list(it.output_ids[step:])
            rows.append((list(it.source_ids), [it.fed_ids[0]] + output[:-1], output))

        def reduce(batch, live=live):
            lps = chosen_log_probs(batch)
            # the likeliest piece after the put-back: does the model go on with the word?
            return [(lps[b], int(batch.log_probs[b, live[r][2] + len(live[r][4])].argmax()))
                    for b, r in enumerate(batch.rows)]
        results = forced_pass(tr, rows, reduce, gates, budget, bf16)
        growing = []
        for (n, w, step, pull, pieces), (lp, following) in zip(live, results):
            gain = float(np.sum(lp, dtype=np.float64) - np.sum(log_p[n], dtype=np.float64))
            if gain > out[n].get(w, (-np.inf,))[0]:
                out[n][w] = (gain, pull, step, pieces)
            if round_ < PUT_BACK_ROUNDS and _continues(following, piece_text, special):
                growing.append((n, w, step, pull, pieces + (following,)))
        live = growing
    return out
