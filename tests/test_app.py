"""AppTest checks of app.py: default run, every view and control, bad inputs, chart specs.

The app reads models from $ATLAS_MODELS_DIR, else pretrained/ (CI has pretrained/en-de).
Each full run translates on CPU, so runs are shared between checks where it reads well.
"""
from __future__ import annotations

import base64
import html
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atlas_ui.runs.catalogue import find_models
from atlas_ui.server.settings import DEFAULT_MODEL, MAX_CHARS, models_dir
from atlas_ui.views import VIEWS

APP = str(ROOT / "app.py")
MODELS = find_models(str(models_dir()))
pytestmark = pytest.mark.skipif(not MODELS, reason=f"no model directory in {models_dir()}")


def new_app():
    from streamlit.testing.v1 import AppTest
    return AppTest.from_file(APP, default_timeout=120)


def opened_link(**params):
    """The app's first run on a share link with these query parameters, checked for errors."""
    at = new_app()
    at.query_params.update(params)
    at.run()
    check_clean(at, str(params))
    return at


def open_inputs(at):
    """What a click on the examples · reference · beam popover does. The popover is lazy (its widgets
    are drawn only while open) and AppTest sends no popover state back, so set it before every run
    that needs them."""
    at.session_state["inputs_open"] = True
    return at


def check_clean(at, where: str = "") -> None:
    """No exception element and no error box on the page."""
    assert not at.exception, f"{where}: {[e.value for e in at.exception]}"
    assert not at.error, f"{where}: {[e.value for e in at.error]}"


def opened_on_a_branch(translator, text: str, opened):
    """A share link with a what-if branch, opened by the test module's `opened(**params)`: the
    original's first piece, then the model's second choice at step 2, which decodes to another
    translation; the link opens on the branch. Returns (AppTest, original, prefix, branch), the
    runs from the Translator API."""
    original = translator.translate(text, top_k=10)
    prefix = [original.output_tokens[0], original.steps[1].top_k[1][0]]
    branch = translator.translate(text, prefix=prefix, top_k=10)
    assert branch.output_tokens != original.output_tokens
    at = opened(branch=" ".join(prefix))                   # a link with a branch opens on the branch
    assert at.radio(key="branch_view").value == "Branch"
    return at, original, prefix, branch


def specs(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A spec array, whether plotly serialised it as nested lists or as a typed base64 array."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(n) for n in str(value.get("shape", "")).split(",") if n.strip()]
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return data.reshape(shape) if shape else data
    return np.array(value, dtype=float)


def z_array(trace: dict) -> np.ndarray:
    return array(trace["z"])


def main_heatmap(at) -> dict:
    return specs(at)[0]


def escaped(tokens) -> list[str]:
    """Pieces as the API page wants them on an axis: HTML-escaped (`</s>` -> `&lt;/s&gt;`)."""
    return [html.escape(t, quote=True).replace("&quot;", "&#34;").replace("&#x27;", "&#39;") for t in tokens]


def assert_axes(spec: dict, queries: list, keys: list) -> None:
    z = z_array(spec["data"][0])
    assert z.shape == (len(queries), len(keys))
    assert spec["layout"]["yaxis"]["ticktext"] == escaped(queries)
    assert spec["layout"]["xaxis"]["ticktext"] == escaped(keys)
    assert spec["layout"]["yaxis"]["title"]["text"] == "Query"
    assert spec["layout"]["xaxis"]["title"]["text"] == "Key"


def test_default_run_shows_translated_example(translator):
    at = new_app()
    at.run()
    check_clean(at, "default run")
    text = at.text_area(key="text").value
    from atlas_ui.page.examples import examples_for
    assert text == examples_for(models_dir(), "en", "de")[0]["en"], "the app opens with the first example"
    out = translator.translate(text, beam_size=1)
    # the translation, shown as plain text, and the probability-shaded pieces
    assert any(text.value == out.text for text in at.text)
    # first screen: cross-attention on the best aligner head_roles.json names (en-de: layer 1,
    # head 7; page/landing.py), tokens as escaped tick labels, exactly the weights the model computed
    best = json.loads((Path(MODELS["en-de"]) / "head_roles.json").read_text())["best_alignment_head"]
    layer, head = best["layer"], best["head"]
    assert (at.selectbox(key="kind").value, at.selectbox(key="layer").value, at.selectbox(key="head").value) == (
        "cross", layer, head)
    spec = main_heatmap(at)
    assert spec["data"][0]["type"] == "heatmap"
    assert_axes(spec, out.output_tokens, out.source_tokens)
    assert "&lt;/s&gt;" in spec["layout"]["xaxis"]["ticktext"]
    z = z_array(spec["data"][0])
    np.testing.assert_allclose(z, out.attention.cross[layer, head], atol=1e-6)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-3)
    params = at.query_params
    assert params["view"] == ["Heatmap"] or params["view"] == "Heatmap"
    # the sidebar shows the device the app picked (its first: the GPU where there is one) and the card's scores
    from atlas_ui.runs.translation import available_devices
    shown = "GPU" if available_devices()[0].startswith("cuda") else "CPU"
    assert any(f"### Status\n\nDevice: {shown}" in md.value for md in at.sidebar.markdown)
    if translator.card.get("scores"):
        test16 = translator.card["scores"]["test_2016_flickr"]["greedy"]["bleu"]
        assert any(f"| test16 greedy | {test16:.1f} |" in md.value for md in at.sidebar.markdown), "card scores"
    else:                               # a card without scores (e.g. still being scored) is tolerated
        assert any("no scores" in md.value for md in at.sidebar.markdown)
    # picking an example fills the source box and translates it
    second = examples_for(models_dir(), "en", "de")[1]["en"]
    assert "example" not in [s.key for s in at.selectbox], "the popover's widgets are drawn only while it is open"
    open_inputs(at).run()
    open_inputs(at).selectbox(key="example").set_value(1).run()
    check_clean(at, "example picked")
    assert at.text_area(key="text").value == second
    at.button(key="translate").click().run()
    check_clean(at, "translate button")
    assert any(text.value == translator.translate(second).text for text in at.text)


def test_heatmap_controls_and_kinds(translator):
    at = new_app()
    at.run()
    out = translator.translate(at.text_area(key="text").value, beam_size=1)
    at.selectbox(key="kind").set_value("decoder_self").run()
    check_clean(at, "decoder_self")
    assert_axes(main_heatmap(at), out.output_tokens, out.target_tokens)
    at.selectbox(key="kind").set_value("cross")
    at.selectbox(key="layer").set_value(1)
    at.selectbox(key="head").set_value(1).run()
    check_clean(at, "cross L1 H1")
    spec = main_heatmap(at)
    assert_axes(spec, out.output_tokens, out.source_tokens)
    np.testing.assert_allclose(z_array(spec["data"][0]), out.attention.cross[1, 1], atol=1e-5)
    assert "layer 1 · head 1" in spec["layout"]["title"]["text"]
    at.toggle(key="avg_heads").set_value(True).run()
    check_clean(at, "average heads")
    np.testing.assert_allclose(z_array(main_heatmap(at)["data"][0]), out.attention.cross[1].mean(0), atol=1e-5)
    assert not any(t.key == "words" for t in at.toggle), "the display options are drawn only while open"
    at.session_state["display_open"] = True                  # what a click on "Display options" does
    at.run()
    for key in ("hide_special", "show_space", "normalize", "words"):
        at.toggle(key=key).set_value(True).run()
        check_clean(at, key)
        assert at.get("plotly_chart"), key
    spec = main_heatmap(at)
    assert not any(t in ("&lt;/s&gt;", "&lt;s&gt;") for t in spec["layout"]["xaxis"]["ticktext"])
    # the kind/layer/head survive a trip through another view
    at.radio(key="view").set_value("Masks").run()
    at.radio(key="view").set_value("Heatmap").run()
    assert at.selectbox(key="kind").value == "cross" and at.selectbox(key="layer").value == 1


def test_every_view_and_its_controls(translator):
    at = new_app()
    at.run()
    out = translator.translate(at.text_area(key="text").value, beam_size=1)
    T = len(out.output_tokens)
    for view in VIEWS:
        at.radio(key="view").set_value(view).run()
        check_clean(at, view)
        if view in ("Beam", "Ablation"):        # greedy, nothing ticked: a prompt (tested in test_app_features)
            assert at.info, f"{view} explains what it needs"
            continue
        assert at.get("plotly_chart"), f"{view} shows charts"
        if view == "Overview":
            spec = main_heatmap(at)
            L, H = out.attention.encoder_self.shape[:2]
            assert spec["data"][1]["type"] == "scatter"
            assert array(spec["data"][1]["customdata"]).tolist() == [[l, h] for l in range(L) for h in range(H)]
            at.selectbox(key="layer").set_value(L - 1)
            at.selectbox(key="head").set_value(H - 1).run()
            check_clean(at, "overview selectors")
            assert f"layer {L - 1} · head {H - 1}" in specs(at)[1]["layout"]["title"]["text"]
        elif view == "Decoding steps":
            at.button(key="step_next").click().run()
            check_clean(at, "next step")
            assert at.slider(key="step").value == 1
            at.slider(key="step").set_value(T - 1).run()
            at.button(key="step_prev").click().run()
            assert at.slider(key="step").value == T - 2
            at.toggle(key="step_all_heads").set_value(True).run()
            check_clean(at, "all heads")
            cross = [s for s in specs(at) if "Cross-attention over the source" in s["layout"]["title"]["text"]][0]
            assert z_array(cross["data"][0]).shape == (out.attention.cross.shape[1], len(out.source_tokens))
        elif view == "Masks":
            assert len(at.get("plotly_chart")) >= 5
        elif view == "Compare":
            at.text_input(key="compare_text").set_value("A dog runs.").run()
            check_clean(at, "compare an edited sentence")
            at.selectbox(key="compare_mode").set_value("heads").run()
            at.multiselect(key="compare_heads").set_value(
                ["encoder_self:0:0", "decoder_self:0:1", "cross:0:0", "cross:1:1"]).run()
            check_clean(at, "compare four heads")
            at.selectbox(key="compare_mode").set_value("swap").run()
    # decoding options: beam search, then a forced reference translation
    at.radio(key="view").set_value("Heatmap")
    open_inputs(at).run()
    open_inputs(at).radio(key="decoding").set_value("Beam search").run()
    open_inputs(at).selectbox(key="beam_size").set_value(3).run()
    check_clean(at, "beam")
    open_inputs(at).text_input(key="reference").set_value("Ein Mann fährt Fahrrad.").run()
    check_clean(at, "reference")
    assert any("forced" in md.value for md in at.markdown)


BAD_INPUTS = {
    "empty": ("", "info"),
    "whitespace": ("   \n\t  ", "info"),
    "zero-width space": ("\u200b", "info"),
    "html and markdown": ("<script>alert(1)</script> **bold** [x](http://e)", None),
    "injection": ('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>', None),
    "emoji cjk rtl": ("😀 猫が好き שלום עולם مرحبا 🇩🇪", None),
    "control chars": ("\x00\x07 A man\x1b[31m rides.\u202e", None),
    "too long": ("a, " * 400, "warning"),       # > MAX_CHARS characters and > max_source_len pieces
}


def test_bad_inputs_give_messages_not_errors():
    at = new_app()
    at.run()
    for name, (text, message) in BAD_INPUTS.items():
        at.text_area(key="text").set_value(text).run()
        check_clean(at, name)
        if message == "info":
            assert at.info and not at.get("plotly_chart"), name
        elif message == "warning":
            notices = " ".join(w.value for w in at.warning)
            assert f"{MAX_CHARS} characters" in notices and "pieces" in notices, notices
            assert at.get("plotly_chart")
        else:
            assert at.get("plotly_chart"), name
            for md in at.markdown:     # user text never reaches markdown unescaped
                assert "<script" not in md.value and "<img" not in md.value, name
            labels = main_heatmap(at)["layout"]["xaxis"]["ticktext"]
            assert not any("<" in label or ">" in label for label in labels), labels
    # markup in the reference translation: forced decoding, labels and pieces stay literal
    open_inputs(at).text_area(key="text").set_value("A man is riding a bike.").run()
    open_inputs(at).text_input(key="reference").set_value(BAD_INPUTS["injection"][0]).run()
    check_clean(at, "reference injection")
    assert at.get("plotly_chart")
    for md in at.markdown:
        assert "<script" not in md.value and "<img" not in md.value
    open_inputs(at).text_input(key="reference").set_value("\u200b").run()       # no pieces: only </s> is forced
    check_clean(at, "empty-ish reference")


def test_the_decoding_popover_draws_its_widgets_only_while_open_and_stays_open():
    """Its eight widgets cost every session a run's worth of messages; drawn only while open. Its
    label must not change with what is picked in it, or the popover would close under the pointer."""
    at = new_app()
    at.run()
    assert not any(w.key in ("example", "beam_size") for w in at.selectbox), "closed: nothing drawn"
    open_inputs(at).run()
    at.radio(key="decoding").set_value("Beam search").run()          # no second open: it stayed open
    check_clean(at, "beam picked in the popover")
    assert at.selectbox(key="beam_size").value == 4 and not at.selectbox(key="beam_size").disabled
    def title():
        return next(m.value for m in at.main.markdown if m.value.startswith("**Translation")).replace("\\", "")
    assert "beam search (4)" in title()
    at.session_state["inputs_open"] = False                          # closed again: the choice holds
    at.run()
    assert not any(w.key == "beam_size" for w in at.selectbox)
    assert "beam search (4)" in title()


def test_url_state_is_read_and_validated():
    at = new_app()
    at.query_params.update({"view": "Decoding steps", "layer": "99", "head": "abc", "step": "1",
                            "sentence": "Two dogs play in the snow.", "model": "no-such-model"})
    at.run()
    check_clean(at, "url")
    assert at.radio(key="view").value == "Decoding steps"
    assert at.text_area(key="text").value == "Two dogs play in the snow."
    assert at.slider(key="step").value == 1
    assert at.selectbox(key="layer").value == 0 and at.selectbox(key="head").value == 0
    assert at.query_params["sentence"] in ("Two dogs play in the snow.", ["Two dogs play in the snow."])


def test_card_scores_tolerate_missing_keys():
    from atlas_ui.page.inputs import card_scores
    assert card_scores({}).shape == (4, 3)
    table = card_scores({"scores": {"val": {"greedy": {"bleu": 30.5}}, "test_2016_flickr": "oops"}})
    assert table.loc[0, "BLEU"] == 30.5 and table["chrF"].isna().all()


def test_escape_md_makes_markup_literal():
    from atlas_ui.ui.common import escape_md
    out = escape_md("<b>x</b> **y** [z](http://e) :red[w] $m$ \x00")
    assert out == r"\<b\>x\<\/b\> \*\*y\*\* \[z\]\(http\:\/\/e\) \:red\[w\] \$m\$ " + "\ufffd"


def test_model_picker_and_a_broken_model(tmp_path, monkeypatch):
    """Every model directory is offered; a broken one gives a short error, and switching back works."""
    name = DEFAULT_MODEL if DEFAULT_MODEL in MODELS else next(iter(MODELS))
    (tmp_path / name).symlink_to(Path(MODELS[name]).resolve(), target_is_directory=True)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{}")
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    at = new_app()
    at.run()
    check_clean(at, "models dir from the environment")
    labels = at.selectbox(key="model").options          # "en-de (en → de)": name and languages
    assert sorted(label.split(" ")[0] for label in labels) == sorted([name, "broken"])
    at.selectbox(key="model").set_value("broken").run()
    assert not at.exception
    assert at.error and "Could not load the model broken" in at.error[0].value
    assert not at.get("plotly_chart")
    at.selectbox(key="model").set_value(name).run()
    check_clean(at, "back to the good model")
    assert at.get("plotly_chart")


def test_examples_file_and_its_fallback(tmp_path):
    from atlas_ui.runs.catalogue import load_examples
    from atlas_ui.server.settings import FALLBACK_EXAMPLES
    path = tmp_path / "examples.tsv"
    path.write_text('en\tde\tshows\nHi "there" <b>.\tHallo.\tquotes\n\n', encoding="utf-8")
    rows = load_examples((str(tmp_path / "missing.tsv"), str(path)), FALLBACK_EXAMPLES, ("t1",))
    assert rows == [{"en": 'Hi "there" <b>.', "de": "Hallo.", "shows": "quotes"}]
    missing = load_examples((str(tmp_path / "missing.tsv"),), FALLBACK_EXAMPLES, ())
    assert missing == [dict(row) for row in FALLBACK_EXAMPLES]


def share_link(at) -> str:
    """The sidebar's link to this view (a markdown link: [text](url))."""
    links = [href for md in at.sidebar.markdown for href in re.findall(r"\]\(([^)]*\?[^)]*)\)", md.value)]
    assert links, "the share box holds a link"
    return links[0]
