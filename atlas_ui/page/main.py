"""The app's top level: load, translate, pick a view, and turn every failure into a short message.
The parts live beside it: the model (model.py), its examples (examples.py), the page's run and the
translation line (translation.py), the CSS (style.py), guarded (guard.py)."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from . import room, sentences, touch, whatif
from ..ui import branch, state
from ..runs.translation import configure_torch
from ..runs.diagnosis import PageDiagnosis
from ..runs.explain import explain_unavailable
from ..runs.catalogue import ModelRef, find_models, model_languages
from ..ui.common import Display, escape_md, phone_layout
from ..server.hub_policy import read_policy
from .examples import examples_for, follow_example_language
from .guard import guarded
from .landing import land
from .inputs import input_area, language_note, language_picker, show_status, sidebar
from .model import chosen_model, load_translator, model_note
from ..server.settings import DEFAULT_MODEL, MAX_CHARS, extra_models, models_dir, torch_threads
from .share import PRESENTER_CSS, PRESENTER_SHARE_OPEN, export_buttons, file_stem, presenter_share, share_box
from .style import PAGE_TITLE, compact_css
from .translation import page_run, run_translation, show_translation
from ..views import URL_FIELDS, VIEWS, ViewContext
from ..views.contributions import source_share_bar


@dataclass(frozen=True)
class Opened:
    """The model this script run opened, and what comes with it."""
    name: str                      # as the picker (or the hub id) names it
    path: str
    ref: ModelRef
    device: str
    translator: Any                # None when it could not be loaded (the page said why)
    models: dict                   # every model the picker offers: name -> path
    source_lang: str
    target_lang: str
    examples: list                 # example rows (views/base.ViewContext.examples)


def pick_view(bar) -> str:
    """The view picker: a row of names on the page, or one dropdown in the presenter's bar."""
    current = state.kept("view")
    if current in VIEWS:       # a radio's value does not pass to a dropdown of the same key (or back)
        st.session_state["view"] = current
    if bar is None:
        return state.radio("View", list(VIEWS), "view", horizontal=True, label_visibility="collapsed")
    with bar:
        return state.selectbox("View", list(VIEWS), "view", label_visibility="collapsed")


def page() -> None:
    configure_torch(torch_threads())
    state.boot_from_url(URL_FIELDS)
    room.boot()                                        # a room link: follow it, or drive it with its key
    with room.follower_turn(room.following_moves()):   # a room's followers take turns on a move
        room.follow(URL_FIELDS)                        # a follower takes the presenter's view, before any widget
        page_body()


def page_body() -> None:
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
    opened = Opened(model, path, ref, device, translator, models, source_lang, target_lang,
                    examples_for(folder, source_lang, target_lang))
    phone = phone_layout(display)
    st.markdown(compact_css(phone_fitted=phone), unsafe_allow_html=True)      # constants, no user text
    if not display.presenter:                             # a slide needs no page title
        st.markdown(PAGE_TITLE, unsafe_allow_html=True)
    room.bar()                                            # following the speaker · Detach
    follow_example_language(opened.examples, source_lang)
    text, reference, beam, picker, share = input_bar(opened, display, phone, share)
    view = state.kept("view", next(iter(VIEWS)))
    parts = sentences.split_input(text, reference, state.kept(sentences.SENTENCE_KEY))   # the views: one sentence
    try:
        if translator is None:
            return
        view = show_run(opened, display, text, reference, beam, parts, view, phone, picker, status)
    finally:
        params = link_params(languages, view, text, reference, beam, parts, display)
        state.write_url({**params, **room.after_run(params)})     # the room's fields in this tab's URL only
        if display.presenter and share.open or not display.presenter and room.KEY in st.session_state:
            with share:
                guarded(room.panel)                      # start a room, or its link and QR code
        if display.presenter:
            guarded(presenter_share, share, params, room.KEY in st.session_state)
        else:
            guarded(share_box, share, params)


def input_bar(opened: Opened, display: Display, phone: bool, share):
    """The sentence and decoding inputs, where this screen has room for them; returns (text,
    reference, beam, where the view picker goes (None: on the page), where the share box goes)."""
    examples, source_lang, target_lang = opened.examples, opened.source_lang, opened.target_lang
    if display.presenter:              # one slim bar: leave, the sentence folded away, the view picker
        st.markdown(PRESENTER_CSS, unsafe_allow_html=True)
        leave, sentence, share_at, picker = st.columns([1.1, 1.8, 0.8, 3.5], vertical_alignment="center")
        # no tooltip: it stayed up over the open popover's "Link to this view" (the popover says it all)
        share = share_at.popover("Share", width="stretch", key=PRESENTER_SHARE_OPEN, on_change="rerun")
        leave.button("✕ Presenter", key="presenter_exit", on_click=state.put, args=("presenter", False),
                     help="Leave presenter mode", width="stretch")
        with sentence.popover("Sentence and decoding", width="stretch"):
            text, reference, beam = input_area(examples, source_lang, target_lang)
    elif phone:                        # the chart first: the sentence and the view one tap away
        touch.tap_tooltips()           # a tap's tooltip: closed by the next tap, inside the plot
        with st.container(key="phone_bar", horizontal=True, vertical_alignment="center"):
            with st.popover("✎ Sentence", width="content"):
                text, reference, beam = input_area(examples, source_lang, target_lang)
            picker = st.container(width="stretch")
    else:
        picker = None
        text, reference, beam = input_area(examples, source_lang, target_lang)
    return text, reference, beam, picker, share


def show_run(opened: Opened, display: Display, text: str, reference: str, beam: int, parts, view: str,
             phone: bool, picker, status) -> str:
    """Translate the sentence on screen and draw it: the translation line, the view picker, the
    view, the what-if panel and the export; returns the view shown."""
    translator, ref, device = opened.translator, opened.ref, opened.device
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
        land(opened.path, result)                     # a new visitor: cross-attention, the head that matters
        detected = language_note(translator, text, opened.models, opened.name)
        step = state.kept("step", 0) if shown is not None and shown.steps else None
        diagnosis = guarded(PageDiagnosis, run, result, view)     # a new run's: after the view
        whole = " ".join(sentences.translations(ref, device, parts, beam, result)) if parts.several else None
        # a phone: the view's chart first, the translation and what the view shows under it
        body_slot, strip_slot = (st.container(), st.container()) if phone else (
            contextlib.nullcontext(), contextlib.nullcontext())
        with strip_slot:
            sentences.sentence_picker(parts)
            mark_strip = show_translation(result, opened.target_lang, display, step if isinstance(step, int) and
                                          0 <= step < len(result.output_tokens) else None, diagnosis, beam, whole)
            model_note(translator, result, detected)
            view = pick_view(picker)
            st.caption(f"**{VIEWS[view].title}.** {VIEWS[view].explains}")
        context = ViewContext(result=result, display=display, examples=opened.examples, source_key=opened.source_lang,
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
                meta = {"model": opened.name, "source_lang": opened.source_lang, "target_lang": opened.target_lang,
                        "beam_size": beam, "forced": result.forced, "text": parts.sentence,
                        "truncated": result.truncated, "device": result.device}
                guarded(export_buttons, result, figure, meta, file_stem(text))
    show_status(status, translator, result, figure_seconds)
    return view


def link_params(languages, view: str, text: str, reference: str, beam: int, parts, display: Display) -> dict:
    """The share link's fields for what this run shows, the view's own fields with them."""
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
    return params


def step_number(step):
    """The link's step_no= (counted from 1, as the page says "Step 5 of 17"); links made before it
    hold step= from 0, which state.URL_FIELDS still reads."""
    return step + 1 if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def run() -> None:
    st.set_page_config(page_title="Attention Atlas", layout="wide",
                       initial_sidebar_state="collapsed")        # the picture first; ☰ opens the settings
    guarded(page)
