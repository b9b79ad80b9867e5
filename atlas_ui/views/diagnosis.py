"""Diagnosis: which output pieces the source does not seem to support and which source words the
translation seems to leave out, each score next to the signals behind it; a click on an output
piece opens its step in Decoding steps (cross-attention, contributions, top-k)."""
from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from viz import token_probability_html
from viz.diagnosis import EVIDENCE_HELP, diagnosis_figure, diagnosis_selection, missing_note, source_strip_html, words_of

from ..ui import state
from ..runs.diagnosis import DiagnosisFailed, Findings, diagnosis_for
from ..ui.common import PRESENTER_MAX_HEIGHT, chart, escape_md, shared_figure
from .base import View, ViewContext

STEPS_VIEW = "Decoding steps"


def _on_piece_pick(key: str, steps: int) -> None:
    """A click on an output bar: that piece's step, in the step-by-step view."""
    step = diagnosis_selection((st.session_state.get(key) or {}).get("selection") or {})
    if step is not None and 0 <= step < steps:
        state.put("step", int(step))
        state.put("view", STEPS_VIEW)


def flag_table(findings, result) -> pd.DataFrame:
    """One row per flagged span: what, where, its score and the numbers behind it."""
    rows = []
    for kind, start, end, score, evidence in findings.flags:
        pieces = result.output_tokens if kind == "hallucination" else result.source_tokens
        numbers = {k: round(v, 3) for k, v in evidence.items() if isinstance(v, float)}
        expected = findings.expectations().get(start) if kind == "hallucination" else None
        put_back = findings.put_back().get(start) if kind == "omission" else None
        rows.append({"flag": "unsupported" if kind == "hallucination" else "left out",
                     "text": words_of(pieces[start:end]) or " ".join(map(str, pieces[start:end])),
                     "pieces": f"{start + 1}–{end}" if end - start > 1 else str(start + 1),   # counted from 1
                     "score": round(score, 3),
                     **({"expected word": f"{words_of([expected[0]])} (for {words_of([expected[1]])})"}
                        if expected else {}),
                     **({"expected word": f"{words_of([put_back])} (put back: "
                                          f"+{evidence['insertion_gain']:.1f} nats)"} if put_back else {}),
                     **numbers})
    return pd.DataFrame(rows)


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    findings = diagnosis_for(ctx.run, result)
    if isinstance(findings, DiagnosisFailed):
        st.info("No diagnosis for this translation: " + escape_md(findings.reason, 200))
        return None
    st.markdown(source_strip_html(result.source_tokens, findings.omission, threshold=findings.threshold,
                                  show_space=display.show_space), unsafe_allow_html=True)
    what = "the forced translation" if result.forced else "the model's translation"
    # presenter: the height chart() draws it at (560 was cut to it, and the y numbers, chosen for
    # 560 px, thinned to one a panel)
    height = PRESENTER_MAX_HEIGHT if display.presenter else 470
    # a room sees the two scores: six panels in 480 px left each ~23 px; the evidence panels are
    # drawn outside presenter mode, and the flag table below has the numbers
    output_evidence = {} if display.presenter else findings.output_evidence
    source_evidence = {} if display.presenter else findings.source_evidence
    fig = shared_figure(result, ("diagnosis", display.show_space, height), lambda: diagnosis_figure(
        findings.hallucination, result.output_tokens, findings.omission, result.source_tokens,
        output_evidence=output_evidence, source_evidence=source_evidence,
        threshold=findings.threshold, show_space=display.show_space, height=height,
        label_size=16 if display.presenter else None,          # presenter type's tick labels (18 - 2 px)
        # the score on a second line: one line ran past a phone's 390 px
        title=f"Diagnosis of {what}", note=f"detached score {findings.sentence_score:.2f}"))
    chart(fig, "diagnosis_chart", on_select=partial(_on_piece_pick, "diagnosis_chart", len(result.output_tokens)),
          selection_mode="points")
    helps = " · ".join(text for name, text in EVIDENCE_HELP.items()
                       if name in output_evidence or name in source_evidence)
    if display.presenter:
        helps = "Leave presenter mode to see the evidence behind each score."
    st.caption("Click an output bar to open its step in Decoding steps. Scores ≥ "
               f"{findings.threshold:g} are coloured (purple: unsupported, green: left out). " + helps
               + (" " + escape_md(missing_note(findings.missing), 300) if findings.missing else ""))
    if findings.flags:
        st.dataframe(flag_table(findings, result), hide_index=True, key="diagnosis_flags")
    return fig


VIEW = View(
    name="Diagnosis", title="What went wrong",
    explains="Which output pieces the source does not seem to support (possible hallucinations) and which "
             "source words the translation seems to leave out, each score next to the signals behind it; "
             "click an output piece to open its step.",
    render=render)


def strip_marks(findings, result) -> dict:
    """token_probability_html keywords: the unsupported pieces framed, and the diagnosis's one
    sentence after the legend (what was found, that nothing was, or why there is no diagnosis)."""
    if isinstance(findings, DiagnosisFailed):
        return dict(note="Diagnosis: unavailable for this translation (" + findings.reason[:120] + ").")
    if not isinstance(findings, Findings):
        return {}
    # dg.summary, the same words the Python API gives (viz.diagnosis.summary_line), missing-signal note included
    return dict(unsupported=findings.hallucination, threshold=findings.threshold,
                note="Diagnosis: " + findings.summary)


def translation_strip(page_diagnosis, result, show_space: bool, current: int | None):
    """The shaded translation strip with the diagnosis's marks and sentence. While the diagnosis
    of a new run is still being computed, the strip is drawn plain in a placeholder; returns a
    function that redraws it marked once it is in (call it after the view), else None."""
    def html(findings) -> str:       # the same for every session on this run (findings are per run too)
        return shared_figure(result, ("translation_strip", show_space, current, type(findings).__name__), lambda:
                             token_probability_html(result.output_tokens, result.probs(), show_space=show_space,
                                                    current=current, **strip_marks(findings, result)))
    if page_diagnosis is None or not page_diagnosis.pending:
        st.markdown(html(getattr(page_diagnosis, "findings", None)), unsafe_allow_html=True)
        return None
    slot = st.empty()
    slot.markdown(html(None), unsafe_allow_html=True)
    return lambda: slot.markdown(html(page_diagnosis.finish()), unsafe_allow_html=True)
