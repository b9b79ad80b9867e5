"""The page's run: its key, named once for the whole script run (page_run; every view and cached run
derives its keys from it), its translation with a short message for what cannot be translated, and
the translation line above the view."""
from __future__ import annotations

import contextlib

import streamlit as st

from ..runs.catalogue import ModelRef
from ..runs.translation import ExplainFailed, explained_key, translate, translate_explained
from ..runs.warm import RunKey, holds
from ..server.settings import MAX_CHARS, max_concurrent
from ..ui.common import Display, escape_md
from ..views.diagnosis import translation_strip

EMPTY_PROMPT = "Type a sentence above, or pick an example, to see its attention."


def page_run(model: ModelRef, device: str, text: str, reference: str, beam: int, explain: bool = False):
    """The run the input asks for, named once for the whole page run (every view and cached run
    below derives its keys from it), with notices for long or empty text; None when there is
    nothing to translate. explain: also norm-based attention and contributions (only for the views
    that show them)."""
    if len(text) > MAX_CHARS:
        st.warning(f"The text is longer than {MAX_CHARS} characters; only the first {MAX_CHARS} are used.")
        text = text[:MAX_CHARS]
    if not text.strip():
        st.info(EMPTY_PROMPT)
        return None
    target = reference if reference.strip() else None
    return RunKey(model, device, text, 1 if target else beam, target, (), explain)


def run_translation(run: RunKey | None, limit: int):
    """Translate the page's run; returns a Result or None (message shown)."""
    if run is None:
        return None
    try:
        with contextlib.nullcontext() if translation_held(run) else st.spinner("Translating…"):
            result = translate_input(run)
    except ValueError as exc:
        if "empty" in str(exc) or "no pieces" in str(exc):
            st.info("There is nothing the model can read in that text. " + EMPTY_PROMPT)
        else:
            st.warning("Could not translate: " + escape_md(str(exc), 200))
        return None
    if result.truncated:
        st.warning(f"The sentence is longer than the model's {limit} pieces; only the start was translated "
                   "(the heatmaps show the part that was used).")
    return result


def translation_held(run: RunKey) -> bool:
    """Is there nothing to wait for (no spinner: its timer thread costs every session of a room)? The
    run's translation is held; or, explained, the failure remembered and the plain run held."""
    return holds(run.digest) or bool(run.explain and holds(explained_key(run).digest)
                                      and holds(run.but(explain=False).digest))


def translate_input(run: RunKey):
    """The cached run; with explain, the explained one, or the plain one if explaining failed for
    this translation (remembered: the raw weights are still worth showing, and the views then
    say the rest is unavailable)."""
    if run.explain:
        outcome = translate_explained(run, max_concurrent())
        if not isinstance(outcome, ExplainFailed):
            return outcome
    return translate(run.but(explain=False), max_concurrent())


# the page's one convention, said once in the translation's legend (its help): what a person reads counts from 1
NUMBERING = ("Steps, positions (Query 1 is the first piece) and ranks (rank 1 is the best piece) count from 1; "
             "layers and heads are numbered as their pickers are, from 0.")


def show_translation(result, target_lang: str, display: Display, current: int | None = None,
                     diagnosis=None, beam: int = 1, whole: str | None = None):
    """The translation in a keyed container (class st-key-translation), so the page can be read
    by what it shows rather than by position. Returns what marks the strip once a new run's
    diagnosis is in (views/diagnosis.py translation_strip), or None."""
    title = f"Translation ({target_lang})" + (", forced to the reference" if result.forced else "") + (
        f", beam search ({beam})" if result.beam and beam > 1 else "")
    with st.container(key="translation"):
        if display.presenter:      # the strip is the translation: one line less between the bar and the chart
            return translation_strip(diagnosis, result, display.show_space, current)
        # one line: what it is, the text (a wider label when it says how: no second line under it)
        label, text = st.columns([3.2 if result.forced or beam > 1 else 1.6, 8], vertical_alignment="center")
        label.markdown(f"**{escape_md(title)}**", help="The pieces below are shaded by probability: orange = "
                                                       "less sure; hover a piece for its value. " + NUMBERING)
        # st.text, not st.code: st.code loads a 1.5 MB syntax highlighter on every new tab, which
        # delayed the first chart by 0.7-1.3 s (benchmarks/bench_first_paint.py)
        text.text(whole or result.text or " ")        # whole: every sentence's translation (sentences.py)
        return translation_strip(diagnosis, result, display.show_space, current)   # + what looks wrong (issue 22)
