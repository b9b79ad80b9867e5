"""Wrong-language input in the app: a sentence in another language than the model reads gets a
note above the chart, with a one-click switch to a model here that reads it."""
from __future__ import annotations

from test_app import check_clean, new_app

GERMAN = "Die Frau, die den Regenschirm hält, wartet auf den Bus."


def warnings_of(at) -> list[str]:
    return [w.value.replace("\\", "") for w in at.main.warning]


def test_german_text_for_the_english_model_is_flagged_and_one_click_opens_de_en():
    at = new_app()
    at.query_params.update(model="en-de", sentence=GERMAN)
    at.run()
    check_clean(at, "german into en-de")
    notes = [w for w in warnings_of(at) if "looks like German" in w]
    assert notes and "this model reads English" in notes[0], warnings_of(at)
    switch = at.button(key="language_switch")
    assert switch.label == "Open de-en (reads German)"
    switch.click().run()
    check_clean(at, "switched")
    assert at.selectbox(key="model").value == "de-en"
    assert not [w for w in warnings_of(at) if "looks like" in w], "the model now reads the sentence"
    assert at.main.text[0].value.strip()


def test_english_text_for_the_english_model_gets_no_note():
    at = new_app()
    at.query_params.update(model="en-de", sentence="A man is riding a bike.")
    at.run()
    check_clean(at, "english")
    assert not [w for w in warnings_of(at) if "looks like" in w]
    assert all(button.key != "language_switch" for button in at.button)
