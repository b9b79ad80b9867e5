"""AppTest of Compare's "What carries the difference" (issue 53): for an edited sentence the section
shows the one sentence, then the encoder map and the three head maps, whose numbers are tr.patch's;
a click on a head tile opens that head; an identical edit, or one of another piece count, gets a
message and never an error."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from test_app import APP, MODELS, array, check_clean, specs
from atlas_ui.ui.common import escape_md
from viz.patching import carrier_sentence

SENTENCE = "A man is riding a bike."
EDITED = "A man is riding a horse."
pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")


@pytest.fixture(scope="module")
def en_de_translator():
    from transformer import Translator
    return Translator.load(MODELS["en-de"], device="cpu")


def opened(**params):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": "en-de", "view": "Compare", "sentence": SENTENCE, **params})
    at.run()
    check_clean(at, str(params))
    return at


def patch_specs(at) -> dict:
    """Title -> spec of the section's maps."""
    found = {}
    for spec in specs(at):
        title = spec["layout"].get("title", {}).get("text", "")
        if title.startswith(("Encoder layer output", "Encoder self-attention", "Decoder self-attention",
                             "Cross-attention")) and "original (left)" not in title:
            found[title.split(":")[0]] = spec
    return found


def test_the_section_shows_the_sentence_then_maps_with_tr_patch_numbers(en_de_translator):
    at = opened(edited=EDITED)
    res = en_de_translator.patch(SENTENCE, EDITED)
    assert any(h.value == "What carries the difference" for h in at.subheader)
    sentence = carrier_sentence(res.encoder, res.heads, res.clean_source_tokens, res.corrupt_source_tokens)
    assert sentence.startswith("The change is carried by")
    assert "**" + escape_md(sentence, 400) + "**" in [m.value for m in at.markdown]
    maps = patch_specs(at)
    encoder = maps["Encoder layer output at one source position, copied from the original"]
    np.testing.assert_allclose(array(encoder["data"][0]["z"]), res.encoder, atol=1e-5)   # float32 passes: thread counts differ
    for title, kind in (("Encoder self-attention", "encoder_self"), ("Decoder self-attention", "decoder_self"),
                        ("Cross-attention", "cross")):
        np.testing.assert_allclose(array(maps[title]["data"][0]["z"]), res.heads[kind], atol=1e-5)
    # the sentence stands above the maps
    values = [str(getattr(e, "value", "")) for e in at.main]
    assert any("What carries the difference" in v for v in values)


def test_a_click_on_a_head_tile_opens_that_head(monkeypatch):
    """AppTest cannot click a plotly chart (tests/test_browser.py does for the Overview): the callback
    is given the selection the browser sends for tile (1, 3), then the page draws what it set."""
    import streamlit
    from atlas_ui.views import compare_patching
    session = {"compare_patch_cross": {"selection": {"points": [{"curve_number": 1, "point_index": 7,
                                                                 "customdata": [1, 3]}]}}}
    monkeypatch.setattr(streamlit, "session_state", session)
    compare_patching._on_head_pick("compare_patch_cross", "cross", 3, 8)
    assert (session["kind"], session["layer"], session["head"]) == ("cross", 1, 3)
    assert session[compare_patching.PATCH_OPENED] and session["_opened_by_click"][0] == "compare_patch"
    monkeypatch.undo()
    at = opened(edited=EDITED)
    assert not any("Cross-attention · layer 1 · head 3" in s["layout"]["title"]["text"] for s in specs(at))
    for key in ("kind", "layer", "head", compare_patching.PATCH_OPENED):
        at.session_state[key] = session[key]
    at.run()
    check_clean(at, "a head opened")
    assert any("Cross-attention · layer 1 · head 3" in s["layout"]["title"]["text"] for s in specs(at))


@pytest.mark.parametrize("edited, message", [
    (SENTENCE, "reads as the same pieces"),
    ("A man is riding a big red horse.", "differ in piece count"),
])
def test_identical_or_longer_edits_get_a_message(edited, message):
    at = opened(edited=edited)
    shown = [i.value for i in at.info] + [c.value for c in at.caption]
    assert any(message in text for text in shown), shown
    if message == "differ in piece count":
        assert "Encoder layer output at one source position, copied from the original" not in patch_specs(at)
        assert "Cross-attention" in patch_specs(at)


def test_presenter_mode_draws_the_section():
    at = opened(edited=EDITED, present="1")
    maps = patch_specs(at)
    assert {"Encoder self-attention", "Decoder self-attention", "Cross-attention"} <= set(maps)
    assert all(spec["layout"]["height"] <= 480 for spec in maps.values())
