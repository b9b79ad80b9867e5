"""The app's top level: load, translate, pick a view, and turn every failure into a short message."""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace

import streamlit as st

from . import room, sentences, whatif
from ..ui import branch, state
from ..runs.translation import ExplainFailed, configure_torch, get_translator, translate, translate_explained
from ..runs.diagnosis import PageDiagnosis
from ..runs.explain import explain_unavailable
from ..runs.catalogue import ModelRef, file_stamps, find_models, load_examples, model_languages
from ..ui.common import Display, escape_md, on_a_phone
from ..server.hub_policy import HubPolicy, HubRefused, open_hub, read_policy, resolved
from .landing import land
from .inputs import input_area, language_note, language_picker, show_status, sidebar
from ..server.settings import (DEFAULT_MODEL, DEFAULT_MODELS_DIR, EXAMPLES_FILE, FALLBACK_EXAMPLES, LOW_CONFIDENCE, MAX_CHARS,
                       extra_models, max_concurrent, models_dir, real_model_hint, torch_threads)
from .share import PRESENTER_CSS, PRESENTER_SHARE_OPEN, export_buttons, file_stem, presenter_share, share_box
from ..views import URL_FIELDS, VIEWS, ViewContext
from ..views.contributions import source_share_bar
from ..views.diagnosis import translation_strip
from ..runs.warm import RunKey, holds, model_key

LOG = logging.getLogger("atlas_ui")
# Constants only (no user text). The picture first: less padding and smaller gaps above the chart,
# the page's title in the header's band (the sidebar that holds the other one starts folded), and
# the view picker on one line (smaller labels; no radio circles: the view open is bold, underlined).
# Streamlit pulls a markdown element up by 1rem to cancel its last paragraph's margin; our HTML
# blocks (the translation strip, the source strip, the what-if table) end in a div, which has none,
# so without the last rule their last line ran under the next element.
# On a phone the view's first chart comes before its controls (a shared link shows its picture first).
# The input row's buttons keep their words (a narrow main area with the sidebar open, the presenter's
# popover): the sentence box gives up the room.
COMPACT_CSS = """<style>
[data-testid='stMainBlockContainer']{padding-top:0.3rem;padding-bottom:2rem}
[data-testid='stHeader']{background:transparent;pointer-events:none}
[data-testid='stHeader'] button,[data-testid='stHeader'] a{pointer-events:auto}
.aa-title{font-size:1.05rem;line-height:2.1rem;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.aa-title span{opacity:0.6;font-size:0.9rem}
@media (max-width:640px){.aa-title{padding-left:2.4rem}.aa-title span{display:none}}
[data-testid='stMain'] [data-testid='stVerticalBlock']{gap:0.4rem}
.st-key-view_body .stSelectbox,.st-key-view_body .stRadio{display:flex;flex-direction:row;align-items:center;gap:0.45rem}
.st-key-view_body .stSelectbox > [data-testid='stWidgetLabel'],.st-key-view_body .stRadio > [data-testid='stWidgetLabel']{flex:0 0 auto;width:auto;margin-bottom:0}
.st-key-view_body .stSelectbox > div:not([data-testid='stWidgetLabel']){flex:1 1 auto;min-width:0}
.st-key-view_body [data-testid='stRadioOption'] p{white-space:nowrap}
@media (max-width:640px){.st-key-view_body > :nth-child(1 of :has([data-testid='stPlotlyChart'])){order:-1}}
.st-key-view [role='radiogroup']{gap:0.1rem 0.75rem;flex-wrap:wrap}
[data-testid='stColumn']:has(.st-key-translate),[data-testid='stColumn']:has(.st-key-inputs_open){min-width:max-content}
[data-testid='stPopoverBody']:has(.st-key-translate){width:min(46rem,92vw)}
.st-key-view label p{font-size:0.84rem;border-bottom:2px solid transparent}
.st-key-view [data-testid='stRadioOption'] > div > div:first-child{display:none}
.st-key-view [data-testid='stRadioOption'][data-selected='true'] p{font-weight:600;border-bottom-color:currentColor}
.st-key-translation [data-testid='stText']{font-size:1.05rem}
.st-key-step [data-testid='stSliderThumbValue'],.st-key-step [data-testid='stSliderTickBarMin'],
.st-key-step [data-testid='stSliderTickBarMax']{display:none}
[data-testid='stMarkdownContainer']:has(> div:last-child){margin-bottom:0}
</style>"""
# On a phone a chart's x axis is a third of a 1280 px window's: a sentence's pieces stood upright a
# few px apart, text on text (issue 31, runs/shots15.py). There every k-th label stays, at most
# PHONE_X_LABELS of them an axis (like presenter mode's fit_ticks); a tap on a cell still names its piece.
PHONE_X_LABELS = 10


# Charts whose every x label must stay (the word alignment: a link is read from the words at its ends).
EVERY_X_LABEL = ("roles_alignment",)


def phone_tick_css(most: int = PHONE_X_LABELS, widest_step: int = 10) -> str:
    """CSS rules hiding all but every k-th x tick label of an axis with more than most*(k-1) of them
    (the labels are g.xtick; the tick marks beside them are path.xtick), except in EVERY_X_LABEL's
    containers."""
    rules = []
    keep = "".join(f":not(.st-key-{key} *)" for key in EVERY_X_LABEL)
    for k in range(2, widest_step + 1):
        axis = f".xaxislayer-above{keep}:has(> g.xtick:nth-child({most * (k - 1) + 1} of g.xtick))"
        if k < widest_step:
            axis += f":not(:has(> g.xtick:nth-child({most * k + 1} of g.xtick)))"
        rules.append(f"{axis} > g.xtick:not(:nth-child({k}n+1 of g.xtick)) text{{display:none}}")
    return "@media (max-width:640px){" + "".join(rules) + "}"


COMPACT_CSS = COMPACT_CSS.replace("</style>", phone_tick_css() + "</style>")     # one element: no extra gap
PAGE_TITLE = ("<div class='aa-title'><b>Attention Atlas</b><span> · every head, every layer, every decoding step "
              "of an encoder–decoder Transformer</span></div>")
EMPTY_PROMPT = "Type a sentence above, or pick an example, to see its attention."


def guarded(render, *args):
    """Run one part of the page; a failure becomes a short message instead of a traceback.

    Returns what `render` returned, or None after a failure."""
    try:
        return render(*args)
    except ValueError as exc:
        st.warning("That did not work: " + escape_md(str(exc), 200))
    except Exception as exc:  # noqa: BLE001 - the page must never show a traceback
        LOG.exception("Attention Atlas: unexpected error")
        st.error(f"Something went wrong ({type(exc).__name__}). Try another sentence or reload the page.")
    return None


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
        with contextlib.nullcontext() if holds(run.digest) else st.spinner("Translating…"):
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


def translate_input(run: RunKey):
    """The cached run; with explain, the explained one, or the plain one if explaining failed for
    this translation (remembered: the raw weights are still worth showing, and the views then
    say the rest is unavailable)."""
    if run.explain:
        outcome = translate_explained(run, max_concurrent())
        if not isinstance(outcome, ExplainFailed):
            return outcome
    return translate(run.but(explain=False), max_concurrent())


def pick_view(bar) -> str:
    """The view picker: a row of names on the page, or one dropdown in the presenter's bar."""
    current = state.kept("view")
    if current in VIEWS:       # a radio's value does not pass to a dropdown of the same key (or back)
        st.session_state["view"] = current
    if bar is None:
        return state.radio("View", list(VIEWS), "view", horizontal=True, label_visibility="collapsed")
    with bar:
        return state.selectbox("View", list(VIEWS), "view", label_visibility="collapsed")


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


def examples_for(folder, source_lang: str, target_lang: str) -> list:
    """Example rows that have the model's source language, else the built-in sentences."""
    paths = (str(folder / EXAMPLES_FILE), str(DEFAULT_MODELS_DIR / EXAMPLES_FILE))
    rows = load_examples(paths, FALLBACK_EXAMPLES, file_stamps(paths))
    rows = [row for row in rows if row.get(source_lang)]
    return rows or [{source_lang: row["en"], target_lang: "", "shows": row["shows"]} for row in FALLBACK_EXAMPLES]


def follow_example_language(examples: list, source_lang: str) -> None:
    """After a switch to a model with another source language, an example sentence in the old
    language becomes the same example in the new one (typed text is left alone)."""
    text = state.kept("text")
    for row in examples:
        if text and text != row.get(source_lang) and text in row.values() and row.get(source_lang):
            state.put("text", row[source_lang])
            state.put("reference", "")
            return


def load_translator(ref: ModelRef, device: str, name: str):
    """The cached Translator, or None after a short error naming what is wrong."""
    try:
        if holds(model_key(ref, device)):          # loaded already: no progress box (it sleeps 50 ms)
            return get_translator(ref, device)
        slot = st.empty()                            # the progress box goes once loaded: no leftover line
        with slot.status(f"Loading the model {escape_md(name, 80)}…", expanded=False):
            translator = get_translator(ref, device)
        slot.empty()
        return translator
    except (OSError, ValueError, RuntimeError, ImportError) as exc:
        LOG.warning("could not load %s: %s", ref.path, exc)
        st.error(f"Could not load the model {escape_md(name, 80)}: {escape_md(str(exc), 300)}")
        return None


def suggested_hub_model(source_lang, target_lang, detected=None) -> str:
    """The hub model the low-confidence note names: the open model's direction, or, when the sentence
    looks like another language (`detected`), one that reads that language, as the language note's
    switch does (English typed into de-en: opus-mt-en-de, like "Open en-de (reads English)")."""
    if detected and detected != source_lang:
        return real_model_hint(detected, target_lang if detected != target_lang else source_lang)
    return real_model_hint(source_lang, target_lang)


def model_note(translator, result, detected: str | None = None) -> None:
    """Honest about our own models: what they were trained on, and when a sentence is probably
    outside it (a low mean piece probability; measured thresholds in settings.LOW_CONFIDENCE).
    `detected`: the language the sentence looks like, when not the model's (language_note)."""
    card = translator.card if isinstance(translator.card, dict) else {}
    data = card.get("data") if isinstance(card.get("data"), dict) else {}
    if "multi30k" not in str(data.get("dataset", "")).lower():
        return
    if result is not None and result.mean_prob() < LOW_CONFIDENCE:
        st.info(f"The model gave its pieces a mean probability of {result.mean_prob():.2f}: this sentence is "
                "probably outside what it knows. It was trained on Multi30k image captions only (describe a "
                "scene: people, animals, places). For any other text open a real model, e.g. "
                f"{suggested_hub_model(translator.source_lang, translator.target_lang, detected)} "
                "(Model → Hugging Face hub id, "
                "online).")


def chosen_model(models: dict, model: str, hub_text: str, policy: HubPolicy) -> tuple[str, str]:
    """(name, path) of what to load: the model picked in the list, or the hub model that the hub-id
    field (or a share link's `hub=`) names, when the operator's policy opens it (ATLAS_HUB,
    atlas_ui/server/hub_policy.py). The text itself never reaches the loader, only the directory the hub
    cache gives for it. A refusal is one message that names no file, and the picked model opens."""
    if not hub_text:
        return model, models[model]
    repo_id = None
    try:
        repo_id = policy.check(hub_text)                   # the text only: no file, no network
        if resolved(policy, repo_id) is not None:
            return repo_id, str(open_hub(policy, repo_id))
        with st.spinner(f"Fetching {escape_md(repo_id, 100)} from the Hugging Face hub…"):
            return repo_id, str(open_hub(policy, repo_id))
    except HubRefused as exc:
        st.error(escape_md(str(exc), 600))
        if not policy.enabled:
            state.put("hub_id", "")       # no field to clear it from: refused once, then gone from the link
    except OSError as exc:
        LOG.warning("could not fetch %s: %s", repo_id, exc)
        st.error(f"Could not load the model {escape_md(repo_id or '', 100)}: {escape_md(str(exc), 300)}")
    return model, models[model]


def page() -> None:
    configure_torch(torch_threads())
    state.boot_from_url(URL_FIELDS)
    room.boot()                                        # a room link: follow it, or drive it with its key
    room.follow(URL_FIELDS)                            # a follower takes the presenter's view, before any widget
    folder = models_dir()
    named = extra_models()                             # `attention-atlas MODEL ...`: the first one opens
    models = {**named, **find_models(str(folder))}
    if not models:
        st.error(f"No model found: {escape_md(str(folder))} has no directory with a config.json. "
                 "Set ATLAS_MODELS_DIR or add a model to pretrained/.")
        return
    policy = read_policy()
    model, hub_text, device, display = sidebar(models, next(iter(named), DEFAULT_MODEL), policy)
    model, path = chosen_model(models, model, hub_text, policy)
    languages = language_picker(path)
    status, share = st.sidebar.container(), st.sidebar.container()
    ref = ModelRef(path, *languages)
    translator = load_translator(ref, device, model)
    source_lang, target_lang = model_languages(path) if translator is None else (
        translator.source_lang or "src", translator.target_lang or "tgt")
    examples = examples_for(folder, source_lang, target_lang)
    st.markdown(COMPACT_CSS, unsafe_allow_html=True)      # constants, no user text
    if not display.presenter:                             # a slide needs no page title
        st.markdown(PAGE_TITLE, unsafe_allow_html=True)
    room.bar()                                            # following the speaker · Detach
    follow_example_language(examples, source_lang)
    phone = on_a_phone() and not display.presenter
    if display.presenter:              # one slim bar: leave, the sentence folded away, the view picker
        st.markdown(PRESENTER_CSS, unsafe_allow_html=True)
        leave, sentence, share_at, picker = st.columns([1.1, 1.8, 0.8, 3.5], vertical_alignment="center")
        share = share_at.popover("Share", width="stretch", key=PRESENTER_SHARE_OPEN, on_change="rerun",
                                 help="The link to this view and its QR code, for the room")
        leave.button("✕ Presenter", key="presenter_exit", on_click=state.put, args=("presenter", False),
                     help="Leave presenter mode", width="stretch")
        with sentence.popover("Sentence and decoding", width="stretch"):
            text, reference, beam = input_area(examples, source_lang, target_lang)
    elif phone:                        # the chart first: the sentence and the view one tap away
        with st.container(key="phone_bar", horizontal=True, vertical_alignment="center"):
            with st.popover("✎ Sentence", width="content"):
                text, reference, beam = input_area(examples, source_lang, target_lang)
            picker = st.container(width="stretch")
    else:
        picker = None
        text, reference, beam = input_area(examples, source_lang, target_lang)
    view = state.kept("view", next(iter(VIEWS)))
    parts = sentences.split_input(text, reference, state.kept(sentences.SENTENCE_KEY))   # the views: one sentence
    try:
        if translator is None:
            return
        shown = VIEWS.get(view)                               # None for a link's unknown view: the first opens
        wants_norm = state.kept("norm", False) is True and shown is not None and shown.norm_switch
        explain = wants_norm or (shown is not None and shown.needs_explain)   # explain=False costs nothing
        unavailable = explain_unavailable(translator) if explain else None
        explain = explain and not unavailable
        sentences.notices(text, reference, parts)
        run = page_run(ref, device, parts.sentence, parts.reference, beam, explain)
        result = run_translation(run, translator.config.max_source_len)
        result = whatif.shown(result, run)                             # or what-if
        if result is not None:
            if explain and not result.explained:
                unavailable = "Norm-weighted values and contributions could not be computed for this sentence."
            display = replace(display, norm=wants_norm and result.explained, explain_note=unavailable or "")
        figure_seconds = None
        if result is not None:
            land(path, result)                            # a new visitor: cross-attention, the head that matters
            detected = language_note(translator, text, models, model)
            step = state.kept("step", 0) if shown is not None and shown.steps else None
            diagnosis = guarded(PageDiagnosis, ref, device, result, view)     # a new run's: after the view
            whole = " ".join(sentences.translations(ref, device, parts, beam, result)) if parts.several else None
            # a phone: the view's chart first, the translation and what the view shows under it
            body_slot, strip_slot = (st.container(), st.container()) if phone else (
                contextlib.nullcontext(), contextlib.nullcontext())
            with strip_slot:
                sentences.sentence_picker(parts)
                mark_strip = show_translation(result, target_lang, display, step if isinstance(step, int) and
                                              0 <= step < len(result.output_tokens) else None, diagnosis, beam, whole)
                model_note(translator, result, detected)
                view = pick_view(picker)
                st.caption(f"**{VIEWS[view].title}.** {VIEWS[view].explains}")
            context = ViewContext(result=result, display=display, examples=examples, source_key=source_lang,
                                  text=parts.sentence, reference=parts.reference, model=ref, device=device, beam=beam,
                                  run=run)
            started = time.perf_counter()
            with body_slot, st.container(key="view_body"):    # the view's own controls and charts (COMPACT_CSS)
                figure = guarded(VIEWS[view].render, context)
            figure_seconds = time.perf_counter() - started
            if mark_strip is not None:
                guarded(mark_strip)                       # a new run's diagnosis: the chart is drawn first
            guarded(branch.panel, display)                # what-if side by side, unless the view drew it
            source_share_bar(result, display)             # below the view: nothing moves what was clicked
            # drawn only while open (Streamlit's lazy expander; opening it is one rerun): three
            # download buttons fewer on every run and in every new tab, where it starts closed
            export = st.expander("Export", key="export_open", on_change="rerun")
            if export.open:
                with export:
                    meta = {"model": model, "source_lang": source_lang, "target_lang": target_lang,
                            "beam_size": beam, "forced": result.forced, "text": parts.sentence,
                            "truncated": result.truncated, "device": result.device}
                    guarded(export_buttons, result, figure, meta, file_stem(text))
        show_status(status, translator, result, figure_seconds)
    finally:
        params = {"model": state.kept("model"), "hub": state.kept("hub_id") or None, "src": languages[0],
                  "tgt": languages[1], "view": view, "kind": state.kept("kind"), "layer": state.kept("layer"),
                  "head": state.kept("head"), "step_no": step_number(state.kept("step")), "sentence": text[:MAX_CHARS],
                  "sentence_no": sentences.url_value(parts),
                  "ref": reference, "beam": beam if beam > 1 else None,
                  "words": 1 if display.words else None, "present": 1 if display.presenter else None,
                  "norm": 1 if state.kept("norm", False) is True else None,
                  "ablate": state.format_heads(state.ablated_heads()) or None, **branch.url_params()}
        shown = VIEWS.get(view)
        for name, key, _ in shown.url_fields if shown is not None else ():
            value = state.kept(key)
            params[name] = value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else (
                1 if value is True else None)
        state.write_url({**params, **room.after_run(params)})     # the room's fields in this tab's URL only
        if display.presenter and share.open or not display.presenter and room.KEY in st.session_state:
            with share:
                guarded(room.panel)                      # start a room, or its link and QR code
        guarded(presenter_share if display.presenter else share_box, share, params)


def step_number(step):
    """The link's step_no= (counted from 1, as the page says "Step 5 of 17"); links made before it
    hold step= from 0, which state.URL_FIELDS still reads."""
    return step + 1 if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def run() -> None:
    st.set_page_config(page_title="Attention Atlas", layout="wide",
                       initial_sidebar_state="collapsed")        # the picture first; ☰ opens the settings
    guarded(page)
