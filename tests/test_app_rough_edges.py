"""AppTest: the rough edges of issue 52's walk that need no browser (layout ones are in
tests/test_browser_rough_edges.py)."""
from __future__ import annotations

from test_app import opened_link as opened

ENGLISH = "The committee postponed the decision about the budget until next year."   # p 0.25 in de-en


def test_english_typed_into_de_en_gets_notes_that_agree():
    """The yellow box offers en-de (reads English); the blue note names the hub model that reads
    English the same way round, not de-en's own direction."""
    at = opened(model="de-en", sentence=ENGLISH, view="Heatmap")
    assert at.button(key="language_switch").label == "Open en-de (reads English)"
    notes = [info.value for info in at.info if "mean probability" in info.value]
    assert notes and "Helsinki-NLP/opus-mt-en-de" in notes[0] and "opus-mt-de-en" not in notes[0], notes


def test_the_hub_id_placeholder_names_the_open_models_direction(monkeypatch):
    monkeypatch.setenv("ATLAS_HUB", "any")
    for model, hint in (("de-en", "Helsinki-NLP/opus-mt-de-en"), ("en-de", "Helsinki-NLP/opus-mt-en-de")):
        at = opened(model=model, sentence="Ein Hund rennt." if model == "de-en" else "A dog runs.")
        assert at.text_input(key="hub_id").placeholder == hint, model


# ---- one numbering: what a person reads counts from 1, said once in the translation's legend ---------
SENTENCE = "A man in a blue shirt is riding a bike down the street."


def test_the_translation_legend_says_what_counts_from_1():
    from atlas_ui.page.translation import NUMBERING
    at = opened(model="en-de", sentence=SENTENCE, view="Heatmap")
    helps = [md.help for md in at.main.markdown if md.help]
    assert sum(NUMBERING in help for help in helps) == 1, helps
    assert "count from 1" in NUMBERING


def test_heatmap_hover_counts_queries_and_keys_from_1_and_old_links_still_open():
    import json
    import numpy as np
    from transformer import Translator
    out = Translator.load("pretrained/en-de").translate(SENTENCE)
    at = opened(model="en-de", sentence=SENTENCE, view="Heatmap", kind="cross", layer="1", head="2")
    (heat,) = [trace for chart in at.get("plotly_chart") for trace in json.loads(chart.proto.spec)["data"]
               if trace["type"] == "heatmap"][:1]
    cd = np.asarray(heat["customdata"], dtype=object)
    assert cd[0, 0, 0].startswith("1 ") and cd[4, 0, 0].startswith("5 "), cd[:, 0, 0]     # Query 5 = fifth piece
    assert cd[0, -1, 1].startswith(f"{len(out.source_tokens)} ")
    assert "Query %{customdata[0]}" in heat["hovertemplate"]
    assert at.selectbox(key="layer").value == 1 and at.selectbox(key="head").value == 2   # the link's values hold


def test_lens_ranks_count_from_1():
    """The top piece is rank 1 in the hover and the cell's heading: the second-best is rank 2."""
    import json
    from transformer import Translator
    out = Translator.load("pretrained/en-de").translate(SENTENCE, lens=True, top_k=5)
    at = opened(model="en-de", sentence=SENTENCE, view="Logit lens", lens_site="5", step_no="1")
    site, step = 5, 0
    rank = int(out.lens.chosen_rank[step, site])
    assert any(f"rank {rank + 1}" in md.value for md in at.main.markdown if md.value.startswith("Step 1 "))
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    hovers = [h for trace in spec["data"] if trace.get("name") == "cells" for h in trace["hovertext"]]
    assert hovers and not any("rank 0" in h for h in hovers), "no rank 0: the top piece is rank 1"
    assert any("rank 1" in h for h in hovers)
