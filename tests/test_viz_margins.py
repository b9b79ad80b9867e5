"""Margins that already hold a labelled matrix's labels (viz._base.matrix_margins): plotly.js draws
a figure twice when automargin finds the margins too small. The browser check that plotly.js
agrees is tests/test_browser_features.py::test_every_view_link_shows_its_picture_first_drawn_in_one_pass."""
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


def test_the_row_title_stands_beyond_the_widest_row_label():
    """A heatmap's y title has a standoff, so plotly.js draws it that far beyond the axis's widest
    tick label; without one it sat a fixed 38 px from the axis and stepped aside only for the labels
    level with it ("▁klettert" a row above ran into "Query": the README tour's Heatmap at 1280x720).
    The left margin grows with the widest row label and holds it, the standoff and the title, in
    presenter type too."""
    keys = ["▁A", "▁little", "▁girl", "</s>"]
    beyond = []
    for rows in (["▁Ein", "▁die", "</s>"], ["▁Ein", "▁klettert", "▁die", "</s>"],
                 ["▁Ein", "▁Schneemobilfahrerinnen", "▁die", "</s>"]):
        fig = attention_heatmap(np.full((len(rows), len(keys)), 0.25), rows, keys, "t")
        for figure, title_size in ((fig, 14), (presenter_figure(fig), 18)):
            axis, margin = figure.layout.yaxis, figure.layout.margin
            widest = max(text_width(label, axis.tickfont.size) for label in axis.ticktext)
            assert axis.title.text == "Query" and axis.title.standoff >= 8
            assert margin.l >= widest + axis.title.standoff + title_size
        axis = fig.layout.yaxis
        beyond.append(fig.layout.margin.l - max(text_width(label, axis.tickfont.size) for label in axis.ticktext))
    assert max(beyond) - min(beyond) <= 1                          # the margin grows one for one with it


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


def test_x_labels_are_given_the_room_of_the_angle_plotly_will_draw_them_at():
    """token_axis's autotickangles [0, 90]: side by side when they fit, else upright (never tilted
    30 degrees, where a long label's end ran over its neighbour); a narrower column can only need more room."""
    from viz._base import UPRIGHT_OR_LEVEL, token_axis, x_label_room
    labels = [f"▁word{i}" for i in range(17)]
    flat, close, closer = (x_label_room(labels, 11, width) for width in (2000, 500, 150))
    widest = max(text_width(label, 11) for label in labels)
    assert flat == 1.3 * 11 and close == closer == widest
    assert token_axis(labels, "Key")["autotickangles"] == UPRIGHT_OR_LEVEL == [0, 90]
    bar = {"title": {"text": "weight"}}
    wide = matrix_margins(None, labels[:12], y_size=11, x_size=11, colorbar=bar, top=30)
    narrow = matrix_margins(None, labels[:12], y_size=11, x_size=11, colorbar=bar, top=30, width=362)
    assert narrow["b"] > wide["b"] and narrow["l"] == wide["l"] and narrow["r"] == wide["r"]


def test_a_column_figure_keeps_its_width_for_presenter_mode():
    tokens = [f"▁word{i}" for i in range(12)]
    main = attention_heatmap(np.full((12, 12), 1 / 12), tokens, tokens, "t")
    side = attention_heatmap(np.full((12, 12), 1 / 12), tokens, tokens, "t", width=362)
    assert side.layout.meta == {"width": 362} and main.layout.meta is None
    assert side.layout.margin.b > main.layout.margin.b          # upright in the column, level in the main one
    # presenter type fits the column's labels: smaller, and upright where they cannot stand side by side
    big_side, big_main = presenter_figure(side).layout.xaxis, presenter_figure(main).layout.xaxis
    assert big_side.tickfont.size < big_main.tickfont.size and big_side.tickangle == 90


def test_unlabelled_axes_get_room_for_their_numbers():
    from viz import position_similarity_figure
    fig = position_similarity_figure(np.random.default_rng(0).normal(size=(64, 16)), None, "t")
    assert fig.layout.margin.l >= 42 + text_width("63", 12)


def test_every_figure_with_labels_outside_brings_their_room_and_presenter_mode_grows_it():
    """Bars, the beam lattice, the strips and side-by-side maps: margins beyond 10 px on the sides
    their labels and colour bars sit (were 10 px: each drawn twice), scaled up with the type."""
    from viz import contribution_figure, source_share_figure, swap_map_figure, swap_pieces_figure
    from viz.ablation import probability_change_figure
    from viz.beam import beam_tree_figure
    from viz.diagnosis import diagnosis_figure
    out, src = ["▁Ein", "▁Hund", "</s>"], ["▁A", "▁dog", "</s>"]
    figures = {
        "source share": (source_share_figure([0.9, 0.6, 0.3], out), "lb"),
        "contributions": (contribution_figure(np.full((3, 3), 0.2), np.full((3, 3), 0.1), out, src,
                                              ["<s>", "▁Ein", "▁Hund"]), "lrb"),
        "ablation": (probability_change_figure(out, [0.9, 0.8, 0.7], [0.5, 0.8, 0.9]), "lb"),
        "diagnosis": (diagnosis_figure([0.1, 0.7, 0.0], out, [0.2, 0.9, 0.0], src), "lb"),
        "swap maps": (swap_map_figure(np.full((3, 3), 0.3), np.full((3, 3), 0.3), out, out, src,
                                      ["▁A", "▁cat", "</s>"]), "lrb"),
        "swap strips": (swap_pieces_figure(src, ["▁A", "▁cat", "</s>"], out, ["▁Eine", "▁Katze", "</s>"],
                                           [0.9, 0.8, 0.9], [0.9, 0.5, 0.9]), "lr"),
    }
    steps = [[(["▁Ein"], -0.1, None, False), (["▁Eine"], -2.0, None, False)],
             [(["▁Ein", "▁Hund"], -0.2, 0, False), (["▁Eine", "▁Katze"], -2.5, 1, False)]]
    figures["beam"] = (beam_tree_figure(steps, (1, 0)), "lrb")
    for name, (fig, sides) in figures.items():
        margin, big = fig.layout.margin, presenter_figure(fig).layout.margin
        for side in sides:
            assert getattr(margin, side) > 24, (name, side, getattr(margin, side))
            assert getattr(big, side) > getattr(margin, side), (name, side)


def test_the_candidates_note_is_a_second_escaped_line_with_its_own_room():
    """Presenter mode says what was chosen under the title, not after it: one long line was cut
    off in the narrow column of Decoding steps."""
    from viz import topk_bar_figure
    plain = topk_bar_figure([("▁a", 0.6), ("<b>", 0.4)], chosen="▁a", title="Top 2 candidates at step 1")
    noted = topk_bar_figure([("▁a", 0.6), ("<b>", 0.4)], chosen="▁a", title="Top 2 candidates at step 1",
                            note="chose <b> (p = 0.400)")
    assert noted.layout.title.text == "Top 2 candidates at step 1<br><sup>chose &lt;b&gt; (p = 0.400)</sup>"
    assert noted.layout.margin.t > plain.layout.margin.t
