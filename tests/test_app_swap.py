"""AppTest of Compare's source edit: a typed second sentence, a swap (click a source word, pick a
neighbour, both translations drawn), the share link, and bad input (messages, never errors)."""
from __future__ import annotations

import html

import pytest

from test_app import MODELS, check_clean, new_app, specs
from transformer.analysis.neighbours import nearest_pieces, source_ids, source_side_ids, swap_word

pytestmark = pytest.mark.skipif(not MODELS, reason="no model directory")
SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."


@pytest.fixture(scope="module")
def translator():
    from transformer import Translator
    return Translator.load(MODELS.get("en-de", next(iter(MODELS.values()))), device="cpu")


def compare_app(**params):
    at = new_app()
    at.query_params.update({"view": "Compare", "sentence": SENTENCE, **params})
    at.run()
    check_clean(at, "open Compare")
    return at


def swap_map(at) -> dict:
    found = [s for s in specs(at) if "original (left), edited (right)" in s["layout"]["title"]["text"]]
    assert found, [s["layout"]["title"]["text"] for s in specs(at)]
    return found[0]


def labels(tokens, mark: str = "", marked=()) -> list[str]:
    return [(mark if i in marked else "") + html.escape(t, quote=False) for i, t in enumerate(tokens)]


def test_typed_second_sentence_is_translated_beside_the_first(translator):
    edited = "A woman in a red jacket is riding his bicycle down a narrow street."
    at = compare_app(edited=edited)
    assert at.text_input(key="compare_text").value == edited           # the share link's edited sentence
    layout = swap_map(at)["layout"]
    ours, theirs = translator.translate(SENTENCE), translator.translate(edited)
    assert [t.removeprefix("≠ ") for t in layout["yaxis"]["ticktext"]] == labels(ours.output_tokens)
    assert [t.removeprefix("≠ ") for t in layout["yaxis2"]["ticktext"]] == labels(theirs.output_tokens)
    assert layout["xaxis2"]["ticktext"][1] == "✎ ▁woman"
    assert "Cross-attention" in swap_map(at)["layout"]["title"]["text"]
    at.selectbox(key="compare_values").set_value("alti").run()
    check_clean(at, "ALTI+")
    assert "ALTI+ contributions" in swap_map(at)["layout"]["title"]["text"]
    assert any("from the edited source" in c.value or "edited source pieces" in c.value for c in at.caption)
    assert at.query_params["edited"] == [edited] or at.query_params["edited"] == edited


def test_swap_a_word_for_a_neighbour(translator):
    at = compare_app(edited="")
    assert [i.value for i in at.info if "empty" in i.value]              # an empty edit says so
    words = at.button_group(key="compare_word").options
    index = words.index("red")
    at.button_group(key="compare_word").set_value(index).run()
    check_clean(at, "click a word")
    source = translator.translate(SENTENCE, capture=False).source_tokens
    position = source.index("▁red")
    side = source_side_ids(MODELS.get("en-de", next(iter(MODELS.values()))))     # the English side only
    expected = [n.piece for n in nearest_pieces(translator, source_ids(translator, ["▁red"]), 12, word_start=True,
                                                among=side)]
    radio = at.radio(key=f"compare_swap_{index}")
    shown = [option.rsplit(" (", 1)[0] for option in radio.options]  # "blue (0.29)" -> "blue"
    assert shown == [piece.lstrip("▁") for piece in expected if piece.strip("▁")][:8]
    picked = expected[1]
    radio.set_value(picked).run()
    check_clean(at, "pick a neighbour")
    edited = swap_word(translator, source, position, position + 1, picked)
    assert at.text_input(key="compare_text").value == edited
    layout = swap_map(at)["layout"]
    assert layout["xaxis2"]["ticktext"][position] == "✎ " + picked
    assert layout["xaxis"]["ticktext"][position] == "✎ ▁red"
    theirs = translator.translate(edited)
    assert [t.removeprefix("≠ ") for t in layout["yaxis2"]["ticktext"]] == labels(theirs.output_tokens)


def test_bad_edits_get_messages(monkeypatch):
    from atlas_ui.server.settings import MAX_CHARS
    from atlas_ui.views import compare
    at = compare_app(edited="a " * (MAX_CHARS // 2 + 10))
    assert any(f"{MAX_CHARS} allowed" in w.value for w in at.warning)
    assert len(specs(at)) == 0                                          # no half-drawn comparison
    at.text_input(key="compare_text").set_value('<img src=x onerror="alert(1)"> **bold**').run()
    check_clean(at, "markup")
    for md in at.markdown:
        assert "<img" not in md.value
    assert all("<img" not in t for t in swap_map(at)["layout"]["xaxis2"]["ticktext"])
    monkeypatch.setattr(compare, "word_neighbours", lambda *args, **kwargs: [])
    at.button_group(key="compare_word").set_value(0).run()
    check_clean(at, "no neighbours")
    assert any("has no neighbours" in i.value for i in at.info)
    assert at.get("plotly_chart")                                         # the page keeps working
    monkeypatch.setattr(compare, "word_neighbours", lambda *args, **kwargs: [("▁x", 0.5)])
    monkeypatch.setattr(compare, "swapped_text", lambda *args, **kwargs: "")
    at.button_group(key="compare_word").set_value(1).run()
    at.radio(key="compare_swap_1").set_value("▁x").run()
    check_clean(at, "empty swap")
    assert any("leaves the source empty" in i.value for i in at.info)


def test_heads_side_by_side_is_kept():
    at = compare_app(compare="heads")
    assert at.selectbox(key="compare_mode").value == "heads"
    at.multiselect(key="compare_heads").set_value(["encoder_self:0:0", "cross:1:1", "cross:2:3"]).run()
    check_clean(at, "three heads")
    titles = [s["layout"]["title"]["text"] for s in specs(at)]
    assert len(titles) == 3 and "layer 2 · head 3" in titles[2]
