"""Presenter type that fits the slide (viz.presenter_figure): each axis's labels as large as their
spacing allows and never under 12 px, a map taller only up to what the slide has, every k-th label
past that, colour bars long enough for their numbers; masks without their colour bar. The browser
check of the same is tests/test_browser_room.py."""
from __future__ import annotations

import numpy as np

from viz import attention_heatmap, mask_figure, presenter_figure
from viz.export import LABEL_PITCH, MIN_TICK, axis_pitch


def pieces(n: int) -> list[str]:
    return [f"▁w{i}" for i in range(n)]


def test_a_short_sentence_keeps_the_largest_type():
    fig = presenter_figure(attention_heatmap(np.full((8, 8), 1 / 8), pieces(8), pieces(8), "t"), max_height=480)
    assert fig.layout.yaxis.tickfont.size == 16 and len(fig.layout.yaxis.ticktext) == 8


def test_many_rows_get_smaller_type_then_a_taller_map_then_every_kth_label():
    rows = 20
    fig = presenter_figure(attention_heatmap(np.full((rows, 9), 1 / 9), pieces(rows), pieces(9), "t",
                                             height=394), max_height=480)     # heat_height(20)
    y = fig.layout.yaxis
    assert MIN_TICK <= y.tickfont.size < 16 and len(y.ticktext) == rows     # every row still named
    assert 394 < fig.layout.height <= 480                                   # grew, within the slide
    assert axis_pitch(fig, "yaxis", y) >= LABEL_PITCH * y.tickfont.size - 1e-6
    dense = presenter_figure(attention_heatmap(np.full((60, 9), 1 / 9), pieces(60), pieces(9), "t"), max_height=480)
    y = dense.layout.yaxis
    assert dense.layout.height <= 480 and y.tickfont.size >= MIN_TICK
    assert len(y.ticktext) < 60 and list(y.ticktext) == pieces(60)[::60 // len(y.ticktext) + (60 % len(y.ticktext) > 0)]
    assert axis_pitch(dense, "yaxis", y) >= LABEL_PITCH * MIN_TICK - 1e-6


def test_x_labels_too_close_to_tilt_stand_upright():
    fig = attention_heatmap(np.full((4, 30), 1 / 30), pieces(4), [f"▁Wort{i}" for i in range(30)], "t", width=362)
    x = presenter_figure(fig, max_height=480).layout.xaxis
    assert x.tickangle == 90 and x.tickfont.size >= MIN_TICK


def test_a_one_row_map_grows_until_its_colour_bar_holds_its_numbers():
    fig = presenter_figure(attention_heatmap(np.full((1, 6), 1 / 6), ["▁a"], pieces(6), "t", height=120),
                           max_height=480)
    margin = fig.layout.margin
    assert fig.layout.height - margin.t - margin.b >= 3 * LABEL_PITCH * 14


def test_a_mask_without_its_legend_gives_the_room_to_the_cells():
    tokens = pieces(12)
    mask = np.tril(np.ones((12, 12), dtype=bool))
    with_legend = mask_figure(mask, tokens, tokens, "m", width=362)
    without = mask_figure(mask, tokens, tokens, "m", width=362, legend=False, height=300)
    assert without.data[0].showscale is False and with_legend.data[0].showscale is not False
    assert without.layout.margin.r < with_legend.layout.margin.r and without.layout.height == 300


def test_a_long_beam_trees_pieces_go_where_they_would_run_into_each_other():
    from viz.beam import beam_tree_figure
    def tree(steps):
        return beam_tree_figure([[([f"▁schwarzen{t}{i}"] * (t + 1), -0.1 * (t + i), i if t else None, False)
                                  for i in range(4)] for t in range(steps)], final=(steps - 1, 0))
    long, short = presenter_figure(tree(22), max_height=480), presenter_figure(tree(3), max_height=480)
    assert "text" not in long.data[-1].mode and "text" in short.data[-1].mode
    assert len(long.data[-1].hovertext) == 22 * 4                       # a hover still names each node
