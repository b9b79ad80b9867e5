"""The sidebar (model, device, display options, status) and the input area."""
from __future__ import annotations


import pandas as pd
import streamlit as st

from transformer.language import PROFILED, normalize_code

from ..ui import state
from ..runs.translation import available_devices
from ..runs.catalogue import language_options, model_labels, model_languages, translation_tasks
from ..ui.common import Display, escape_md
from ..server.hub_policy import HubPolicy, hub_name, read_policy
from ..server.settings import DEFAULT_MODEL, MAX_BEAM, MAX_CHARS, real_model_hint

SPLIT_NAMES = {"val": "val", "test_2016_flickr": "test16"}
SCORE_ROWS = (("val", "greedy"), ("val", "beam4"), ("test_2016_flickr", "greedy"), ("test_2016_flickr", "beam4"))


DISPLAY_OPEN = "display_open"          # session key: the sidebar's display options are open
DISPLAY_FLAGS = {      # Display field = session key: (label, help)
    "hide_special": ("Hide special tokens", "Leave `<s>`, `</s>` and `<pad>` out of the heatmap axes."),
    "show_space": ("Show ▁ as a space", "Sentencepiece marks a word start with ▁."),
    "normalize": ("Normalise each map", "Stretch the colour scale to each map's own maximum instead of 0 to 1."),
    "words": ("Merge pieces into words", "Sum attention over a word's key pieces and average over its query pieces."),
}


def sidebar(models: dict, default_model: str = DEFAULT_MODEL,
            policy: HubPolicy | None = None) -> tuple[str, str, str, Display]:
    """Model and device pickers and the display toggles; returns (model name picked in the list,
    hub-id text or "", device, Display). The hub-id field is offered only when the operator's policy
    (ATLAS_HUB, atlas_ui/server/hub_policy.py) lets it open something; off, a share link's `hub=` is still
    returned, for the page to refuse."""
    policy = policy or read_policy()
    with st.sidebar:
        st.markdown("## Attention Atlas\n\n:gray[:small[Every head, every layer, every decoding step of an "
                    "encoder–decoder Transformer.]]")           # one element (see share_box)
        labels = model_labels(models)
        model = state.selectbox("Model", list(models), "model", default_model, format_func=labels.get)
        if policy.enabled:
            # the example names the open model's direction (de-en open: opus-mt-de-en)
            hub_id = state.text_input("Or a Hugging Face model (hub id)", "hub_id",
                                      placeholder=real_model_hint(*model_languages(models[model]))
                                      if model in models else real_model_hint(None, None),
                                      help="A Marian, NLLB/M2M100, mBART-50, BART or T5 translation model, "
                                           "by its hub id (owner/name; never a path). "
                                           + escape_md(policy.describe(), 600))
            if policy.mode == "allow":
                st.caption(escape_md(policy.describe(), 600))
        else:
            hub_id = state.kept("hub_id", "")
            hub_id = hub_id if isinstance(hub_id, str) else ""
            st.caption(escape_md(policy.describe()))
        devices = available_devices()
        # a picker with one option is one more element per run for nothing: CPU-only shows it in Status
        device = state.selectbox("Device", devices, "device") if len(devices) > 1 else devices[0]
        presenter = state.toggle("Presenter mode", "presenter",
                                 help="Large type and a clean page for projecting; ← and → step through "
                                      "the decoding steps.")
        # drawn only while open (lazy; opening it is one rerun): five widgets fewer on every run of
        # every session; closed, each option keeps its last value
        options = st.expander("Display options", key=DISPLAY_OPEN, on_change="rerun")
        if options.open:
            with options:
                flags = {key: state.toggle(label, key, help=help) for key, (label, help) in DISPLAY_FLAGS.items()}
                state.selectbox("Chart camera button saves", ["png", "svg"], "image_format", format_func=str.upper,
                                help="PNG at 2× for slides, or SVG (vector) for papers.")
        else:
            flags = {key: state.kept(key, False) is True for key in DISPLAY_FLAGS}
        display = Display(presenter=presenter, **flags)
    return model, hub_id.strip(), device, display


def language_picker(path: str) -> tuple[str | None, str | None]:
    """Source and target language pickers for a multilingual model (NLLB, M2M100, mBART-50) and
    for a T5's translation tasks; (None, None) for a model with one language pair."""
    tasks = translation_tasks(path)
    if tasks:
        return task_picker(tasks)
    try:
        codes, source, target = language_options(path)
    except (OSError, ValueError, ImportError):
        return None, None                    # loading the model will say what is wrong
    if not codes:
        return None, None
    with st.sidebar:
        st.caption("This model translates between many languages: pick the pair.")
        defaults = [code for code in ("eng_Latn", "en_XX", "__en__", "en") if code in codes]
        source = state.selectbox("Source language", codes, "source_lang", source or (defaults[0] if defaults else None))
        targets = [code for code in codes if code != source]
        german = [code for code in ("deu_Latn", "de_DE", "__de__", "de") if code in targets]
        target = state.selectbox("Target language", targets, "target_lang",
                                 target if target in targets else (german[0] if german else None))
    return source, target


def task_picker(tasks: tuple) -> tuple[str, str]:
    """A T5 is told its task in words ("translate English to German: "): the pickers offer the
    tasks its config names, the first one preselected, as Translator.load picks it."""
    with st.sidebar:
        st.caption("This T5 is told what to do in words: pick one of its translation tasks.")
        sources = list(dict.fromkeys(source for source, _ in tasks))
        source = state.selectbox("Source language", sources, "source_lang", sources[0])
        targets = [target for task_source, target in tasks if task_source == source]
        target = state.selectbox("Target language", targets, "target_lang", targets[0])
    return source, target


def score_rows(card: dict) -> list[dict]:
    """BLEU/chrF for val and test_2016_flickr × greedy/beam 4; missing values are None."""
    scores = card.get("scores") if isinstance(card, dict) else None
    scores = scores if isinstance(scores, dict) else {}
    rows = []
    for split, decoding in SCORE_ROWS:
        entry = scores.get(split, {})
        entry = entry.get(decoding, {}) if isinstance(entry, dict) else {}
        entry = entry if isinstance(entry, dict) else {}
        rows.append({"score": f"{SPLIT_NAMES.get(split, split)} {decoding}",
                     "BLEU": _number(entry.get("bleu")), "chrF": _number(entry.get("chrf"))})
    return rows


def card_scores(card: dict) -> pd.DataFrame:
    return pd.DataFrame(score_rows(card))


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def scores_markdown(rows: list[dict]) -> str | None:
    """The card's scores as a Markdown table (one element; numbers only, no user text), or None
    when the card has none."""
    if all(row["BLEU"] is None and row["chrF"] is None for row in rows):
        return None
    def cell(value):
        return "–" if value is None else f"{value:.1f}"
    lines = [f"| {row['score']} | {cell(row['BLEU'])} | {cell(row['chrF'])} |" for row in rows]
    return "| score | BLEU | chrF |\n|---|---:|---:|\n" + "\n".join(lines)


def show_status(box, translator, result, figure_seconds: float | None) -> None:
    """Device, timings and the model card's scores, in as few elements as the page allows
    (every element is one more message per run, for every session)."""
    device = str(translator.device)
    lines = [f"Device: {'GPU' if device.startswith('cuda') else 'CPU'} ({device})"]
    if result is not None:
        lines.append(f"Translation run: {result.seconds:.2f} s")
    if figure_seconds is not None:
        lines.append(f"Figures: {figure_seconds:.2f} s")
    card = translator.card if isinstance(translator.card, dict) else {}
    data = card.get("data") if isinstance(card.get("data"), dict) else {}
    notes = []
    if "multi30k" in str(data.get("dataset", "")).lower():
        notes.append("Trained on Multi30k image captions only: it translates sentences that describe a "
                     "scene. Other text comes out garbled; open a real model for that.")
    elif card.get("family"):
        notes.append("Hugging Face model · " + escape_md(str(card.get("architecture") or card["family"]), 80)
                     + " · positions: " + escape_md(str(card.get("positional_kind", "?")), 40))
    name = card.get("hub_id") or hub_name(card.get("path", "")) or card.get("name", "unnamed model")
    notes.append("Model card: " + escape_md(str(name), 80)
                 + " · val and test_2016_flickr (test16), greedy and beam 4")
    table = scores_markdown(score_rows(card))
    if table is None:
        notes.append("The model card has no scores.")
    # one markdown element: heading, lines, notes and scores (see share_box)
    parts = ["### Status", "  \n".join(lines)] + [f":gray[:small[{note}]]" for note in notes]
    box.markdown("\n\n".join(parts + ([table] if table is not None else [])))


def _use_example(examples: list, source_key: str) -> None:
    index = st.session_state.get("example")
    if index is not None and 0 <= index < len(examples):
        state.put("text", examples[index].get(source_key, ""))
        state.put("reference", "")


def failure_note(row: dict, source_lang: str, target_lang: str) -> str:
    """What goes wrong when this model translates the example (checked by running it; empty when
    the model handles what the example shows). See pretrained/examples.tsv."""
    return str(row.get(f"failure_{source_lang}_{target_lang}") or "").strip()


def _example_label(row: dict, source_lang: str, target_lang: str) -> str:
    text = row.get(source_lang, "")
    text = text if len(text) <= 70 else text[:69] + "…"
    label = f"{text} — {row['shows']}" if row.get("shows") else text
    return ("⚠ failure case · " + label) if failure_note(row, source_lang, target_lang) else label


def example_row(examples: list, source_lang: str, text: str) -> dict | None:
    """The example whose sentence is in the box, if any."""
    return next((row for row in examples if text.strip() and row.get(source_lang) == text.strip()), None)


def example_reference(row: dict | None, source_lang: str, target_lang: str, reference: str) -> None:
    """The example's reference translation with a button that forces it."""
    if row is None:
        return
    wanted = str(row.get(target_lang) or "").strip()
    if not wanted:
        return
    columns = st.columns([5, 2], vertical_alignment="center")
    columns[0].caption(f"Reference ({escape_md(target_lang, 20)}): {escape_md(wanted, 300)}")
    forced = reference.strip() == wanted
    columns[1].button("Decoding it instead" if forced else "Force the reference", key="force_reference",
                      on_click=state.put, args=("reference", "" if forced else wanted),
                      help="Feed the model this reference (forced decoding) to see its attention and "
                           "probabilities for it; click again to let the model decode.")


LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French"}


def unchecked_note(source_lang) -> str:
    """Why a wrong-language text passes silently for a model whose source language the check does
    not know ("" when it knows it). An offline language-ID library that knows more was measured and
    not adopted (benchmarks/bench_language_id.py, docs/benchmarks.md)."""
    code = normalize_code(source_lang)
    if code in PROFILED:
        return ""
    known = ", ".join(LANGUAGE_NAMES[c] for c in sorted(PROFILED, key=LANGUAGE_NAMES.get)[:-1])
    last = LANGUAGE_NAMES[sorted(PROFILED, key=LANGUAGE_NAMES.get)[-1]]
    reads = LANGUAGE_NAMES.get(code, escape_md(str(source_lang or "a language it cannot name"), 30))
    return (f"Language check: only {known} and {last} are recognised, so a text in the wrong language is not "
            f"flagged for this model, which reads {reads}.")


def language_note(translator, text: str, models: dict, current: str) -> str | None:
    """Above the chart: the sentence looks like another language than the model reads (a
    character n-gram check, transformer/language.py), with a one-click switch to a model here
    that reads that language, when there is one. Returns the language detected when it is not the
    model's (None otherwise), for the low-confidence note to suggest the same way round."""
    scope = unchecked_note(translator.source_lang)
    if scope:                 # the check cannot say anything for this model: say so, not nothing
        st.caption(scope)
        return None
    try:
        check = translator.language_check(text)
    except ValueError:                               # nothing to read: the translation says so
        return None
    if check.matches or not check.detected:
        return None
    detected = LANGUAGE_NAMES.get(check.detected, check.detected)
    reads = LANGUAGE_NAMES.get(translator.source_lang, translator.source_lang)
    readers = [name for name, path in models.items() if name != current and model_languages(path)[0] == check.detected]
    columns = st.columns([5, 2], vertical_alignment="center")
    columns[0].warning(f"This sentence looks like {escape_md(detected, 30)}, but this model reads "
                       f"{escape_md(reads, 30)}: the translation and its attention mean little.", icon="🌐")
    if readers:
        columns[1].button(f"Open {readers[0]} (reads {detected})", key="language_switch",
                          on_click=state.put, args=("model", readers[0]))
    return check.detected


INPUTS_OPEN = "inputs_open"           # session key: the examples · reference · beam popover is open
DECODINGS = ["Greedy", "Beam search"]
BEAM_SIZES = range(2, MAX_BEAM + 1)


def kept_decoding() -> tuple[str, str, int]:
    """(reference, decoding, beam size) as last set, while their popover is closed (a share link's
    ref= and beam= included), each checked as its widget would."""
    reference = state.kept("reference", "")
    decoding = state.kept("decoding", "Greedy")
    beam = state.kept("beam_size", 4)
    return (reference if isinstance(reference, str) else "", decoding if decoding in DECODINGS else "Greedy",
            beam if beam in BEAM_SIZES else 4)


def input_area(examples: list, source_lang: str, target_lang: str) -> tuple[str, str, int]:
    """One row: the sentence, Translate, and a popover holding the examples, the reference and the
    decoding (folded away so the picture starts high on the page); returns (text, reference, beam)."""
    sentence, button, more = st.columns([8, 1.3, 2.7], vertical_alignment="bottom")
    with sentence:
        default = examples[0].get(source_lang, "") if examples else ""
        text = state.text_area(f"Source sentence ({source_lang})", "text", default, height=68,
                               label_visibility="collapsed", placeholder=f"Type or paste a sentence ({source_lang})…",
                               help=f"Up to {MAX_CHARS} characters. Press Ctrl+Enter or Translate.")
    with button:
        st.button("Translate", key="translate", type="primary", width="stretch")
    # drawn only while open (a lazy popover; opening it is one rerun): eight widgets fewer on every
    # run of every session, which a room of people opening one link pays for (bench_serving --views).
    # Its label never changes: a stateful popover's label is part of its identity, so a new label
    # (say, "(beam)" after picking beam search) would close it under the user's pointer. The
    # translation's title says when a reference is forced or beam search is on.
    with more.popover("Examples · reference · beam", width="stretch", key=INPUTS_OPEN, on_change="rerun") as box:
        if box.open:
            st.selectbox("Example", range(len(examples)), index=None, key="example",
                         placeholder="Pick an example sentence…",
                         format_func=lambda i: _example_label(examples[i], source_lang, target_lang),
                         on_change=_use_example, args=(examples, source_lang))
            reference = state.text_input(f"Reference translation ({target_lang}, optional)", "reference",
                                         placeholder="Leave empty to let the model decode",
                                         help="With a reference the model is fed it (forced decoding), so you "
                                              "see the attention and probabilities for that translation.")
            example_reference(example_row(examples, source_lang, text), source_lang, target_lang, reference)
            columns = st.columns([3, 2])
            with columns[0]:
                decoding = state.radio("Decoding", DECODINGS, "decoding", horizontal=True)
            with columns[1]:
                beam = state.selectbox("Beam size", BEAM_SIZES, "beam_size", 4, disabled=decoding == "Greedy")
        else:
            reference, decoding, beam = kept_decoding()
    row = example_row(examples, source_lang, text)
    note = failure_note(row, source_lang, target_lang) if row is not None else ""
    if note:                                   # a speaker's failure case says what to look at, in view
        st.caption(f"⚠ Failure case: {escape_md(note, 300)}")
    return text, reference, (1 if decoding == "Greedy" else beam)
