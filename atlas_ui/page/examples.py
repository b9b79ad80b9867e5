"""The example sentences of the open model's source language, and an example that follows a switch of
model into the new language."""
from __future__ import annotations

from ..runs.catalogue import file_stamps, load_examples
from ..server.settings import DEFAULT_MODELS_DIR, EXAMPLES_FILE, FALLBACK_EXAMPLES
from ..ui import state


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
