"""A phone's copy of a figure (viz.phone_figure): the same numbers, no colour bar, a title that fits,
tick labels far enough apart, cell text only where it fits, and a grid of square maps no taller than
its cells need. The browser check of the same is tests/test_browser_room.py."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz import attention_heatmap, head_grid_figure, phone_figure, PHONE_WIDTH
from viz.beam import beam_tree_figure
from viz.compare import swap_map_figure
from viz.export import LABEL_PITCH, axis_pitch, presenter_figure, unit_px
from viz.lens import logit_lens_figure
from viz._base import text_width
from viz.phone import PHONE_GROWTH, PHONE_MIN_TICK, PHONE_TITLE, TITLE_LINE, wrap_title

TITLE = "Cross-attention · layer 1 · head 7, the one the model aligns words with"


def pieces(n: int, stem: str = "▁Wort") -> list[str]:
    return [f"{stem}{i}" for i in range(n)]


def heatmap(rows: int = 22, cols: int = 20, seed: int = 0):
    weights = np.random.default_rng(seed).random((rows, cols))
    return attention_heatmap(weights / weights.sum(1, keepdims=True), pieces(rows), pieces(cols), TITLE)


def test_the_numbers_stay_and_the_original_is_not_changed():
    fig = heatmap()
    before = fig.to_plotly_json()
    small = phone_figure(fig)
    assert fig.to_plotly_json() == before                                   # a copy
    assert np.array_equal(np.asarray(small.data[0].z), np.asarray(fig.data[0].z))
    assert small.data[0].hovertemplate == fig.data[0].hovertemplate        # a tap still names the cell
    assert small.layout.meta["width"] == PHONE_WIDTH


def test_the_colour_bar_goes_and_its_room_with_it():
    fig, small = heatmap(), phone_figure(heatmap())
    assert fig.data[0].showscale is not False and small.data[0].showscale is False
    assert small.layout.margin.r < 40 < fig.layout.margin.r


def test_each_title_line_fits_the_phone_and_the_plot_moves_down_for_it():
    fig, small = heatmap(), phone_figure(heatmap())
    lines = small.layout.title.text.split("<br>")
    assert len(lines) >= 2 and " ".join(lines) == TITLE
    assert all(text_width(line, PHONE_TITLE) <= PHONE_WIDTH - 16 for line in lines)
    assert small.layout.title.yanchor == "top"
    # the plot starts under the title's last line, with no band of the desktop's margin left over
    title_block = round(14 + len(lines) * TITLE_LINE * PHONE_TITLE + 6)
    assert small.layout.margin.t == title_block
    assert small.layout.height - small.layout.margin.t == fig.layout.height - fig.layout.margin.t


def test_what_sits_above_the_plot_keeps_its_room_under_a_wrapped_title():
    """The names over a grid's top maps, a legend over the plot: the margin grows by the title's added
    lines instead of shrinking to the title (the names sat on the title)."""
    long = "Cross-attention · layer 1 · all heads, as the model computed them"
    grid = head_grid_figure(np.full((8, 7, 9), 1 / 9), pieces(7), pieces(9), long)
    legend = go.Figure(go.Bar(x=[1, 2], y=[3, 4], name="original"),
                       layout=dict(title=long, height=300, margin=dict(t=80), showlegend=True,
                                   legend=dict(orientation="h", y=1.1)))
    for fig in (grid, legend):
        small = phone_figure(fig)
        added = len(small.layout.title.text.split("<br>")) - 1
        assert added >= 1 and small.layout.margin.t >= fig.layout.margin.t + added * PHONE_TITLE


def test_wrap_title_keeps_a_notes_tags_on_each_of_its_lines():
    text, added = wrap_title("Short<br><sup>a small note that is much too long for the phone's width</sup>", 150, 14)
    lines = text.split("<br>")
    assert lines[0] == "Short" and added == len(lines) - 2 >= 1
    assert all(line.startswith("<sup>") and line.endswith("</sup>") for line in lines[1:])
    assert wrap_title("fits", 300, 14) == ("fits", 0)


def test_tick_labels_are_far_enough_apart_to_read_and_every_kth_stays():
    small = phone_figure(heatmap(40, 30))
    for name in ("xaxis", "yaxis"):
        axis = small.layout[name]
        assert axis.tickfont.size >= PHONE_MIN_TICK
        assert axis_pitch(small, name, axis) >= LABEL_PITCH * axis.tickfont.size - 1e-6
    x = small.layout.xaxis
    assert len(x.ticktext) < 30 and list(x.ticktext) == pieces(30)[::30 // len(x.ticktext) + (30 % len(x.ticktext) > 0)]
    fig = heatmap(40, 30)
    title_room = small.layout.margin.t - fig.layout.margin.t
    assert small.layout.height <= round(fig.layout.height * PHONE_GROWTH) + title_room + 1


def test_cell_text_is_dropped_where_a_cell_cannot_hold_it():
    rng = np.random.default_rng(1)
    steps, sites, k = 22, 6, 3
    prob = rng.random((steps, sites)).astype(np.float32)
    top = [[[f"▁p{t}{j}_{i}" for i in range(k)] for j in range(sites)] for t in range(steps)]
    top_probs = np.sort(rng.random((steps, sites, k)), axis=-1)[..., ::-1].astype(np.float32)
    names = [f"L{i // 3}.{('self', 'cross', 'ffn')[i % 3]}" for i in range(sites)]
    fig = logit_lens_figure(prob, top, top_probs, pieces(steps, "▁o"), names, "Lens")
    assert fig.data[0].texttemplate
    small = phone_figure(fig)
    assert not small.data[0].texttemplate                                   # 22 columns in ~200 px
    # the axis ends at the outer cells: autorange grew it by half of each click marker's px, which on a
    # phone's ~150 px plot put labels closer than they were counted
    assert list(small.layout.xaxis.range) == [-0.5, steps - 0.5]
    x = small.layout.xaxis
    assert axis_pitch(small, "xaxis", x) >= LABEL_PITCH * x.tickfont.size - 1e-6
    few = logit_lens_figure(prob[:3], top[:3], top_probs[:3], pieces(3, "▁o"), names, "Lens")
    assert phone_figure(few).data[0].texttemplate == few.data[0].texttemplate


def test_a_big_beam_trees_node_labels_go_and_its_nodes_stay():
    history = [[([f"▁w{t}{i}"] * (t + 1), -0.1 * (t + i), i if t else None, False) for i in range(4)]
               for t in range(12)]
    fig = beam_tree_figure(history, final=(11, 0))
    nodes = phone_figure(fig).data[-1]
    assert "text" in fig.data[-1].mode and "text" not in nodes.mode
    assert np.array_equal(np.asarray(nodes.customdata), np.asarray(fig.data[-1].customdata))   # a tap still opens a node


def test_a_grid_of_square_maps_is_no_taller_than_its_cells():
    weights = np.random.default_rng(2).random((8, 12, 12))
    fig = head_grid_figure(weights / weights.sum(-1, keepdims=True), pieces(12), pieces(12), "Grid", layer=0)
    small = phone_figure(fig)
    assert small.layout.height < fig.layout.height
    size = (PHONE_WIDTH - small.layout.margin.l - small.layout.margin.r,
            small.layout.height - small.layout.margin.t - small.layout.margin.b)
    across = unit_px(small, "xaxis", small.layout.xaxis, size)
    down = unit_px(small, "yaxis", small.layout.yaxis, size)
    assert down <= across * 1.05                                           # no blank band left


def test_compare_puts_the_edited_maps_rows_on_its_right_before_the_colour_bar():
    rng = np.random.default_rng(3)
    out_a, out_b = pieces(6, "▁Fußballspieler"), pieces(6, "▁Fußballspieler")
    src = pieces(5, "▁w")
    fig = swap_map_figure(rng.random((6, 5)), rng.random((6, 5)), out_a, out_b, src, src)
    right = fig.layout.yaxis2
    room = max(text_width(t, right.tickfont.size) for t in right.ticktext)
    assert right.side == "right" and fig.data[1].colorbar.xpad >= room
    assert fig.layout.margin.r >= room + (fig.data[1].colorbar.thickness or 30)   # labels, then the bar
    big = presenter_figure(fig, max_height=480)
    assert big.layout.margin.r > fig.layout.margin.r                        # larger type, more room
    assert big.data[1].colorbar.xpad > fig.data[1].colorbar.xpad
    small = phone_figure(fig)
    assert small.data[1].showscale is False and room <= small.layout.margin.r < fig.layout.margin.r


def test_upright_labels_get_their_room_where_plotly_may_not_grow_the_margin():
    """The Overview keeps its own margins (automargin off): set upright on a phone, "Head 3" ran into
    the "Key" title under it."""
    from viz import overview_figure
    from viz._base import text_width, title_room
    small = phone_figure(overview_figure(np.full((3, 8, 17, 21), 1 / 21), pieces(17, "▁q"), pieces(21, "▁k"), "t"))
    x = small.layout.xaxis
    assert x.tickangle == 90 and not x.automargin
    widest = max(text_width(label, x.tickfont.size) for label in x.ticktext)
    assert small.layout.margin.b >= widest + title_room() - 1
