"""Examples a speaker can trust: every example of pretrained/examples.tsv is run through both
shipped models; one without a failure note for a direction must come out close to its reference
and confidently, a failure case says what goes wrong. The app shows the example's reference with
a button that forces it, and marks failure cases in the picker and under the sentence."""
from __future__ import annotations

import sys

import pytest

from test_app import ROOT, check_clean, new_app, open_inputs

sys.path.insert(0, str(ROOT / "benchmarks"))
from check_examples import check, read_examples  # noqa: E402

from transformer import Translator  # noqa: E402

ROWS = read_examples()


def test_every_example_has_both_sentences_a_feature_and_failure_columns():
    assert len(ROWS) >= 15
    for row in ROWS:
        assert row["en"].strip() and row["de"].strip() and row["shows"].strip(), row
        assert {"failure_en_de", "failure_de_en"} <= set(row)
    trusted = [row for row in ROWS if not row["failure_en_de"]]
    assert len(trusted) >= 12 and not ROWS[0]["failure_en_de"], "the app opens on an example that works"


@pytest.mark.parametrize("name", ["en-de", "de-en"])
def test_examples_without_a_failure_note_come_out_right(name):
    translator = Translator.load(ROOT / "pretrained" / name, device="cpu")
    results = check(translator, ROWS)
    for result in results:
        if result["failure"]:
            continue
        assert result["chrf"] >= 55 and result["mean_prob"] >= 0.6, result
        assert not result["low_confidence"]
    # a failure case is kept for something that shows: its output differs from the reference
    assert all(r["translation"] != r["reference"] for r in results if r["failure"])


def caption_texts(at) -> list[str]:
    return [c.value.replace("\\", "") for c in at.main.caption]


def test_picking_an_example_shows_its_reference_and_one_click_forces_it():
    at = new_app()
    open_inputs(at).run()                                  # the examples are in the (lazy) popover
    open_inputs(at).selectbox(key="example").set_value(1).run()
    check_clean(at, "example picked")
    reference = ROWS[1]["de"]
    assert at.text_area(key="text").value == ROWS[1]["en"]
    assert any(text == f"Reference (de): {reference}" for text in caption_texts(at)), caption_texts(at)
    open_inputs(at).button(key="force_reference").click().run()
    check_clean(at, "reference forced")
    assert at.text_input(key="reference").value == reference
    title = next(m.value for m in at.main.markdown if m.value.startswith("**Translation"))
    assert "forced to the reference" in title
    open_inputs(at).button(key="force_reference").click().run()            # and back to the model's own decoding
    assert at.text_input(key="reference").value == ""


def test_a_failure_case_is_marked_in_the_picker_and_says_what_to_look_at():
    index = next(i for i, row in enumerate(ROWS) if row["failure_en_de"])
    at = new_app()
    open_inputs(at).run()
    picker = at.selectbox(key="example")
    assert picker.format_func(index).startswith("⚠ failure case · ")
    assert not picker.format_func(0).startswith("⚠")
    picker.set_value(index).run()
    check_clean(at, "failure case")
    note = ROWS[index]["failure_en_de"]
    assert any(text == f"⚠ Failure case: {note}" for text in caption_texts(at)), caption_texts(at)
