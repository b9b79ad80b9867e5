"""`translate(..., diagnose=True)`: which output words the source does not support, which source
words the translation leaves out, and how detached the whole sentence is (api.md, "What went
wrong: diagnosis").

Signals (diagnosis_signals.py), all from batched teacher-forced passes: log p of each piece;
pmi = log p(piece | source) - log p(piece | null source), contrastive conditioning on the whole
source; for each source content word the fall of log p(translation) when it is deleted (Vamvas and
Sennrich 2022) and its unmet demand (the mass it moves onto pieces the translation never writes).

Scores are per WORD (a word's pieces share one score): a logistic of signals oriented so that
higher = more suspicious, with non-negative coefficients (issue 30): more evidence never lowers a
score, and no window or sentence-wide feature can move a flag onto a neighbour. Special pieces and
punctuation are never flagged (score 0), function words never left out nor unsupported (half their score,
function_words.py). The bias is set so that 0.5 is the flag threshold, chosen on Multi30k val so
that few unedited references get any flag (transformer/diagnosis/fit.py, on
realistic in-sentence errors of diagnosis_protocol.py plus the synthetic cases); the sentence score
is a separate logistic regression. Weights ship as MODEL_DIR/diagnosis.json; other models use the
generic default in diagnosis_default.py. ALTI+ and attention are not used: on forced translations
they were the weakest signals and cost an explain pass (see docs/diagnosis.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from viz.diagnosis import summary_line

from .free import (FREE_OUTPUT_FEATURES, FREE_SENTENCE_FEATURES, FREE_SOURCE_FEATURES, WRITTEN_WRONG_SCORE,
                   compute_free_signals, free_features, gate_features, written_wrong)
from .lexicon import Lexicon, lexicon_for
from .function_words import FUNCTION_WORD_SHARE, function_word_mask
from .reverse import FEATURE as REVERSE_FEATURE, add_reverse, reverse_for
from .signals import Item, Signals, compute_signals, content_words, output_words, word_texts

REPO_ROOT = Path(__file__).resolve().parents[2]
WEIGHTS_FILE = "diagnosis.json"
# Oriented so that higher = more suspicious; the fitted coefficients are all >= 0.
# lexicon_gap and expected_translation (lexicon.py) are 0 for models without a lexicon; weights name
# the columns they use, so weights fitted without them (the generic default) read only their own.
OUTPUT_FEATURES = ["neg_log_p", "neg_pmi", "neg_support", "neg_mean_log_p", "lexicon_gap", "expected_translation",
                   REVERSE_FEATURE,     # reverse.py: 0 without the other direction's model
                   "unmet_here"]        # unmet_here(): a source word wanted, at this word's step, what the rest never writes
SOURCE_FEATURES = ["neg_drop", "unmet_max", "unmet_sum", "neg_drop_max", "lexicon_gap", "insertion_gain",
                   "insertion_gain_positive"]
INSERTION_RANGE = (-5.0, 10.0)     # nats: the gain's column is clip(gain) - low, 0 for words never put back;
# its positive part, clip(gain, 0, high), is a column of its own: a word whose translation makes the
# translation likelier when put back is much more often left out than one whose put-back costs little
# (a bend at 0 that one linear column cannot make: omitted words found at 3% false alarms, en-de / de-en,
# +3 / +4 points on the fitting pairs, +7 / +4 on the benchmark's, docs/diagnosis.md)
SENTENCE_FEATURES = ["mean_log_p", "mean_pmi", "min_log_p_window", "min_pmi_window", "low_pmi_share",
                     "min_pmi_window4", "pmi_p10", "mean_hallucination", "max_hallucination", "flagged_share"]


@dataclass
class Flag:
    kind: str            # "hallucination" (output pieces) | "omission" (source pieces)
    start: int
    end: int             # exclusive
    score: float
    evidence: dict = field(default_factory=dict)


@dataclass
class Diagnosis:
    sentence_score: float            # [0, 1], higher = more likely detached from the source
    hallucination: np.ndarray        # float32 (T,)
    omission: np.ndarray             # float32 (S,)
    flags: list
    signals: dict = field(default_factory=dict)    # the raw per-piece signals behind the scores
    missing: list = field(default_factory=list)    # signals this model could not give ("lexicon_gap" without a lexicon)
    summary: str = ""                # the sentence the app shows under the translation (api.md)
    judged_as: str = "given"         # "free": the model's own translation, by free.py's signals and lines;
                                     # "given": a given translation (or a free one without the reverse model)


def _window(x: np.ndarray, radius: int) -> np.ndarray:
    if len(x) == 0:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    n = len(x)
    lo = np.clip(np.arange(n) - radius, 0, n)
    hi = np.clip(np.arange(n) + radius + 1, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


def _slog(x):
    return np.sign(x) * np.log1p(np.abs(x))


REVERSE_CLIP = 3.0      # the reverse support's column: clip(-slog(support), -3, 3) + 3 for tested words, 0 for the rest


def reverse_column(drop: np.ndarray | None, n_words: int) -> np.ndarray:
    """The output words' REVERSE_FEATURE column from Signals.reverse_drop: higher = the source needs the
    word less; 0 for untested words (NaN) and without a reverse model (None)."""
    if drop is None:
        return np.zeros(n_words)
    tested = ~np.isnan(drop)
    return np.where(tested, np.clip(-_slog(np.where(tested, drop, 0.0)), -REVERSE_CLIP, REVERSE_CLIP) + REVERSE_CLIP, 0.0)


def unmet_here(sig: Signals, deleted: np.ndarray, groups: list) -> np.ndarray:
    """(Wo,) per output word, the largest unmet demand of one deleted source word at the word's first step:
    the probability mass that source word moved there onto pieces the rest of the translation never
    writes (signals.py). A wrong word stands where a source word wanted its own translation, which never
    comes ("dog" in "A man rides a dog." for "Ein Mann fährt Fahrrad.": 0.91); the lexicon's expected
    translation asks the same of known translations only, this of whatever the model wanted."""
    unmet = np.asarray(sig.unmet)[np.asarray(deleted, dtype=bool)]                       # (W', T)
    if not len(unmet):
        return np.zeros(len(groups))
    return np.array([float(unmet[:, g[0]].max()) for g in groups])


def flaggable_pieces(item: Item, special: set | frozenset = frozenset(), language: str | None = None,
                     output_language: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(T,) and (S,) bool: the output and source pieces of words a flag may cover. The others
    (special pieces, punctuation: never "unsupported" or "left out"; function words of the source
    `language`: never "left out"; of the `output_language`: never "unsupported") score 0 or a share
    of their score by design, so a benchmark that pools them with the rest measures that rule as much
    as the scores."""
    groups, flaggable = output_words(item, len(item.output_ids), special)
    output = np.zeros(len(item.output_ids), dtype=bool)
    function = function_word_mask(word_texts(item.output_pieces, groups), output_language)
    for g, on, is_function in zip(groups, flaggable, function):
        output[g] = on and not is_function
    source = np.zeros(len(item.source_ids), dtype=bool)
    groups, content = content_words(item.source_pieces, item.source_ids, special)
    function = function_word_mask(word_texts(item.source_pieces, groups), language)
    for g, on, is_function in zip(groups, content, function):
        source[g] = on and not is_function
    return output, source


def _lexicon_evidence(lexicon: Lexicon | None, item: Item | None, sig: Signals, output_groups: list, piece_text):
    """Per source word and per output word, lexicon.gaps() between the two sides; per output word,
    lexicon.expected() and what it expected. Zeros (and None) without a lexicon, pieces or the
    vocabulary's piece texts."""
    source_groups = sig.words
    none = np.zeros(len(source_groups)), np.zeros(len(output_groups)), np.zeros(len(output_groups)), \
        [None] * len(output_groups)
    if lexicon is None or item is None:
        return none
    src, out = word_texts(item.source_pieces, source_groups), word_texts(item.output_pieces, output_groups)
    expected, why = none[2], none[3]
    if piece_text is not None and sig.top_ids is not None:
        expected, why = lexicon.expected(sig.top_ids, sig.top_probs, piece_text, src, out, [g[0] for g in output_groups])
    return np.array(lexicon.gaps(src, out, "source")), np.array(lexicon.gaps(out, src, "target")), expected, why


def features(sig: Signals, item: Item | None = None, special: set | frozenset = frozenset(),
             lexicon: Lexicon | None = None, piece_text=None) -> dict:
    """Word-level features: output words (Wo, F) with their groups, source words (W, F); the
    sentence's features (F,); and the named raw signals per piece. Columns: OUTPUT_FEATURES and
    SOURCE_FEATURES. piece_text: the vocabulary's id -> piece (tokenizer.id_to_piece), for the
    expected translation."""
    lp, pmi = sig.log_p, sig.log_p - sig.log_p_null
    T = len(lp)
    drops = sig.log_p[None, :] - sig.deletion                                     # (W, T)
    deleted = np.asarray(sig.deleted, dtype=bool)
    if item is not None:        # never special pieces or punctuation, whatever was deleted
        deleted = deleted & content_words(item.source_pieces, item.source_ids, special)[1]
    support = drops[deleted].max(0) if deleted.any() else np.zeros(T)            # (T,) best single word's support
    on = deleted if sig.may_be_left_out is None else deleted & sig.may_be_left_out   # words a flag may call left out
    groups, flaggable = output_words(item, T, special)
    # words a flag may call unsupported: flaggable ones less the target language's function words
    may = flaggable if sig.may_be_unsupported is None else flaggable & np.asarray(sig.may_be_unsupported, dtype=bool)
    source_gap, output_gap, expected, expected_why = _lexicon_evidence(lexicon, item, sig, groups, piece_text)
    reverse = reverse_column(sig.reverse_drop, len(groups))
    here = unmet_here(sig, deleted, groups)
    out = np.array([[(-lp[g]).max(), (-pmi[g]).max(), -support[g].max(), -lp[g].mean(), output_gap[i], expected[i],
                     reverse[i], here[i]] for i, g in enumerate(groups)]).reshape(-1, len(OUTPUT_FEATURES))
    per_word = drops.sum(1) if len(drops) else np.zeros(0)
    low, high = INSERTION_RANGE
    gain = [float(np.clip(sig.insertion[w][0], low, high)) if w in sig.insertion and on[w] else None
            for w in range(len(sig.words))]
    src = np.array([[-_slog(per_word[w]), sig.unmet[w].max(initial=0.0), np.log1p(sig.unmet[w].sum()),
                     -_slog(drops[w].max(initial=0.0)), source_gap[w],
                     0.0 if gain[w] is None else gain[w] - low, 0.0 if gain[w] is None else max(gain[w], 0.0)]
                    for w in range(len(sig.words))]).reshape(-1, len(SOURCE_FEATURES))
    lp_w, pmi_w = _window(lp, 2), _window(pmi, 2)
    sentence = np.array([float(lp.mean()), float(pmi.mean()), lp_w.min(), pmi_w.min(), float((pmi_w < 0.5).mean()),
                         _window(pmi, 4).min(), float(np.percentile(pmi, 10))])
    S = sum(len(g) for g in sig.words)
    drop_piece, unmet_piece, source_gap_piece, insertion_piece = np.zeros(S), np.zeros(S), np.zeros(S), np.zeros(S)
    inserted_for = [None] * S                       # the piece put back for the word at each source piece
    for w, group in enumerate(sig.words):
        drop_piece[group], unmet_piece[group] = per_word[w], sig.unmet[w].max(initial=0.0)
        source_gap_piece[group] = source_gap[w]
        if w in sig.insertion and on[w]:
            insertion_piece[group] = sig.insertion[w][0]
            text = "".join(str(piece_text(i)) for i in sig.insertion[w][3]) if piece_text is not None else None
            for j in group:
                inserted_for[j] = (text, sig.insertion[w][0])
    output_gap_piece, expected_piece, expected_for, here_piece = np.zeros(T), np.zeros(T), [None] * T, np.zeros(T)
    for i, g in enumerate(groups):
        output_gap_piece[g], expected_piece[g], here_piece[g] = output_gap[i], expected[i], here[i]
        for t in g:
            expected_for[t] = expected_why[i]
    raw = {"log_p": lp, "pmi": pmi, "deletion_drop": drop_piece, "unmet_demand": unmet_piece, "unmet_here": here_piece}
    if sig.reverse_drop is not None:       # nats; 0 where not tested (a word the model was sure of)
        reverse_piece = np.zeros(T)
        for i, g in enumerate(groups):
            reverse_piece[g] = 0.0 if np.isnan(sig.reverse_drop[i]) else sig.reverse_drop[i]
        raw["reverse_support"] = reverse_piece
    if lexicon is not None:
        raw.update(source_lexicon_gap=source_gap_piece, output_lexicon_gap=output_gap_piece,
                   expected_translation=expected_piece, insertion_gain=insertion_piece)
    return {"output": out, "output_groups": groups, "output_flaggable": may, "output_function": flaggable & ~may,
            "source": src, "source_groups": sig.words, "source_flaggable": on, "source_function": deleted & ~on,
            "sentence": sentence, "raw": raw,
            "expected_for": expected_for, "inserted_for": inserted_for,
            "missing": [] if lexicon is not None else ["lexicon_gap"]}       # (and the expected translation)


FEATURES = {"output": OUTPUT_FEATURES, "source": SOURCE_FEATURES}
FREE_FEATURES = {"output": FREE_OUTPUT_FEATURES, "source": FREE_SOURCE_FEATURES}


def _columns(model: dict, x: np.ndarray, side: str, table: dict = FEATURES) -> np.ndarray:
    """The columns of a side's full feature matrix (table[side]) that `model` was fitted on:
    those its "features" name, else its first len(coef)."""
    names = model.get("features")
    if not names:
        return x[:, :len(model["coef"])]
    full = table[side]
    # C order, like x: the same products, so weights without a newer column score exactly as before it
    return x if list(names) == full else np.ascontiguousarray(x[:, [full.index(n) for n in names]])


def word_scores(weights: dict, f: dict, side: str, function_words: bool = True, table: dict = FEATURES,
                gate: tuple[float, float] = (0.0, np.inf)) -> np.ndarray:
    """Per-piece scores of one side ("output": hallucination, "source": omission) from its
    per-word features (features()): each word's score on all its pieces, 0 where a word cannot
    be flagged; a function word's (function_words.py: of the source for "left out", of the output
    for "unsupported") is FUNCTION_WORD_SHARE of its model score, so it shows its evidence but never
    reaches the flag line (0 with function_words=False,
    as the flag lines are chosen: a line on the unshifted scores says nothing of those). gate: (shift,
    cap) on every word's logit, min(logit + shift, cap) (free_gate: a free translation's sentence gate)."""
    n = len(f["raw"]["log_p" if side == "output" else "deletion_drop"]) if "raw" in f else \
        sum(len(g) for g in f[f"{side}_groups"])          # free.free_features: the groups cover every piece
    scores = np.zeros(n, dtype=np.float64)
    if len(f[f"{side}_groups"]):
        model = weights[side]
        share = np.asarray(f[f"{side}_flaggable"], dtype=np.float64)
        if function_words and f"{side}_function" in f:
            share = share + FUNCTION_WORD_SHARE * np.asarray(f[f"{side}_function"], dtype=np.float64)
        logit = np.minimum(_logit(model, _columns(model, f[side], side, table)) + gate[0], gate[1])
        word = 1.0 / (1.0 + np.exp(-np.clip(logit, -40, 40))) * share
        for g, value in zip(f[f"{side}_groups"], word):
            scores[g] = value
    return scores


def free_gate(model: dict, f: dict) -> tuple[float, float]:
    """(shift, cap) that the sentence gate of the free lines (fit_free.py) puts on a free translation's word
    logits: (0, inf) where the gate is open or absent. The gate is a monotone logistic of free.gate_features
    over the word models' own logits (without their experts, lines added back): at gate logit G under its
    line, every word logit is capped at G - line ("hard") or lowered by slope * (line - G). G never falls
    as a word's evidence rises, so neither does any word's score."""
    gate = model.get("gate")
    if not gate:
        return 0.0, np.inf
    z = {}
    for side in ("output", "source"):
        m = {k: v for k, v in model[side].items() if k != "also"}
        x = _columns(m, f[side], side, FREE_FEATURES)
        z[side] = (_logit(m, x) if len(x) else np.zeros(0)) + gate["offsets"][side]
    below = float(_logit(gate, gate_features(f, z["output"], z["source"])[None])[0]) - gate["line"]
    if below >= 0:
        return 0.0, np.inf
    return (gate["slope"] * below, np.inf) if gate.get("slope") else (0.0, below)


def sentence_features(f: dict, hallucination: np.ndarray) -> np.ndarray:
    """The sentence's own features plus what the piece model found (mean, max, share >= 0.5)."""
    h = np.asarray(hallucination, dtype=np.float64)
    return np.concatenate([f["sentence"], [h.mean(), h.max(), float((h >= 0.5).mean())]])


def _logit(model: dict, x: np.ndarray) -> np.ndarray:
    """A model with "also" takes the larger of its own logit and each of theirs: a maximum of
    non-decreasing functions is non-decreasing, so monotone experts for different kinds of error
    (a word left out inside the sentence, a clause left out) stay monotone."""
    z = (x - np.asarray(model["mean"])) / np.asarray(model["std"])
    logit = z @ np.asarray(model["coef"]) + model["bias"]
    for other in model.get("also", ()):
        logit = np.maximum(logit, ((x - np.asarray(other["mean"])) / np.asarray(other["std"])) @ np.asarray(other["coef"])
                           + other["bias"])
    if "raw_coef" in model:           # the sentence model's extra weights (diagnosis_fit.emphasise)
        logit = logit + x @ np.asarray(model["raw_coef"])
    return logit


def _predict(model: dict, x: np.ndarray) -> np.ndarray:
    """sigmoid(_logit)."""
    return 1.0 / (1.0 + np.exp(-np.clip(_logit(model, x), -40, 40)))


@lru_cache(maxsize=16)
def _read_weights(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def diagnosis_weights(tr) -> dict:
    """MODEL_DIR/diagnosis.json when the model is one of ours shipped in pretrained/ (matched by
    its card) or a local HF folder that has one; else the generic default."""
    card = getattr(tr, "card", {}) or {}
    candidates = []
    if card.get("path"):
        candidates.append(Path(str(card["path"])) / WEIGHTS_FILE)
    if card.get("name"):                  # a card of ours, by name and size (a Hugging Face card says its "source")
        for folder in sorted((REPO_ROOT / "pretrained").glob("*")):
            try:
                other = _read_weights(str(folder / "card.json"))
            except (OSError, ValueError):
                continue
            if all(other.get(key) == card.get(key) for key in ("name", "parameters", "source")):
                candidates.append(folder / WEIGHTS_FILE)
    for path in candidates:
        if path.is_file():
            return _read_weights(str(path))
    from .default import DEFAULT
    return DEFAULT


def _spans(scores: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, s in enumerate(list(scores) + [-1.0]):
        if s >= threshold and start is None:
            start = i
        elif s < threshold and start is not None:
            spans.append((start, i))
            start = None
    return spans


def combine(sig: Signals, weights: dict, item: Item | None = None, special: set | frozenset = frozenset(),
            lexicon: Lexicon | None = None, piece_text=None) -> Diagnosis:
    return scored(features(sig, item, special, lexicon, piece_text), weights, item)


def scored(f: dict, weights: dict, item: Item | None = None) -> Diagnosis:
    """The Diagnosis that `weights` give for these features (features())."""
    hallucination, omission = word_scores(weights, f, "output"), word_scores(weights, f, "source")
    wrong = _written_wrong(hallucination, f["output_groups"], item)
    hallucination, omission = hallucination.astype(np.float32), omission.astype(np.float32)
    sentence = float(_predict(weights["sentence"], sentence_features(f, hallucination)[None])[0])
    raw = f["raw"]
    reads_here = "unmet_here" in weights["output"].get("features", ()) and "unmet_here" in raw
    flags = []
    for a, b in _spans(hallucination, 0.5):
        flags.append(Flag("hallucination", a, b, float(hallucination[a:b].max()), {
            "pieces": list(item.output_pieces[a:b]) if item else [],
            "min_log_p": float(raw["log_p"][a:b].min()),
            "min_source_gain": float(raw["pmi"][a:b].min()),
            **({"lexicon_gap": float(raw["output_lexicon_gap"][a:b].max())} if "output_lexicon_gap" in raw else {}),
            **_expected_evidence(f, raw, a, b),
            **({"reverse_support": float(raw["reverse_support"][a:b].min())} if "reverse_support" in raw else {}),
            **({"unmet_here": float(raw["unmet_here"][a:b].max())} if reads_here else {}),
            **_written_evidence(wrong, f["output_groups"], a, b),
            "explains": "low probability, the source adds little over the prefix alone (pmi, nats)"
                        + (", and no source word is one it usually translates (lexicon gap, 0-1)"
                           if "output_lexicon_gap" in raw else "")
                        + (", and the model of the other direction does not need it to write the source (reverse "
                           "support: how much less likely the source is without it, nats)" if "reverse_support" in raw else "")
                        + (", and a source word wanted another word here, which the translation never writes "
                           "(unmet demand here, 0-1)" if reads_here else "")
                        + _expected_words(f, a, b)}))
    for a, b in _spans(omission, 0.5):
        flags.append(Flag("omission", a, b, float(omission[a:b].max()), {
            "pieces": list(item.source_pieces[a:b]) if item else [],
            "deletion_drop": float(raw["deletion_drop"][a:b].min()),
            "unmet_demand": float(raw["unmet_demand"][a:b].max()),
            **({"lexicon_gap": float(raw["source_lexicon_gap"][a:b].max())} if "source_lexicon_gap" in raw else {}),
            **_inserted_evidence(f, a, b),
            "explains": "the word pulls the model towards pieces the translation never writes (unmet demand), "
                        "deleting it does not lower log p(translation) (nats)"
                        + (", and the words it is usually translated by are missing (lexicon gap, 0-1)"
                           if "source_lexicon_gap" in raw else "") + _inserted_words(f, a, b)}))
    return Diagnosis(sentence, hallucination, omission, flags,
                     signals={k: np.asarray(v, dtype=np.float32) for k, v in raw.items()},
                     missing=list(f.get("missing", [])))


def _inserted(f: dict, a: int, b: int):
    """(piece text, gain) of the piece put back for the source pieces a..b-1, or None."""
    found = [w for w in (f.get("inserted_for") or [None] * b)[a:b] if w and w[0]]
    return max(found, key=lambda w: w[1]) if found else None


def _inserted_evidence(f: dict, a: int, b: int) -> dict:
    got = _inserted(f, a, b)
    return {"inserted_piece": got[0], "insertion_gain": float(got[1])} if got else {}


def _inserted_words(f: dict, a: int, b: int) -> str:
    got = _inserted(f, a, b)
    if not got or got[1] <= 0:
        return ""
    return (f"; with “{got[0].replace(chr(0x2581), '')}” put back, the translation is {got[1]:.1f} nats "
            "more likely")


def _strongest_expectation(f: dict, a: int, b: int):
    """(source word, expected piece, p) of the strongest expected translation over pieces a..b-1."""
    found = [w for w in (f.get("expected_for") or [None] * b)[a:b] if w]
    return max(found, key=lambda w: w[2]) if found else None


def _expected_evidence(f: dict, raw: dict, a: int, b: int) -> dict:
    if "expected_translation" not in raw:
        return {}
    why = _strongest_expectation(f, a, b)
    return {"expected_translation": float(raw["expected_translation"][a:b].max()),
            **({"expected_piece": why[1], "expected_for": why[0].replace("\u2581", "")} if why else {})}


def _expected_words(f: dict, a: int, b: int) -> str:
    why = _strongest_expectation(f, a, b)
    if not why or why[2] < 0.05:
        return ""
    return (f"; here the model expected “{why[1].replace(chr(0x2581), '')}” (p {why[2]:.2f}), the usual translation "
            f"of “{why[0].replace(chr(0x2581), '')}”, which the translation lacks")


def item_of(tr, out) -> Item:
    """The Item a Translation describes (its source ids, fed start token and output ids)."""
    fed = tr.engine.tokenizer.piece_ids(out.target_tokens[:1]) + list(out.output_ids[:-1])
    return Item(list(out.source_ids), fed, list(out.output_ids), list(out.source_tokens), list(out.output_tokens),
                free=not getattr(out, "forced", False))


def free_sentence_features(f: dict, hallucination: np.ndarray, omission: np.ndarray) -> np.ndarray:
    """FREE_SENTENCE_FEATURES of a free translation (higher = more detached): how hard the source is to
    write back from it and how unsure the model was, on average, and what the word models found."""
    sig = f["signals"]
    out_on, src_on = np.asarray(f["output_flaggable"], bool), np.asarray(f["source_flaggable"], bool)
    out_words = np.array([hallucination[g[0]] for g in f["output_groups"]])
    src_words = np.array([omission[g[0]] for g in f["source_groups"]])
    return np.array([-float(sig.rebuild.mean()), -float(sig.log_p.mean()),
                     float((src_words[src_on] >= 0.5).mean()) if src_on.any() else 0.0,
                     float((out_words[out_on] >= 0.5).mean()) if out_on.any() else 0.0,
                     float(omission.max(initial=0.0)), float(hallucination.max(initial=0.0))])


def _written_wrong(hallucination: np.ndarray, groups: list, item: Item | None) -> list:
    """Raise the words free.written_wrong() names to WRITTEN_WRONG_SCORE (in place); their reasons."""
    if item is None:
        return [None] * len(groups)
    why = written_wrong(item.output_pieces, groups)
    for g, reason in zip(groups, why):
        if reason:
            hallucination[g] = np.maximum(hallucination[g], WRITTEN_WRONG_SCORE)
    return why


def _written_evidence(why: list, groups: list, a: int, b: int) -> dict:
    found = [r for g, r in zip(groups, why) if r and a <= g[0] < b]
    return {"written": found[0]} if found else {}


def free_word_scores(model: dict, f: dict, item: Item | None) -> tuple[np.ndarray, np.ndarray, list]:
    """A free translation's per-piece hallucination and omission scores (float32) under the free lines,
    its sentence gate applied, and why each output word is written wrong (those score WRITTEN_WRONG_SCORE)."""
    gate = free_gate(model, f)
    hallucination = word_scores(model, f, "output", table=FREE_FEATURES, gate=gate).astype(np.float32)
    omission = word_scores(model, f, "source", table=FREE_FEATURES, gate=gate).astype(np.float32)
    return hallucination, omission, _written_wrong(hallucination, f["output_groups"], item)


def free_scored(f: dict, model: dict, item: Item) -> Diagnosis:
    """The Diagnosis that `model` (the weights' "free" part, fit_free.py) gives a free translation's
    features (free.free_features): word scores, flags with their evidence, the sentence score."""
    sig = f["signals"]
    hallucination, omission, wrong = free_word_scores(model, f, item)
    x = free_sentence_features(f, hallucination, omission)
    sentence = float(_predict(model["sentence"], x[None])[0]) if "sentence" in model else 0.0
    unshared = np.zeros(len(item.output_ids))         # per output piece: the share of support it does not carry
    for w, g in enumerate(f["output_groups"]):
        unshared[g] = f["output"][w, FREE_OUTPUT_FEATURES.index("reverse_unshared")]
    flags = []
    for a, b in _spans(hallucination, 0.5):
        words = [w for w, g in enumerate(f["output_groups"]) if a <= g[0] < b]
        why = [f["expected_why"][w] for w in words if f["expected_why"][w]]
        strongest = max(why, key=lambda x: x[2]) if why else None
        flags.append(Flag("hallucination", a, b, float(hallucination[a:b].max()), {
            "pieces": list(item.output_pieces[a:b]),
            "min_log_p": float(sig.log_p[a:b].min()),
            "reverse_support_share": float(-unshared[a:b].min()),
            "written_before": bool(f["output"][words, FREE_OUTPUT_FEATURES.index("copy")].max(initial=0.0) > 0),
            **_written_evidence(wrong, f["output_groups"], a, b),
            **({"expected_translation": float(strongest[2]), "expected_piece": strongest[1],
                "expected_for": strongest[0].replace("\u2581", "")} if strongest else {}),
            "explains": "the model of the other direction, reading the translation, needs this word for no source "
                        "word (support share, 0-1, of the source piece it supports most), the model doubts it (log p), "
                        "or it repeats a word written before"}))
    for a, b in _spans(omission, 0.5):
        flags.append(Flag("omission", a, b, float(omission[a:b].max()), {
            "pieces": list(item.source_pieces[a:b]),
            "rebuild_log_p": float(sig.rebuild[a:b].min()),
            "explains": "the model of the other direction, reading the translation, can hardly write this source "
                        "word back (rebuild log p, nats)"}))
    signals = {"log_p": sig.log_p, "entropy": sig.entropy, "reverse_support_share": -unshared, "rebuild": sig.rebuild}
    return Diagnosis(sentence, hallucination, omission, flags,
                     signals={k: np.asarray(v, dtype=np.float32) for k, v in signals.items()}, judged_as="free")


def _summarised(d: Diagnosis, item: Item) -> Diagnosis:
    """d with its summary: the one sentence the app shows (viz.diagnosis.summary_line)."""
    probs = np.exp(np.asarray(d.signals["log_p"], dtype=np.float64))
    flags = [(f.kind, f.start, f.end, f.score, f.evidence) for f in d.flags]
    d.summary = summary_line(flags, d.hallucination, d.omission, item.output_pieces, item.source_pieces, probs,
                             d.sentence_score, d.missing, free=d.judged_as == "free")
    return d


def diagnose_items(tr, items: list[Item], head_mask=None, weights: dict | None = None,
                   budget: int | None = None, bf16: bool = False) -> list[Diagnosis]:
    """Many sentences at once (the forced passes of all of them share batches); bf16: faster
    passes under bfloat16 autocast (the CLI's --bf16), scores within a few 1e-2 of float32.
    Items marked free (the model's own translations) are judged by free.py's signals and the
    weights' "free" lines where the weights have them and the model of the other direction is
    beside the model; every other item as a given translation."""
    for it in items:
        if not it.output_ids or not it.source_ids:
            raise ValueError("diagnosis needs at least one source piece and one output piece")
    weights = weights or diagnosis_weights(tr)
    special, lexicon = frozenset(tr.engine.special_ids), lexicon_for(tr)
    free_model = weights.get("free")
    wants_reverse = REVERSE_FEATURE in weights["output"].get("features", ())
    reverse = reverse_for(tr) if wants_reverse or (free_model and any(it.free for it in items)) else None
    free = [k for k, it in enumerate(items) if it.free and free_model and reverse is not None]
    given = [k for k in range(len(items)) if k not in set(free)]
    found: list = [None] * len(items)
    if free:
        mine = [items[k] for k in free]
        for k, it, sig in zip(free, mine, compute_free_signals(tr, reverse, mine, tr.gates(head_mask), budget, bf16)):
            f = free_features(sig, it, special, lexicon, tr.engine.tokenizer.id_to_piece, getattr(tr, "source_lang", None),
                              getattr(tr, "target_lang", None))
            found[k] = free_scored(f, free_model, it)
    if given:
        mine = [items[k] for k in given]
        signals = compute_signals(tr, mine, tr.gates(head_mask), budget, bf16, lexicon)
        if wants_reverse and reverse is not None:
            add_reverse(reverse, mine, signals, special, budget, bf16)
        for k, sig, it in zip(given, signals, mine):
            found[k] = combine(sig, weights, it, special, lexicon, tr.engine.tokenizer.id_to_piece)
            if wants_reverse and reverse is None:      # the weights read a column this folder cannot give: it is 0
                found[k].missing.append("reverse_support")
    return [_summarised(d, it) for d, it in zip(found, items)]


def diagnose(tr, out, head_mask=None, weights: dict | None = None) -> Diagnosis:
    """The Diagnosis of one Translation (free or forced, ours or Hugging Face)."""
    return diagnose_items(tr, [item_of(tr, out)], head_mask, weights)[0]


def diagnose_of(tr, out, call) -> Diagnosis:
    """The analysis (transformer/analyses.py): out's Diagnosis under its head_mask."""
    return diagnose(tr, out, out.head_mask)
