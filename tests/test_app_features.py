"""AppTest checks of the analysis features: head summary, ablation, beam view, rollout, word view,
share links, export and presenter mode. Every number on screen is recomputed from the API."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from test_app import MODELS, array, check_clean, new_app, share_link, specs, z_array
from viz import escape_label, head_statistics, merge_attention, merge_keys, rollout
from viz.stats import STAT_COLUMNS, STAT_TITLES

pytestmark = pytest.mark.skipif(not MODELS, reason="no model directory")


def started(open_view: str | None = None, **params):
    """A first run (with URL query parameters), then a click on the view `open_view`."""
    at = new_app()
    at.query_params.update(params)
    at.session_state["display_open"] = True                # the sidebar's display options (lazy), open
    at.run()
    check_clean(at, "start")
    if open_view:
        at.radio(key="view").set_value(open_view).run()
        check_clean(at, open_view)
    return at


def chart_titled(at, text: str) -> dict:
    matches = [s for s in specs(at) if text in (s["layout"].get("title") or {}).get("text", "")]
    assert matches, f"no chart titled {text!r}: {[s['layout'].get('title') for s in specs(at)]}"
    return matches[0]


def small_multiples(at) -> list:
    """(title, z) of each map of the Head summary's small-multiples chart, in order."""
    found = [s for s in specs(at) if sum(t.get("type") == "heatmap" for t in s["data"]) > 1]
    assert len(found) == 1, "the other statistics are one chart"
    titles = [a["text"] for a in found[0]["layout"]["annotations"] if a["text"] != "no value for these heads"]
    maps = [z_array(t) for t in found[0]["data"] if t.get("type") == "heatmap"]
    return list(zip(titles, maps))


def test_head_summary_for_the_sentence_and_the_examples(translator):
    at = started("Head summary", kind="encoder_self")             # not the cross-attention landing
    text = at.text_area(key="text").value
    out = translator.translate(text)
    L, H = out.attention.encoder_self.shape[:2]
    stats = head_statistics(out.attention.encoder_self, out.source_tokens, out.source_tokens)
    charts = [s for s in specs(at) if s["data"][0].get("type") == "heatmap"]
    assert len(charts) == 3                               # the large map, the small multiples, the opened head
    maps = small_multiples(at)
    assert [title for title, _ in maps] == [escape_label(STAT_TITLES[c]) for c in STAT_COLUMNS[1:]]
    for (title, z), column in zip(maps, STAT_COLUMNS[1:]):
        np.testing.assert_allclose(z, stats[column].to_numpy().reshape(L, H), rtol=1e-4, err_msg=title)
    entropy = z_array(charts[0]["data"][0])
    assert entropy.shape == (L, H)
    np.testing.assert_allclose(entropy, stats["entropy"].to_numpy().reshape(L, H), rtol=1e-4)
    assert charts[0]["data"][1]["type"] == "scatter"     # clickable head markers
    assert not at.dataframe, "the table of every head is drawn only while its expander is open"
    at.session_state["stats_table_open"] = True             # what a click on its expander does
    at.run()
    check_clean(at, "table open")
    table = at.dataframe[0].value
    assert len(table) == 3 * L * H and {"kind", "layer", "head", *STAT_COLUMNS} <= set(table.columns)
    assert set(table["kind"]) == {"encoder_self", "decoder_self", "cross"}
    assert table["diagonal_share"][table["kind"] == "cross"].isna().all()
    # the same figures, averaged over every example sentence
    at.radio(key="stats_scope").set_value("All examples").run()
    check_clean(at, "all examples")
    from atlas_ui.page.examples import examples_for
    from atlas_ui.server.settings import models_dir
    texts = [row["en"] for row in examples_for(models_dir(), "en", "de")]
    per_sentence = []
    for sentence in texts:
        run = translator.translate(sentence)
        per_sentence.append(head_statistics(run.attention.encoder_self, run.source_tokens, run.source_tokens)
                            ["max_weight"].to_numpy())
    averaged = dict(small_multiples(at))[escape_label(STAT_TITLES["max_weight"])]
    np.testing.assert_allclose(averaged.ravel(), np.mean(per_sentence, axis=0), rtol=1e-4)
    assert f"All {len(texts)} examples" in at.radio(key="stats_scope").options[1]


def test_ablation_retranslates_and_compares_step_by_step(translator):
    at = started("Ablation")
    assert at.info and "No head is switched off" in at.info[0].value
    assert not at.get("pills"), "the head picker is drawn only while its popover is open"
    at.session_state["ablation_picker_open"] = True          # what a click on "Heads switched off" does
    at.run()
    text = at.text_area(key="text").value
    original = translator.translate(text)
    n_layers = translator.config.n_decoder_layers
    for layer in range(n_layers):                          # the "whole layer" shortcut, every cross layer
        at.button(key=f"ablate_all_cross_{layer}").click().run()
    check_clean(at, "all cross heads off")
    heads = translator.config.n_heads
    assert at.pills(key=f"ablate_cross_{n_layers - 1}").value == list(range(heads))
    mask = {("cross", layer, head) for layer in range(n_layers) for head in range(heads)}
    ablated = translator.translate(text, head_mask=mask)
    codes = [code.value for code in at.code]
    assert original.text in codes and ablated.text in codes
    assert ablated.text != original.text, "no cross-attention at all must change the translation"
    assert any("atlas-changed" in md.value for md in at.markdown), "changed pieces are marked"
    forced = translator.translate(text, target=list(original.output_tokens), head_mask=mask)
    fig = chart_titled(at, "original vs heads off")
    np.testing.assert_allclose(array(fig["data"][0]["y"]), [s.prob for s in original.steps], atol=1e-5)
    np.testing.assert_allclose(array(fig["data"][1]["y"]), [s.prob for s in forced.steps], atol=1e-5)
    assert "ablate" in at.query_params
    # pressing the shortcut again switches the layer back on; "switch every head back on" clears all
    at.button(key=f"ablate_all_cross_{n_layers - 1}").click().run()
    assert at.pills(key=f"ablate_cross_{n_layers - 1}").value == []
    at.button(key="ablate_clear").click().run()
    check_clean(at, "cleared")
    assert "No head is switched off" in at.info[0].value


def test_beam_view_tree_and_node_attention(translator):
    at = started("Beam", kind="encoder_self")             # not the cross-attention landing
    assert at.info and "needs beam search" in at.info[0].value
    at.button(key="beam_switch").click().run()
    check_clean(at, "switched to beam")
    text = at.text_area(key="text").value
    out = translator.translate(text, beam_size=4)
    tree = chart_titled(at, "Beam search")
    nodes = tree["data"][-1]
    expected = [[t, i] for t, step in enumerate(out.beam) for i in range(len(step))]
    assert sorted(array(nodes["customdata"]).astype(int).tolist()) == expected
    # the default node is the returned hypothesis: its attention is the translation's own
    attention = chart_titled(at, "Cross-attention")
    np.testing.assert_allclose(z_array(attention["data"][0]), out.attention.cross[0, 0], atol=1e-5)
    # another node: the attention of the pass that feeds that hypothesis
    step, index = 1, 1
    from atlas_ui.views.beam import beam_signature
    at.session_state["beam_node"] = {"run": beam_signature(out), "node": [step, index]}
    at.run()
    check_clean(at, "other node")
    pieces = out.beam[step][index].pieces
    node_run = translator.translate(text, target=list(pieces))
    np.testing.assert_allclose(z_array(chart_titled(at, "Cross-attention")["data"][0]),
                               node_run.attention.cross[0, 0], atol=1e-5)
    assert any(f"step {step + 1}, hypothesis {index + 1}" in md.value for md in at.markdown)
    # a node picked for another sentence is not carried over: the returned hypothesis again
    at.session_state["beam_node"] = {"run": "another sentence", "node": [step, index]}
    at.run()
    final_step, final_index = out.beam_final
    assert any(f"step {final_step + 1}, hypothesis {final_index + 1}" in md.value for md in at.markdown)


def test_rollout_next_to_last_layer_and_word_view(translator):
    at = started("Rollout", kind="encoder_self")             # not the cross-attention landing
    out = translator.translate(at.text_area(key="text").value)
    flow = z_array(chart_titled(at, "rollout")["data"][0])
    np.testing.assert_allclose(flow, rollout(out.attention.encoder_self), atol=1e-5)
    last = z_array(chart_titled(at, "mean of heads")["data"][0])
    np.testing.assert_allclose(last, out.attention.encoder_self[-1].mean(0), atol=1e-5)
    at.toggle(key="words").set_value(True).run()
    check_clean(at, "rollout words")
    merged, words, _ = merge_attention(rollout(out.attention.encoder_self), out.source_tokens, out.source_tokens)
    spec = chart_titled(at, "rollout")
    np.testing.assert_allclose(z_array(spec["data"][0]), merged, atol=1e-5)
    assert len(spec["layout"]["xaxis"]["ticktext"]) == len(words)
    # the word view reaches the decoding steps too: source keys merged into words
    at.radio(key="view").set_value("Decoding steps").run()
    check_clean(at, "steps words")
    cross, keys = merge_keys(out.attention.cross[0, 0, 0:1, :], out.source_tokens)
    spec = chart_titled(at, "Cross-attention over the source")
    np.testing.assert_allclose(z_array(spec["data"][0]), cross, atol=1e-5)
    assert len(spec["layout"]["xaxis"]["ticktext"]) == len(keys)


def test_share_link_holds_the_view_and_restores_it():
    at = started(None, view="Decoding steps", kind="cross", layer="1", head="2", step="2",
                 sentence="Two dogs play in the snow.", words="1", ablate="cross:0:3,encoder_self:1:0")
    assert at.radio(key="view").value == "Decoding steps"
    assert at.slider(key="step").value == 2
    assert at.toggle(key="words").value is True
    assert at.selectbox(key="layer").value == 1 and at.selectbox(key="head").value == 2
    link = share_link(at)
    query = parse_qs(urlparse(link).query)
    assert query["view"] == ["Decoding steps"] and query["sentence"] == ["Two dogs play in the snow."]
    assert query["step_no"] == ["3"] and "step" not in query    # the link's step=2 counted from 0 is step 3
    assert query["layer"] == ["1"] and query["head"] == ["2"]
    assert query["ablate"] == ["cross:0:3,encoder_self:1:0"] and query["words"] == ["1"]
    # the ablation view finds the heads from the link already ticked
    at.session_state["ablation_picker_open"] = True
    at.radio(key="view").set_value("Ablation").run()
    check_clean(at, "ablation from link")
    assert at.pills(key="ablate_cross_0").value == [3] and at.pills(key="ablate_encoder_self_1").value == [0]


def test_export_buttons_and_presenter_mode():
    at = started("Decoding steps")
    assert not at.get("download_button"), "closed Export draws no buttons"
    at.session_state["export_open"] = True                 # what a click on the expander does
    at.run()
    labels = {button.label for button in at.get("download_button")}
    assert {"Trace (JSON)", "Trace (NPZ)", "This figure (HTML)"} <= labels
    configs = [json.loads(chart.proto.config) for chart in at.get("plotly_chart")]
    assert all(c["toImageButtonOptions"]["format"] == "png" for c in configs), "PNG from every toolbar"
    at.selectbox(key="image_format").set_value("svg").run()
    configs = [json.loads(chart.proto.config) for chart in at.get("plotly_chart")]
    assert configs and all(c["toImageButtonOptions"]["format"] == "svg" for c in configs)
    at.toggle(key="presenter").set_value(True).run()
    check_clean(at, "presenter")
    assert any("font-size: 19px" in md.value for md in at.markdown), "presenter CSS"
    assert not at.slider, "no slider to steal the arrow keys in presenter mode"
    assert any(md.value.startswith("### Step 1 of") for md in at.markdown)
    at.button(key="step_next").click().run()
    assert any(md.value.startswith("### Step 2 of") for md in at.markdown)
    assert all(s["layout"]["font"]["size"] == 18 for s in specs(at)), "large chart fonts"
    assert at.query_params["present"] in ("1", ["1"])
    at.button(key="presenter_exit").click().run()
    check_clean(at, "presenter off")
    assert at.slider(key="step").value == 1 and at.toggle(key="presenter").value is False


def test_tiled_views_hide_special_tokens(translator):
    at = started("Overview", kind="encoder_self")             # not the cross-attention landing
    out = translator.translate(at.text_area(key="text").value)
    at.toggle(key="hide_special").set_value(True).run()
    check_clean(at, "overview without specials")
    from viz.overview import default_gap
    L, H = out.attention.encoder_self.shape[:2]
    S = len([t for t in out.source_tokens if t not in ("<s>", "</s>", "<pad>")])
    gap = default_gap(S, S)
    z = z_array(specs(at)[0]["data"][0])
    assert z.shape == (L * (S + gap) - gap, H * (S + gap) - gap)
    np.testing.assert_allclose(z[:S, :S], out.attention.encoder_self[0, 0, :S, :S], atol=1e-5)


def test_switching_to_de_en_translates_the_same_example_in_german():
    if "de-en" not in MODELS:
        pytest.fail("pretrained/de-en is shipped and must be offered")
    from transformer import Translator
    at = started()
    english = at.text_area(key="text").value
    at.selectbox(key="model").set_value("de-en").run()
    check_clean(at, "de-en")
    german = at.text_area(key="text").value
    from atlas_ui.page.examples import examples_for
    from atlas_ui.server.settings import models_dir
    row = [r for r in examples_for(models_dir(), "de", "en") if r.get("en") == english][0]
    assert german == row["de"] != english
    out = Translator.load(MODELS["de-en"], device="cpu").translate(german)
    assert any(text.value == out.text for text in at.text)
    assert "de-en" in at.selectbox(key="model").value
    at.text_area(key="text").set_value("Ein Hund läuft.").run()           # typed text is kept as typed
    at.selectbox(key="model").set_value("en-de").run()
    assert at.text_area(key="text").value == "Ein Hund läuft."
