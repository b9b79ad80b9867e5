"""AppTest checks of the Logit lens view (issue 33): its share link opens it for the shipped en-de
model, the one sentence stands above the grid, the grid's cells and colours are the lens's, a link's
cell opens that cell's top-k, the DecoderLens table holds each encoder layer's translation, the
branch switch changes what it reads, and presenter mode draws it. Numbers are recomputed from the
Translator API."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from test_app import APP, MODELS, array, check_clean, escaped, opened_on_a_branch, specs
from atlas_ui.ui.common import STEP_SLIDE_HEIGHT, escape_md
from viz.lens import lens_sentence, site_label

EN = "A man in a blue shirt is riding a bike down the street."
VIEW = "Logit lens"
pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")


def opened(**params):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": "en-de", "view": VIEW, "sentence": EN, **params})
    at.run()
    check_clean(at, str(params))
    return at


def param(at, name):
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def grid(at) -> tuple[dict, dict]:
    """(layout, heatmap trace) of the lens grid, the view's one chart."""
    (spec,) = specs(at)
    heat = spec["data"][0]
    assert heat["type"] == "heatmap"
    return spec["layout"], heat


def in_order(node, out=None) -> list[tuple[str, str]]:
    """(element type, its value as text) of every element under `node`, in page order."""
    out = [] if out is None else out
    for child in getattr(node, "children", {}).values():
        out.append((child.type, str(getattr(child, "value", ""))))
        in_order(child, out)
    return out


def decoder_table(at):
    """The DecoderLens table, as a DataFrame."""
    return next(d.value for d in at.dataframe if "differs at" in list(getattr(d.value, "columns", [])))


def markdown(at) -> list[str]:
    return [m.value for m in at.main.markdown]


def check_grid(at, out) -> None:
    """The grid reads `out` (a translate(lens=True) of the pieces on screen): columns its pieces, rows
    its sites with the last on top, cells its whole top-1 pieces, colours p(chosen)."""
    layout, heat = grid(at)
    lens = out.lens
    assert layout["xaxis"]["ticktext"] == escaped(out.output_tokens)
    assert layout["yaxis"]["ticktext"] == [site_label(s) for s in lens.sites[::-1]]
    z = array(heat["z"])
    np.testing.assert_allclose(z, lens.chosen_prob.T[::-1], atol=1e-5)
    top1 = [[lens.top_k[t][j][0][0] for t in range(len(out.output_tokens))] for j in reversed(range(len(lens.sites)))]
    for row_shown, row_top in zip(heat["text"], top1):
        for shown, piece in zip(row_shown, row_top):
            shown = shown.replace("<br>", "")                # a long piece in two lines (viz._cell_text)
            piece = escaped([piece])[0]
            whole = piece[1:] if piece.startswith("▁") and not shown.startswith("▁") else piece   # ▁ goes first
            assert shown == whole, "the cells hold whole pieces"


def test_a_share_link_opens_the_view_with_its_sentence_grid_cell_and_decoder_lens(translator):
    out = translator.translate(EN, lens=True, top_k=5)
    at = opened()
    assert at.radio(key="view").value == VIEW
    sentence = lens_sentence(out.lens.chosen_rank, out.output_tokens, out.lens.sites)
    assert sentence.startswith(("Most pieces", "Every piece"))
    shown = markdown(at)
    assert "**" + escape_md(sentence, 600) + "**" in shown
    # the sentence stands right above the chart
    page = in_order(at.main)
    chart = [kind for kind, _ in page].index("plotly_chart")
    assert page[chart - 1] == ("markdown", "**" + escape_md(sentence, 600) + "**")
    check_grid(at, out)
    assert param(at, "view") == VIEW
    # the DecoderLens table: each encoder layer's own translation, the last one the model's
    decoder = decoder_table(at)
    layers = translator.config.n_encoder_layers
    assert len(decoder) == layers
    for k in range(layers):
        run = translator.translate(EN, encoder_layer=k, capture=False, top_k=0)
        row = decoder.iloc[k]
        assert row["from"].startswith(f"encoder layer {k}")
        assert [row[str(t + 1)] for t in range(len(run.output_tokens))] == run.output_tokens
        assert all(row[str(t + 1)] in ("", None) for t in range(len(run.output_tokens), len(decoder.columns) - 3))
        assert row["total log p"] == pytest.approx(sum(np.log(s.prob) for s in run.steps), abs=0.006)
        differs = [t + 1 for t in range(max(len(run.output_tokens), len(out.output_tokens)))
                   if run.output_tokens[t:t + 1] != out.output_tokens[t:t + 1]]
        assert row["differs at"] == ", ".join(map(str, differs))
    assert decoder.iloc[-1]["from"].endswith("(the model)") and decoder.iloc[-1]["differs at"] == ""


def test_a_link_s_cell_opens_that_cell_s_top_k(translator):
    out = translator.translate(EN, lens=True, top_k=5)
    site, step = 4, 6                                      # layer 1 · cross-attn, step 7
    at = opened(lens_site=str(site), step_no=str(step + 1))
    heading = f"Step {step + 1} (chose {out.output_tokens[step]}), read after {site_label(out.lens.sites[site])}: " \
              f"p(chosen) = {out.lens.chosen_prob[step, site]:.3f}, rank {out.lens.chosen_rank[step, site] + 1}"   # read from 1
    assert escape_md(heading, 300) in markdown(at)
    cell = next(d.value for d in at.dataframe if "piece" in list(getattr(d.value, "columns", [])))
    assert list(cell["piece"]) == [p for p, _ in out.lens.top_k[step][site]]
    np.testing.assert_allclose(cell["p"], [q for _, q in out.lens.top_k[step][site]], atol=1e-5)
    assert list(cell["chosen"]) == ["✓" if p == out.output_tokens[step] else "" for p, _ in out.lens.top_k[step][site]]
    assert param(at, "lens_site") == str(site) and param(at, "step_no") == str(step + 1)
    # another view and back: the cell is kept
    at.radio(key="view").set_value("Heatmap").run()
    at.radio(key="view").set_value(VIEW).run()
    check_clean(at, "back to the lens")
    assert escape_md(heading, 300) in markdown(at)


def test_the_branch_switch_changes_what_the_lens_reads(translator):
    at, _, prefix, branch = opened_on_a_branch(translator, EN, opened)
    check_grid(at, translator.translate(EN, target=branch.output_tokens, lens=True, top_k=5))
    decoder = decoder_table(at)
    assert all([decoder.iloc[k]["1"], decoder.iloc[k]["2"]] == prefix for k in range(len(decoder)))   # after the forced pieces
    # the switch back to the original: the grid reads the original's pieces
    at.radio(key="branch_view").set_value("Original").run()
    check_clean(at, "original")
    check_grid(at, translator.translate(EN, lens=True, top_k=5))
    assert param(at, "whatif") == "original"


def test_presenter_mode_draws_the_grid_for_the_room(translator):
    at = opened(present="1")
    assert at.selectbox(key="view").value == VIEW          # the presenter's bar holds the picker
    out = translator.translate(EN, lens=True, top_k=5)
    sentence = lens_sentence(out.lens.chosen_rank, out.output_tokens, out.lens.sites)
    assert "**" + escape_md(sentence, 600) + "**" in markdown(at)
    layout, heat = grid(at)
    assert layout["height"] <= STEP_SLIDE_HEIGHT           # under the sentence, inside a 720-px window
    # the cells' type as large as their whole pieces allow (two lines in a row's height), never cut
    assert 9 <= heat["textfont"]["size"] <= 14 and layout["xaxis"]["tickfont"]["size"] >= 12
    assert not any(text.endswith("…") for row in heat["text"] for text in row)
    assert param(at, "present") == "1" and param(at, "view") == VIEW
