"""Text with several sentences (issue 31): split it, translate each sentence, show the whole
translation, and let the views show one sentence at a time.

Our models were trained on single captions: given two sentences they translate the first and stop,
so the rest only showed up as "left out" in the diagnosis. The page now splits the text, translates
every sentence with the same model and decoding (each one a cached run of its own, shared like any
other), and a row of numbers picks the sentence the views draw. The share link keeps it as
`sentence_no=` (counted from 1, as it is read); a link without it opens the first sentence, as
links made before did. State lives in st.session_state, never in module globals.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import streamlit as st

from ..ui import state
from ..runs.translation import translate
from ..ui.common import escape_md
from ..server.settings import MAX_CHARS, max_concurrent
from ..runs.warm import RunKey, holds

MAX_SENTENCES = 8            # sentences translated from one text; a paragraph more is cut with a message
SENTENCE_KEY = "sentence_index"        # session key: the sentence the views show, 0-based
# a sentence ends at . ! ? … (with closing quotes or brackets) before a space and a capital, digit
# or opening quote; 。！？ end one whatever follows (scripts without spaces or capitals)
END = re.compile(r"[.!?…]+[\"'»”’)\]]*\s+|[。！？]+\s*")
OPENERS = "\"'«„“‘(¿¡["
# a dot after these (lower-cased, inner dots dropped) is an abbreviation, not a sentence's end
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "etc", "eg", "ie", "no", "nr",
                           "zb", "ua", "bzw", "ca", "usw", "dh", "mme", "mlle", "hr", "fr"})


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, each stripped, empty ones left out: every line, cut where a sentence
    ends. An abbreviation (Mr., e.g., z. B.) or a single letter before the dot ends none."""
    sentences = []
    for line in str(text).splitlines():
        start = 0
        for end in END.finditer(line):
            after = line[end.end():end.end() + 1]
            starts_next = bool(after) and (after.isupper() or after.isdigit() or after in OPENERS)
            if end.group().strip()[:1] not in "。！？" and not starts_next:
                continue
            words = line[start:end.start()].split()
            last = words[-1].replace(".", "").lower() if words else ""
            if end.group().startswith(".") and (last in ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
                continue
            sentences.append(line[start:end.end()])
            start = end.end()
        sentences.append(line[start:])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


@dataclass(frozen=True)
class Sentences:
    """The input as the page translates it: its sentences (at most MAX_SENTENCES), each one's
    reference, how many were cut, and which one the views show."""
    parts: tuple                   # the sentences to translate; (text,) when it is one, () when empty
    references: tuple              # one per sentence: "" when none is forced
    left_out: int = 0              # sentences after MAX_SENTENCES, not translated
    index: int = 0                 # the sentence the views show

    @property
    def sentence(self) -> str:
        return self.parts[self.index] if self.parts else ""

    @property
    def reference(self) -> str:
        return self.references[self.index] if self.references else ""

    @property
    def several(self) -> bool:
        return len(self.parts) > 1


def split_input(text: str, reference: str, index=None) -> Sentences:
    """The text's sentences with their references and the kept choice (`index`, 0-based; checked).
    One sentence is the text itself, unchanged (the same cached run and share link as before). A
    reference is forced per sentence when it has as many sentences as the text, else not at all."""
    text = str(text)[:MAX_CHARS]
    parts = split_sentences(text)
    if len(parts) <= 1:
        return Sentences((text,), (reference,)) if text.strip() else Sentences((), ())
    left_out = max(0, len(parts) - MAX_SENTENCES)
    parts = parts[:MAX_SENTENCES]
    references = split_sentences(reference) if reference.strip() else []
    references = references[:len(parts)] if len(references) == len(parts) + left_out else [""] * len(parts)
    index = index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(parts) else 0
    return Sentences(tuple(parts), tuple(references), left_out, index)


def notices(text: str, reference: str, sentences: Sentences) -> None:
    """What the page did to the text, said once above the translation: a text cut to MAX_CHARS,
    sentences past MAX_SENTENCES left out, a reference that could not be paired."""
    if len(text) > MAX_CHARS:
        st.warning(f"The text is longer than {MAX_CHARS} characters; only the first {MAX_CHARS} are used.")
    if sentences.left_out:
        total = len(sentences.parts) + sentences.left_out
        st.warning(f"The text has {total} sentences; only the first {MAX_SENTENCES} are translated. Translate the "
                   f"other {sentences.left_out} separately (paste them on their own).")
    if sentences.several and reference.strip() and not any(sentences.references):
        st.warning(f"The reference does not have one sentence for each of the text's {len(sentences.parts)}: "
                   "it is not forced, and the model decodes.")


def translations(model, device: str, sentences: Sentences, beam: int, shown) -> list[str]:
    """The translation of every sentence, the one on screen as `shown` (a Result: the original or
    a what-if branch). Each sentence is its own cached run (the same one its views would open);
    one that cannot be read becomes "…"."""
    runs = [RunKey(model, device, part, 1 if ref.strip() else beam, ref.strip() or None)
            for part, ref in zip(sentences.parts, sentences.references)]
    cold = sum(not holds(run.digest) for i, run in enumerate(runs) if i != sentences.index)
    texts = []
    waiting = f"Translating {'the other sentence' if cold == 1 else f'the other {cold} sentences'}…"
    with st.spinner(waiting) if cold else contextlib.nullcontext():
        for i, run in enumerate(runs):
            if i == sentences.index:
                texts.append(shown.text)
                continue
            try:
                texts.append(translate(run, max_concurrent()).text)
            except ValueError:                        # nothing the model can read in it
                texts.append("…")
    return texts


def sentence_label(part: str) -> str:
    return part if len(part) <= 60 else part[:59] + "…"


def sentence_picker(sentences: Sentences) -> None:
    """One compact row of numbers, one per sentence; nothing for a single sentence. The choice
    is read before the translation runs (split_input), so a click is one rerun."""
    if not sentences.several:
        return
    options = list(range(len(sentences.parts)))
    state.restore(SENTENCE_KEY, sentences.index, lambda value: value in options)
    with st.container(key="sentence_picker", horizontal=True, vertical_alignment="center", gap="small"):
        st.markdown(f"**Sentence** :gray[{sentences.index + 1} of {len(options)}: "
                    f"“{escape_md(sentence_label(sentences.sentence), 80)}”]", width="content")
        st.segmented_control("Sentence", options, key=SENTENCE_KEY, required=True, label_visibility="collapsed",
                             format_func=lambda i: str(i + 1),
                             help="The text was split into sentences and each one translated; the views show "
                                  "the one picked here.")
    state.remember(SENTENCE_KEY, st.session_state[SENTENCE_KEY])


def url_value(sentences: Sentences):
    """The share link's sentence_no= (from 1), or None for the first (old links had none)."""
    return sentences.index + 1 if sentences.several and sentences.index else None
