"""Which model the page opens (the list's, or a hub id the operator's policy allows), loaded with a
progress box only while loading, and the note on what our own models were trained on."""
from __future__ import annotations

import logging

import streamlit as st

from ..runs.translation import get_translator
from ..runs.catalogue import ModelRef
from ..runs.warm import holds, model_key
from ..server.hub_policy import HubPolicy, HubRefused, open_hub, resolved
from ..server.settings import LOW_CONFIDENCE, real_model_hint
from ..ui import state
from ..ui.common import escape_md

LOG = logging.getLogger("atlas_ui")


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
