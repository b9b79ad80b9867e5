"""Margins that already hold a labelled matrix's labels (viz._base.matrix_margins): plotly.js draws
a figure twice when automargin finds the margins too small. The browser check that plotly.js
agrees is tests/test_browser_features.py::test_the_main_chart_is_drawn_in_one_pass."""
from __future__ import annotations

import numpy as np

from viz import attention_heatmap, presenter_figure
from viz._base import matrix_margins, text_width


def test_wide_characters_and_entities_are_measured_as_drawn():
    assert text_width("東京", 10) > text_width("ab", 10) > 0
    assert text_width("&lt;/s&gt;", 10) == text_width("</s>", 10)      # escaped labels are drawn unescaped


def test_margins_grow_with_the_longest_label_and_the_colour_bar_title():
    bar = {"title": {"text": "weight"}}
    short = matrix_margins(["▁a", "▁b"], ["▁c"], y_size=11, x_size=11, colorbar=bar, top=60)
    long = matrix_margins(["▁a", "▁Schneemobilfahrerinnen"], ["▁c"], y_size=11, x_size=11, colorbar=bar, top=60)
    assert long["l"] - short["l"] >= 20 * 11 * 0.45 and long["b"] == short["b"] and short["t"] == 60
    titled = matrix_margins(["▁a"], ["▁c"], y_size=11, x_size=11,
                            colorbar={"title": {"text": "weight (rescaled)"}}, top=60)
    assert titled["r"] > short["r"]
    words = matrix_margins(["▁a"], ["▁c"], y_size=11, x_size=11,
                           colorbar={"ticktext": ["masked", "may attend"]}, top=60)
    assert words["r"] > short["r"]


def test_x_labels_get_upright_room_only_when_they_cannot_sit_side_by_side():
    bar = {}
    few = matrix_margins(None, ["▁dogs", "▁play"], y_size=11, x_size=11, colorbar=bar, top=30)
    many = matrix_margins(None, [f"▁word{i}" for i in range(40)], y_size=11, x_size=11, colorbar=bar, top=30)
    assert many["b"] > few["b"] and many["b"] >= text_width("▁word39", 11)


def test_the_heatmap_carries_its_margins_and_presenter_mode_grows_them():
    tokens = ["▁Two", "▁dogs", "▁play", "</s>"]
    fig = attention_heatmap(np.full((4, 4), 0.25), tokens, tokens, "t")
    margin = fig.layout.margin
    assert margin.l > 40 and margin.r > 60 and margin.b > 30      # were 10: every heatmap drawn twice
    big = presenter_figure(fig).layout.margin
    assert big.l > margin.l and big.b > margin.b and big.r >= margin.r
    assert fig.layout.margin.l == margin.l                         # the original is not changed


def test_the_candidates_bar_and_the_head_grid_bring_margins_for_their_labels():
    from viz import head_grid_figure, topk_bar_figure
    short = topk_bar_figure([("▁a", 0.6), ("▁b", 0.4)], chosen="▁a").layout.margin
    long = topk_bar_figure([("▁Schneemobilfahrerinnen", 0.6), ("▁b", 0.4)], chosen="▁b").layout.margin
    assert long.l > short.l > 10 and short.b > 30
    tokens = ["▁Two", "▁dogs", "▁play", "</s>"]
    grid = head_grid_figure(np.full((8, 4, 4), 0.25), tokens, tokens, layer=0)
    assert grid.layout.margin.l > 40 and grid.layout.margin.r > 60 and grid.layout.margin.b > 30
    # the tiles keep their height: the figure grows by what the margins take beyond the old 110 px
    assert grid.layout.height >= grid.layout.margin.t + grid.layout.margin.b + 120
