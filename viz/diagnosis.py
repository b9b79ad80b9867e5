"""What went wrong: the diagnosis's scores drawn next to their evidence, the source strip with
left-out words marked, and the one sentence that says what was found.

Pure: arrays + pieces in, a go.Figure / an HTML string / plain text out. Scores are in [0, 1],
higher = more suspicious (transformer/diagnosis/scores.py); evidence is any named per-piece signal."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (MAIN_WIDTH, as_array, as_probabilities, figure_title, matrix_margins, point_customdata,
                    tick_font_size, token_axis, x_label_room)
from ._figure import build_figure
from ._labels import display_tokens, escape_html, escape_label, is_special, show_piece
from .export import LABEL_PITCH
from .panels import UNSUPPORTED

OMITTED = "#1b7837"                 # green: "the translation may leave this source word out"
OMITTED_MARK = f"border:2px dotted {OMITTED};"
CALM = "#c9c9c9"                    # a piece under the threshold
OUTPUT, SOURCE = 0, 1               # customdata[0]: which part of the figure a bar belongs to
EVIDENCE_NAMES = {"log_p": "log p (nats)", "pmi": "source gain (nats)", "deletion_drop": "drop without it (nats)",
                  "reverse_support_share": "support share", "rebuild": "written back (log p)",
                  "unmet_demand": "unmet demand"}
EVIDENCE_HELP = {"log_p": "log p: low = the model doubts the piece",
                 "reverse_support_share": "support share: of the support the source piece this word helps most gets "
                                          "from the translation (the other direction's model reading it), this "
                                          "word's part; ≈ 0 = it serves no source word",
                 "rebuild": "written back: log p of the source piece when the other direction's model writes the "
                            "source from the translation; very low = the translation lacks it",
                 "pmi": "source gain: log p(piece | source) − log p(piece | no source), ≤ 0 = the source adds nothing",
                 "deletion_drop": "drop: the fall of log p(translation) when the source word is deleted, "
                                  "≈ 0 or below = unused",
                 "unmet_demand": "unmet demand: the probability the word moves onto pieces the translation "
                                 "never writes, high = its translation is missing"}
MAX_LISTED = 3                      # spans named in the summary sentence


# A panel's y numbers (plotly.js's 12 px type): three where they stand TICKS_3_PITCH font sizes
# apart, else two where they stand LABEL_PITCH apart (a label's box is ~1.3 em tall), else one.
# Six panels in the app's 470-480 px are ~25 px each: three numbers stood on top of each other there.
TICK_FONT, TICKS_3_PITCH = 12, 2.0
NICE = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)      # a round number's first digits


def _nice(x: float) -> float:
    """A round number between 3/4 |x| and |x|, with x's sign: a tick near the end of the bars."""
    if x == 0:
        return 0.0
    power = 10.0 ** np.floor(np.log10(abs(x)))
    first = max(m for m in NICE + (10,) if m * power <= abs(x) * (1 + 1e-9))
    return float(np.copysign(round(first * power, 12), x))


def _fitting(choices: list, span: list, panel_px: float, font: float = TICK_FONT) -> list:
    """The first tick list of `choices` whose neighbours stand far enough apart on a `panel_px`-px
    panel showing `span`, else the last. Lists put the far end first: presenter_figure thins a
    crowded axis to every k-th tick from the first, which then keeps the end, not 0."""
    px = panel_px / max(span[1] - span[0], 1e-12)
    for ticks in choices:
        values = sorted(ticks)
        need = (TICKS_3_PITCH if len(ticks) > 2 else LABEL_PITCH) * font
        if len(values) < 2 or min(b - a for a, b in zip(values, values[1:])) * px >= need:
            return list(ticks)
    return list(choices[-1])


def value_ticks(values, panel_px: float, font: float = TICK_FONT) -> tuple[list, list]:
    """(range, tickvals) of an evidence panel `panel_px` px tall: its bars from 0 with 5% to spare,
    round numbers near the far end and at 0 (and halfway, or near the other end, where there is
    room for three); where 0 stands too close, near both ends (bars on both sides; the zero line is
    drawn), else near the far end alone."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    lo, hi = min(float(finite.min(initial=0.0)), 0.0), max(float(finite.max(initial=0.0)), 0.0)
    if hi - lo < 1e-9:
        hi = lo + 1.0
    pad = 0.05 * (hi - lo)
    span = [lo - pad if lo < 0 else 0.0, hi + pad if hi > 0 else 0.0]
    far, other = (lo, hi) if -lo >= hi else (hi, lo)
    end = _nice(far)
    three = [end, 0.0, _nice(other)] if abs(other) >= abs(far) / 3 else [end, end / 2, 0.0]
    both = [[end, _nice(other)]] if _nice(other) != 0 else []     # further apart than the end and 0
    return span, _fitting([three, [end, 0.0], *both, [end]], span, panel_px, font)


def _scores(values, pieces: Sequence, name: str) -> np.ndarray:
    scores = as_probabilities(values, name)
    if scores.ndim != 1 or len(scores) != len(pieces):
        raise ValueError(f"{name} has shape {scores.shape} for {len(pieces)} pieces")
    return scores


def source_strip_html(tokens: Sequence[str], omission, *, threshold: float = 0.5, show_space: bool = True) -> str:
    """The source pieces in a row, those the translation likely leaves out framed in dotted green,
    with the score on hover. Escaped for st.markdown(unsafe_allow_html=True); one line, no newline."""
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of pieces, not a string")
    tokens = [str(t) for t in tokens]
    scores = _scores(omission, tokens, "omission")
    spans = []
    for i, (tok, score) in enumerate(zip(tokens, scores.tolist())):
        label = escape_html(show_piece(tok, show_space=show_space))
        left_out = score >= threshold
        title = f"source piece {i + 1}: {label} · " + (f"left out? {score:.2f}" if left_out else f"left out {score:.2f}")
        spans.append(f'<span class="aa-source{" aa-omitted" if left_out else ""}" title="{title}" data-index="{i}" '
                     f'style="padding:1px 3px;margin:1px;border-radius:3px;white-space:pre;display:inline-block;'
                     f'{OMITTED_MARK if left_out else "border:1px solid #e3e3e3;"}">{label}</span>')
    legend = "" if not (scores >= threshold).any() else (
        f'<span class="aa-legend-omitted" style="font-size:0.75em;color:#666;margin-left:10px;'
        f'white-space:nowrap"><span style="{OMITTED_MARK}padding:0 6px">framed</span> = left out of the '
        f'translation? (diagnosis)</span>')
    return f'<div class="aa-sources" style="line-height:1.9">{"".join(spans)}{legend}</div>'


def _bars(values: np.ndarray, flagged: np.ndarray, part: int, labels: list, name: str, axis: str,
          fmt: str) -> dict:
    customdata = [[part, i, lab] for i, lab in enumerate(labels)]
    return dict(type="bar", x=list(range(len(values))), y=values.tolist(), name=escape_label(name),
                xaxis=f"x{axis}", yaxis=f"y{axis}", customdata=customdata, showlegend=False,
                marker=dict(color=[UNSUPPORTED if part == OUTPUT and f else OMITTED if f else CALM
                                   for f in flagged.tolist()]),
                hovertemplate=f"%{{customdata[1]}} %{{customdata[2]}}<br>{escape_label(name)} %{{y:{fmt}}}"
                              "<extra></extra>")


def diagnosis_figure(hallucination, output_tokens: Sequence[str], omission, source_tokens: Sequence[str], *,
                     output_evidence: Mapping[str, Sequence[float]] | None = None,
                     source_evidence: Mapping[str, Sequence[float]] | None = None, threshold: float = 0.5,
                     title: str = "", note: str = "", show_space: bool = False,
                     height: int | None = None, label_size: float | None = None) -> go.Figure:
    """Stacked panels sharing their piece axis: each output piece's "unsupported" score (T,), then
    each of its evidence signals; then each source piece's "left out" score (S,) and its evidence.
    Pieces at or above `threshold` are coloured (purple: unsupported, green: left out). Every bar's
    customdata is [part (0 output, 1 source), index, label], so a click names its piece.
    `note`: the title's second, smaller line (one long line is cut on a phone). Each panel's y axis
    gets as many numbers (3, 2 or 1) as its height in px keeps apart (value_ticks). `label_size`: the
    px the output pieces' labels will be drawn at, where larger than this figure's (presenter type):
    the room between the two parts is made for them, upright."""
    outputs, sources = [str(t) for t in output_tokens], [str(t) for t in source_tokens]
    h, o = _scores(hallucination, outputs, "hallucination"), _scores(omission, sources, "omission")
    panels = [(OUTPUT, "unsupported score", h, h >= threshold, ".2f")]
    for name, values in (output_evidence or {}).items():
        panels.append((OUTPUT, EVIDENCE_NAMES.get(name, name), _evidence(values, outputs, name), h >= threshold, ".2f"))
    panels.append((SOURCE, "left-out score", o, o >= threshold, ".2f"))
    for name, values in (source_evidence or {}).items():
        panels.append((SOURCE, EVIDENCE_NAMES.get(name, name), _evidence(values, sources, name), o >= threshold, ".2f"))
    labels = {OUTPUT: display_tokens(outputs, show_space=show_space),
              SOURCE: display_tokens(sources, show_space=show_space)}
    n, gap = len(panels), 0.08
    height = height or 120 + 95 * n
    # the numbers' and the source pieces' room from the start: plotly.js draws the figure once
    margin = matrix_margins(["−0.00"], labels[SOURCE], y_size=12, x_size=tick_font_size(len(sources)),
                            colorbar=None, top=(66 if note else 50) if title else 20, y_title=False)
    plot_px = max(height - margin["t"] - margin["b"], 1)
    # the output pieces' labels sit between the two parts, level or upright as plotly.js will draw them
    labels_px = x_label_room(labels[OUTPUT], max(tick_font_size(len(outputs)), label_size or 0),
                             MAIN_WIDTH - margin["l"] - margin["r"])
    below = min(max(0.06, (labels_px + 4) / plot_px), 0.3)
    size = (1.0 - gap * n - below) / n                 # gap: each panel's name above it
    panel_px = size * plot_px                          # each panel's height on the screen
    traces, layout, names = [], {}, []
    top = 1.0 - gap
    for k, (part, name, values, flagged, fmt) in enumerate(panels):
        axis = "" if k == 0 else str(k + 1)
        lastof = k == n - 1 or panels[k + 1][0] != part
        traces.append(_bars(values, flagged, part, labels[part], name, axis, fmt))
        if name.endswith("score"):
            ticks = _fitting([[0, threshold, 1], [1, 0], [1]], [0.0, 1.0], panel_px)
            layout[f"yaxis{axis}"] = dict(range=[0, 1], tickvals=ticks, automargin=True)
        else:
            span, ticks = value_ticks(values, panel_px)
            layout[f"yaxis{axis}"] = dict(range=span, tickvals=ticks, automargin=True, zeroline=True,
                                          zerolinecolor="#999")
        layout[f"yaxis{axis}"].update(domain=[max(top - size, 0.0), top], showgrid=True, gridcolor="#eeeeee")
        # the panel's name above it, not as an axis title: short panels would stack turned titles
        names.append(dict(text=f"<b>{escape_label(name)}</b>", xref="paper", yref="paper", x=0.0, y=top,
                          xanchor="left", yanchor="bottom", showarrow=False, font=dict(size=12, color="#444")))
        x = token_axis(labels[part] if lastof else None, "", values=None)
        x.update(anchor=f"y{axis}", showticklabels=lastof, range=[-0.5, len(values) - 0.5])
        layout[f"xaxis{axis}"] = x
        top -= size + gap + (below if lastof and part == OUTPUT else 0.0)
    link_axes(layout, panels)
    layout.update(title=figure_title(title, note), height=height, plot_bgcolor="white", annotations=names,
                  margin=margin, bargap=0.25, clickmode="event+select", dragmode=False)
    return build_figure(traces, layout)


def link_axes(layout: dict, panels: list) -> None:
    """Panels of one part share their x axis (a piece sits at the same place in each)."""
    first = {}
    for k, (part, *_rest) in enumerate(panels):
        name = "xaxis" + ("" if k == 0 else str(k + 1))
        ref = "x" + ("" if k == 0 else str(k + 1))
        if part in first:
            layout[name]["matches"] = first[part]
        else:
            layout[name].pop("matches", None)
            first[part] = ref


def _evidence(values, pieces: list, name: str) -> np.ndarray:
    arr = np.nan_to_num(as_array(values, name, ndim=1).astype(float), nan=0.0, posinf=0.0, neginf=-50.0)
    if len(arr) != len(pieces):
        raise ValueError(f"{name} has {len(arr)} values for {len(pieces)} pieces")
    return arr


def diagnosis_selection(points) -> int | None:
    """The output piece (step) of the first clicked bar of an output panel, else None."""
    if isinstance(points, Mapping):
        inner = points.get("selection", points)
        points = inner.get("points", []) if isinstance(inner, Mapping) else []
    for point in points or []:
        cd = point_customdata(point) if isinstance(point, Mapping) else None
        if cd is not None and len(cd) >= 2:
            try:
                part, index = int(cd[0]), int(cd[1])
            except (TypeError, ValueError):
                continue
            if part == OUTPUT and index >= 0:
                return index
    return None


def words_of(pieces: Sequence[str], limit: int = 60) -> str:
    """Pieces as the text they spell ("▁the", "▁ca", "t" -> "the cat"), special pieces left out,
    cut at `limit` characters."""
    text = "".join(str(p) for p in pieces if not is_special(str(p)))
    text = " ".join(text.replace("\u2581", " ").replace("\u0120", " ").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _span_name(tokens: Sequence[str], start: int, end: int) -> str:
    """“the words” of a span; a span of special pieces only is named for what it means (a flagged
    </s> is the translation ending where the source does not), never by its literal markup."""
    words = words_of(tokens[start:end], 40)
    if words:
        return f"“{words}”"
    return "the end of the sentence" if any(str(p) == "</s>" for p in tokens[start:end]) else "a special piece"


def _expected_note(expectation: tuple | None) -> str:
    """' (the model expected “Fahrrad” for “bicycle”)' from ("Fahrrad", "bicycle"), or ""."""
    if not expectation:
        return ""
    wanted, source_word = (words_of([str(w)], 30) for w in expectation[:2])
    return f" (the model expected “{wanted}” for “{source_word}”)" if wanted and source_word else ""


def _put_back_note(word: str | None) -> str:
    """' (the translation is likelier with “Fahrrad” put back)', or ""."""
    shown = words_of([str(word)], 30) if word else ""
    return f" (the translation is likelier with “{shown}” put back)" if shown else ""


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    rest = len(names) - MAX_LISTED
    return shown + (f" and {rest} more" if rest > 0 else "")


# What the tool did, not a verdict: flags find about 72-74% of omitted and 76-79% of substituted words
# (cross-validated on Multi30k val, docs/diagnosis.md). Short, so that on a phone the strip and its chart
# fit the first screen (tests/test_browser_room.py).
NOTHING_FLAGGED = "No word is flagged as unsupported or left out."
# The model's own translation: say what was checked and how much it finds, never that all is well
# (issue 51; the share measured on hand-labelled own translations of Multi30k val, docs/diagnosis.md).
NOTHING_FLAGGED_FREE = ("No word is flagged; the checks find about 3 in 4 of the words a reader "
                        "marks wrong or missing.")
UNSURE_P = 0.01                     # a piece this unlikely is named even when nothing is flagged
CANDIDATE_SCORE = 0.2               # an unflagged word named when the model is unsure (issue 30's "bike": 0.28)
DETACHED = 0.9                      # sentence score from which the whole translation is called detached
                                    # (Multi30k val: >= 97% of detached cases, <= 1.7% of correct ones)


def _word_around(tokens: Sequence[str], t: int) -> tuple[int, int]:
    """The pieces [a, b) of the word piece t belongs to (a word starts at "▁"/"Ġ" or after a special piece)."""
    def mark(piece: str) -> bool:            # punctuation and special pieces are words of their own
        return is_special(piece) or not any(ch.isalnum() for ch in piece)

    def starts(i):
        piece = str(tokens[i])
        return i == 0 or piece.startswith(("\u2581", "\u0120")) or mark(piece) or mark(str(tokens[i - 1]))
    a = t
    while not starts(a):
        a -= 1
    b = t + 1
    while b < len(tokens) and not starts(b):
        b += 1
    return a, b


def diagnosis_summary(flags: Sequence[tuple], output_tokens: Sequence[str], source_tokens: Sequence[str],
                      probs: Sequence[float] | None = None, unsure: bool = False,
                      detached: float | None = None, expected: Mapping[int, tuple] | None = None,
                      candidate: tuple | None = None, put_back: Mapping[int, str] | None = None,
                      nothing: str = NOTHING_FLAGGED) -> str:
    """One plain-text sentence (escape it to show it): exactly the flagged spans, in words, or
    that nothing was flagged. flags: (kind "hallucination" | "omission", start, end, score), end
    exclusive. It never says that nothing was flagged, alone, while a piece has p < 0.01 (`probs`, one per
    output piece) or the page says the sentence is outside what the model knows (`unsure`); a
    `detached` sentence score >= 0.5 is said first (the whole translation, not one word, is off).
    expected: an unsupported span's start -> (the word the model expected there, the source word
    it usually translates), said after that span's name. candidate: the unflagged word with the
    highest score, (kind, start, end, score): named when nothing is flagged and the model is unsure,
    so the reader knows where to look first. put_back: a left-out span's start -> the word whose
    return makes the translation likelier, said after that span's name. nothing: the sentence for
    nothing flagged (what was checked: NOTHING_FLAGGED, or NOTHING_FLAGGED_FREE for a free translation)."""
    if detached is not None and detached >= 0.5:
        rest = diagnosis_summary(flags, output_tokens, source_tokens, expected=expected, put_back=put_back) if flags else ""
        whole = ("The whole translation looks detached from the source" if detached >= DETACHED
                 else "The translation looks partly unsupported by the source or incomplete")
        return f"{whole} (sentence score {detached:.2f})." + (" " + rest if rest else "")
    unsupported = [_span_name(output_tokens, a, b) + _expected_note((expected or {}).get(a))
                   for kind, a, b, _ in flags if kind == "hallucination"]
    omitted = [_span_name(source_tokens, a, b) for kind, a, b, _ in flags if kind == "omission"]
    back = next((w for kind, a, _b, _s in flags if kind == "omission" for w in [(put_back or {}).get(a)] if w), None)
    parts = []
    def plural(names):
        return len(names) > 1 or (names[0].startswith("“") and " " in names[0].split("” (")[0])
    if unsupported:
        many = plural(unsupported)
        parts.append(f"{_listed(unsupported)} look{'' if many else 's'} unsupported by the source")
    if omitted:
        many = plural(omitted)
        parts.append(f"{_listed(omitted)} in the source look{'' if many else 's'} left out" + _put_back_note(back))
    if parts:
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "."
    lowest = None
    if probs is not None and len(probs) == len(output_tokens) and len(probs):
        t = int(np.argmin(np.asarray(probs, dtype=float)))
        if float(probs[t]) < UNSURE_P and not is_special(str(output_tokens[t])):
            lowest = (t, float(probs[t]))
    if lowest is None and not unsure:
        return nothing
    why = []
    if lowest is not None:
        a, b = _word_around(output_tokens, lowest[0])
        piece = "" if b - a == 1 else f" to its piece “{words_of(output_tokens[lowest[0]:lowest[0] + 1])}”"
        why.append(f"in {_span_name(output_tokens, a, b)} it gave p = {lowest[1]:.3f}{piece}")
    if unsure:
        why.append("its pieces' mean probability is low")
    hint = ""
    if candidate is not None and candidate[3] >= CANDIDATE_SCORE:
        kind, a, b, score = candidate
        hint = (f" The likeliest {'unsupported word' if kind == 'hallucination' else 'left-out word'} is "
                f"{_span_name(output_tokens if kind == 'hallucination' else source_tokens, a, b)}"
                f"{'' if kind == 'hallucination' else ' in the source'} (score {score:.2f}, under the flag threshold).")
    return ("No word is flagged, but the model is unsure of this translation (" + "; ".join(why) + "): the "
            "sentence may be outside what it knows, where these scores are less reliable. Read it with care."
            + hint)


def strongest_unflagged(hallucination, omission, output_tokens: Sequence[str], source_tokens: Sequence[str],
                        threshold: float = 0.5) -> tuple | None:
    """(kind, start, end, score) of the word with the highest score under `threshold`, either side,
    or None: diagnosis_summary's candidate."""
    best = None
    for kind, scores, tokens in (("hallucination", hallucination, output_tokens), ("omission", omission, source_tokens)):
        scores = np.asarray(scores, dtype=float)
        under = np.where(scores < threshold, scores, -1.0)
        if len(under) and under.max() > 0 and (best is None or under.max() > best[3]):
            a, b = _word_around(tokens, int(under.argmax()))
            best = (kind, a, b, float(under.max()))
    return best


# The app's one line under a translation, and dg.summary (api.md): built here once, from the flags and
# scores a Diagnosis carries, so the Python API and the page read the same words.
LOW_CONFIDENCE = 0.35       # mean piece probability under which a translation gets the "outside" note
EXPECTED_P = 0.05           # a weaker pull towards a missing word's translation is not named
SIGNAL_NAMES = {"log_p": "log p", "pmi": "contrastive conditioning (source gain)",
                "deletion_drop": "source-word deletion (coverage)", "unmet_demand": "unmet demand",
                "lexicon_gap": "a lexicon of its training data (lexicon gap, expected translation, insertion gain)",
                "reverse_support": "the model of the other direction (reverse support), not beside this copy"}


def flag_expectations(flags: Sequence[tuple]) -> dict:
    """start -> (expected piece, source word) of each unsupported flag (kind, start, end, score, evidence)
    where the model expected another word's translation (p >= EXPECTED_P)."""
    return {start: (evidence["expected_piece"], evidence["expected_for"])
            for kind, start, _end, _score, evidence in flags
            if kind == "hallucination" and "expected_piece" in evidence
            and evidence.get("expected_translation", 0.0) >= EXPECTED_P}


def flag_put_backs(flags: Sequence[tuple]) -> dict:
    """start -> the piece whose return makes the translation likelier (insertion gain > 0), per left-out flag."""
    return {start: evidence["inserted_piece"] for kind, start, _end, _score, evidence in flags
            if kind == "omission" and evidence.get("insertion_gain", 0.0) > 0 and evidence.get("inserted_piece")}


def missing_note(missing: Sequence[str]) -> str:
    """Which signals this model could not give (the others are still shown), or ""."""
    if not missing:
        return ""
    return f"This model cannot give {', '.join(SIGNAL_NAMES.get(m, m) for m in missing)}; the scores use the other signals."


def summary_line(flags: Sequence[tuple], hallucination, omission, output_tokens: Sequence[str],
                 source_tokens: Sequence[str], probs, sentence_score: float, missing: Sequence[str] = (),
                 free: bool = False, threshold: float = 0.5) -> str:
    """dg.summary: diagnosis_summary() of a Diagnosis's flags (kind, start, end, score, evidence), with the
    unsure note from the pieces' mean probability, then the missing-signal note."""
    probs = np.asarray(probs, dtype=np.float64)
    text = diagnosis_summary([f[:4] for f in flags], output_tokens, source_tokens, probs=probs,
                             unsure=bool(len(probs)) and float(probs.mean()) < LOW_CONFIDENCE, detached=sentence_score,
                             expected=flag_expectations(flags), put_back=flag_put_backs(flags),
                             candidate=strongest_unflagged(hallucination, omission, output_tokens, source_tokens, threshold),
                             nothing=NOTHING_FLAGGED_FREE if free else NOTHING_FLAGGED)
    note = missing_note(missing)
    return text + (" " + note if note else "")
