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


def test_thinning_keeps_the_marked_labels_and_spaces_the_rest():
    from viz._ticks import thinned_ticks
    assert thinned_ticks(list(range(10)), 3) == [0, 3, 6, 9]
    kept = thinned_ticks(list(range(21)), 2, kept=[7.0])
    assert 7 in kept and min(b - a for a, b in zip(kept, kept[1:])) >= 2 and len(kept) >= 10
    # two marked labels closer than the step: the first wins, the other would overlap it
    assert thinned_ticks(list(range(10)), 3, kept=[4, 5]) == [1, 4, 7]
    assert thinned_ticks([0, 1], 1, kept=[1]) == [0, 1]


def test_the_bright_cell_of_a_one_step_map_keeps_its_label_in_presenter_type():
    """Decoding steps in presenter mode: 21 keys in a 40% column are thinned to every k-th label;
    the bright cell's column (one that plain every-k-th thinning dropped) keeps its piece."""
    from viz import keep_peak_labels
    keys = pieces(21)
    row = np.full((1, 21), 0.01)
    row[0, 4] = 0.8
    plain = presenter_figure(attention_heatmap(row, ["step 4 → ▁w"], keys, "t", width=440), max_height=220)
    assert "▁w4" not in plain.layout.xaxis.ticktext, "the test needs a map whose thinning drops the cell"
    marked = presenter_figure(keep_peak_labels(attention_heatmap(row, ["step 4 → ▁w"], keys, "t", width=440)),
                              max_height=220)
    x = marked.layout.xaxis
    assert "▁w4" in x.ticktext and x.tickvals[list(x.ticktext).index("▁w4")] == 4
    assert len(x.ticktext) >= len(plain.layout.xaxis.ticktext) - 1            # still every k-th elsewhere
    assert axis_pitch(marked, "xaxis", x) >= axis_pitch(plain, "xaxis", plain.layout.xaxis) - 1e-6


def test_the_logit_lens_framed_cell_keeps_its_step_and_site_labels_when_thinned():
    from viz.lens import logit_lens_figure
    from viz.phone import phone_figure
    T, sites = 20, ["L0.self", "L0.cross", "L0.ffn", "L1.self", "L1.cross", "L1.ffn"]
    prob = np.full((T, len(sites)), 0.5)
    top = [[["▁x"] for _ in sites] for _ in range(T)]
    for step in range(T):
        fig = phone_figure(logit_lens_figure(prob, top, np.full((T, len(sites), 1), 0.5), pieces(T), sites,
                                             "t", selected=(2, step)))
        x = fig.layout.xaxis
        assert len(x.ticktext) < T and f"▁w{step}" in x.ticktext, (step, x.ticktext)


def test_a_grid_of_maps_keeps_the_same_labels_in_every_tile_when_thinned():
    """The Layer grid repeats its pieces tile after tile: thinned as one long axis, each tile row and
    column kept a different every-k-th piece (a reader saw other words beside each row of heads)."""
    from viz import head_grid_figure, phone_figure
    from viz._ticks import thinned_tile_ticks
    queries, keys = [f"▁q{i}" for i in range(20)], [f"▁k{i}" for i in range(18)]
    grid = head_grid_figure(np.full((8, 20, 18), 1 / 18), queries, keys, "Layer 1", layer=1)
    for small in (presenter_figure(grid), phone_figure(grid)):
        for name, pieces, tiles in (("yaxis", queries, 2), ("xaxis", keys, 4)):
            labels = list(small.layout[name].ticktext)
            assert len(labels) < len(pieces) * tiles, "thinned"
            first = labels[: len(labels) // tiles]
            assert labels == first * tiles and first[0] == pieces[0] and set(first) < set(pieces)
            # a tile's last label stands as far from the next tile's first as labels within a tile
            values = sorted(small.layout[name].tickvals)
            assert min(b - a for a, b in zip(values, values[1:])) >= values[1] - values[0]
    # the same positions in each tile; the last goes where it would crowd the next tile's first
    assert thinned_tile_ticks([0, 1, 2, 3, 5, 6, 7, 8], 2, 5) == [0, 2, 4, 6]
    assert thinned_tile_ticks(list(range(10)), 2, 5) == [0, 2, 5, 7]                  # 4 stood next to 5
    assert thinned_tile_ticks([0, 1, 2, 3, 4, 6, 7, 8, 9, 10], 2, 6) == [0, 2, 4, 5, 7, 9]   # 4 and 6: 2 apart
    assert thinned_tile_ticks([0, 1, 2, 3, 4], 2, 6) == [0, 2, 4]          # one tile: nothing next to it
    assert thinned_tile_ticks([0, 1, 2, 3, 4, 6, 7, 8, 9, 10], 2, 6, keep_last=False) == [0, 2, 5, 7]  # rows
