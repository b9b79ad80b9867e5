"""Tests for the viz package: every builder checked through the figure it returns."""
from __future__ import annotations

import copy
import io
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # plain `pytest` puts tests/, not the repo, on the path
    sys.path.insert(0, str(ROOT))

import viz  # noqa: E402
from viz.ablation import probability_change_figure  # noqa: E402
from viz.beam import beam_tree_figure  # noqa: E402
from viz.importance import importance_figure, pruning_curve_figure  # noqa: E402
from viz.stats import layer_head_grid  # noqa: E402
from viz import (attention_heatmap, escape_label, batch_padding_figure, display_tokens,  # noqa: E402
                 embedding_figure, escape_html, head_grid_figure, head_statistics, is_special,
                 mask_figure, merge_attention, merge_pieces, overview_figure,
                 overview_selection, position_similarity_figure, positional_encoding_figure,
                 rollout, statistic_figure, statistic_maps_figure, token_probability_html, topk_bar_figure, word_spans)

SRC = ["▁A", "▁man", "▁a", "▁a", "</s>"]              # repeated ▁a must stay two columns
TGT = ["<s>", "▁Ein", "▁Mann", "</s>"]


def rows_dirichlet(shape, seed=0, dtype=np.float32):
    """Random attention: last axis sums to 1."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1]).astype(dtype)


def z_of(fig: go.Figure, trace: int = 0) -> np.ndarray:
    return np.asarray(fig.data[trace].z, dtype=float)


# --------------------------------------------------------------------------- import hygiene

def test_importing_viz_pulls_in_neither_streamlit_nor_torch():
    code = ("import sys, viz; bad = [m for m in ('torch', 'streamlit', 'transformer') "
            "if m in sys.modules]; assert not bad, bad")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- labels

def test_display_tokens_escape_html_and_show_space():
    assert display_tokens(["<s>", "</s>", "a&b", "▁x"]) == ["&lt;s&gt;", "&lt;/s&gt;", "a&amp;b", "▁x"]
    assert display_tokens(["▁x"], show_space=True) == ["␣x"]
    # quotes as numeric references, which plotly.js decodes (it does not know &quot;)
    assert display_tokens(['"', "'"]) == ["&#34;", "&#39;"]


def test_is_special():
    assert all(is_special(p) for p in ["<s>", "</s>", "<pad>", "<unk>"])
    assert not any(is_special(p) for p in ["▁s", "s", "<S>", "▁<s>"])


def test_escape_html_neutralises_markdown_and_tags():
    out = escape_html('<b>*x*</b> $y$ [l](u) "q"')
    for raw in "<>*$[]()\"":
        assert raw not in out
    assert "&lt;b&gt;" in out and "&quot;q&quot;" in out


# --------------------------------------------------------------------------- attention_heatmap

def test_heatmap_z_axes_and_ticks():
    w = rows_dirichlet((4, 5))
    fig = attention_heatmap(w, TGT, SRC, title="Cross")
    np.testing.assert_array_equal(z_of(fig), w)
    assert isinstance(fig.data[0], go.Heatmap)
    xa, ya = fig.layout.xaxis, fig.layout.yaxis
    assert ya.title.text == "Query" and xa.title.text == "Key"
    assert ya.autorange == "reversed" and xa.autorange != "reversed"
    assert xa.tickmode == "array" and ya.tickmode == "array"
    assert list(xa.tickvals) == [0, 1, 2, 3, 4] and list(ya.tickvals) == [0, 1, 2, 3]
    assert list(xa.ticktext) == ["▁A", "▁man", "▁a", "▁a", "&lt;/s&gt;"]
    assert list(ya.ticktext) == ["&lt;s&gt;", "▁Ein", "▁Mann", "&lt;/s&gt;"]
    assert xa.type != "category" and ya.type != "category"


def test_heatmap_colour_range_default_and_normalized():
    w = np.array([[0.2, 0.8], [0.4, 0.6]])
    fig = attention_heatmap(w, ["a", "b"], ["c", "d"])
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0, 1)
    reference = go.Heatmap(colorscale="Viridis").colorscale
    assert fig.data[0].colorscale == reference
    norm = attention_heatmap(w, ["a", "b"], ["c", "d"], normalize=True)
    np.testing.assert_array_equal(z_of(norm), w)            # z stays the raw weights
    assert norm.data[0].zmin == pytest.approx(0.2) and norm.data[0].zmax == pytest.approx(0.8)


def test_heatmap_custom_titles_colorscale_height():
    fig = attention_heatmap(np.eye(2), ["a", "b"], ["c", "d"], colorscale="Cividis",
                            query_title="Output", key_title="Input", height=444)
    assert fig.layout.yaxis.title.text == "Output" and fig.layout.xaxis.title.text == "Input"
    assert fig.layout.height == 444
    assert fig.data[0].colorscale == go.Heatmap(colorscale="Cividis").colorscale


def test_heatmap_hover_is_escaped_and_template_holds_no_tokens():
    fig = attention_heatmap(rows_dirichlet((4, 5)), TGT, SRC, title="<s> & co")
    trace = fig.data[0]
    cd = np.asarray(trace.customdata)
    assert cd.shape == (4, 5, 2)
    assert cd[0, 0, 0] == "1 &lt;s&gt;" and cd[3, 4, 1] == "5 &lt;/s&gt;"     # positions count from 1
    assert cd[1, 2, 1] == "3 ▁a" and cd[1, 3, 1] == "4 ▁a"
    assert "<s>" not in trace.hovertemplate and "▁" not in trace.hovertemplate
    assert "%{customdata[0]}" in trace.hovertemplate and "%{z" in trace.hovertemplate
    assert fig.layout.title.text == "&lt;s&gt; &amp; co"


def test_heatmap_show_space():
    fig = attention_heatmap(np.eye(2), ["▁a", "b"], ["▁c", "▁d"], show_space=True)
    assert list(fig.layout.xaxis.ticktext) == ["␣c", "␣d"]
    assert list(fig.layout.yaxis.ticktext) == ["␣a", "b"]


def test_heatmap_hide_special_drops_rows_and_columns():
    w = rows_dirichlet((4, 5))
    fig = attention_heatmap(w, TGT, SRC, title="x", hide_special=True)
    np.testing.assert_allclose(z_of(fig), w[1:3, :4])
    assert list(fig.layout.yaxis.ticktext) == ["▁Ein", "▁Mann"]
    assert list(fig.layout.xaxis.ticktext) == ["▁A", "▁man", "▁a", "▁a"]
    assert "may not sum to 1" in fig.layout.title.text
    cd = np.asarray(fig.data[0].customdata)
    assert cd[0, 0, 0] == "2 ▁Ein"                           # original position kept in hover, from 1
    plain = attention_heatmap(w, TGT, SRC, title="x")
    assert "may not sum" not in plain.layout.title.text


def test_heatmap_hide_special_everything_hidden_does_not_crash():
    fig = attention_heatmap(np.ones((1, 1)), ["</s>"], ["<s>"], hide_special=True)
    assert z_of(fig).size == 0


@pytest.mark.parametrize("weights, q, k", [
    (np.ones(5), TGT, SRC),                                   # 1-D
    (np.ones((2, 4, 5)), TGT, SRC),                           # 3-D
    (np.ones((5, 4)), TGT, SRC),                              # transposed
    (np.ones((4, 5)), TGT[:3], SRC),                          # too few query tokens
    (np.ones((4, 5)), TGT, SRC + ["x"]),                      # too many key tokens
    (np.array([[np.nan, 1.0]]), ["a"], ["b", "c"]),           # NaN
    (np.array([[np.inf, 1.0]]), ["a"], ["b", "c"]),           # inf
    (np.ones((2, 2)), "ab", ["b", "c"]),                      # a string, not a list
])
def test_heatmap_rejects_bad_input(weights, q, k):
    with pytest.raises(ValueError):
        attention_heatmap(weights, q, k)


# --------------------------------------------------------------------------- overview

def test_overview_tiles_gaps_and_axes():
    L, H, Q, K = 2, 3, 4, 5
    w = rows_dirichlet((L, H, Q, K), seed=1)
    fig = overview_figure(w, TGT, SRC, kind_label="Cross", gap=2)
    z = z_of(fig)
    assert z.shape == (L * (Q + 2) - 2, H * (K + 2) - 2)
    for l in range(L):
        for h in range(H):
            r, c = l * (Q + 2), h * (K + 2)
            np.testing.assert_array_equal(z[r:r + Q, c:c + K], w[l, h])
    assert np.isnan(z[Q:Q + 2, :]).all()                     # gap rows between layers
    assert np.isnan(z[:, K:K + 2]).all()                     # gap columns between heads
    assert np.isfinite(z).sum() == w.size
    heat = fig.data[0]              # hover: layer, head, positions, pieces, from a label per row and column
    assert heat.text is None and "%{y}<br>%{x}" in heat.hovertemplate
    assert heat.y[Q + 2 + 1] == f"Layer 1 · query 1: {escape_label(TGT[1])}"
    assert heat.x[2 * (K + 2) + 4] == f"head 2 · key 4: {escape_label(SRC[4])}"
    for l in range(L):              # every cell's labels name the tile and the positions whose weight z holds
        for q in range(Q):
            assert heat.y[l * (Q + 2) + q] == f"Layer {l} · query {q}: {escape_label(TGT[q])}"
    for h in range(H):
        for k in range(K):
            assert heat.x[h * (K + 2) + k] == f"head {h} · key {k}: {escape_label(SRC[k])}"
    assert len(set(heat.x)) == z.shape[1] and len(set(heat.y)) == z.shape[0]   # categories never merge
    assert heat.customdata is None, "no per-cell customdata: it slowed the draw by ~25%"
    # the labels' hidden category axes lie exactly over the ticked ones
    assert (heat.xaxis, heat.yaxis) == ("x2", "y2")
    x2, y2 = fig.layout.xaxis2, fig.layout.yaxis2
    assert (x2.type, x2.overlaying, x2.visible, y2.type, y2.overlaying, y2.visible) == (
        "category", "x", False, "category", "y", False)
    assert list(fig.layout.xaxis.range) == list(x2.range) == [-0.5, z.shape[1] - 0.5]
    assert list(fig.layout.yaxis.range) == list(y2.range) == [z.shape[0] - 0.5, -0.5]     # row 0 on top
    assert fig.layout.xaxis.autorange is False and fig.layout.yaxis.autorange is False
    assert fig.layout.yaxis.scaleanchor == "x" and y2.scaleanchor == "x2"
    # fixed margins: plotly.js would otherwise measure and draw everything twice
    assert fig.layout.xaxis.automargin is False and fig.layout.yaxis.automargin is False
    assert fig.layout.margin.autoexpand is False and fig.layout.margin.l >= 70
    # the ticks name layers and heads: the titles say what a tile's rows and columns are
    assert fig.layout.yaxis.title.text == "Query (in each tile)" and fig.layout.xaxis.title.text == "Key (in each tile)"
    assert list(fig.layout.yaxis.ticktext) == ["Layer 0", "Layer 1"]
    assert list(fig.layout.xaxis.ticktext) == ["Head 0", "Head 1", "Head 2"]
    assert list(fig.layout.xaxis.tickvals) == [2.0, 9.0, 16.0]   # tile centres
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0, 1)
    assert fig.data[0].hoverongaps is False


def test_overview_hover_text_escaped_and_dropped_when_large(monkeypatch):
    w = rows_dirichlet((1, 2, 4, 5))
    fig = overview_figure(w, TGT, SRC, gap=1)
    assert (fig.data[0].y[0], fig.data[0].x[4]) == ("Layer 0 · query 0: &lt;s&gt;", "head 0 · key 4: &lt;/s&gt;")
    assert fig.data[0].x[5] == "gap 5"                        # gap column: NaN, so no hover (hoverongaps)
    assert "%{y}<br>%{x}" in fig.data[0].hovertemplate
    monkeypatch.setattr(viz.overview, "HOVER_TEXT_CELLS", 10)
    big = overview_figure(w, TGT, SRC, gap=1)
    assert big.data[0].text is None and "%{y}" not in big.data[0].hovertemplate
    assert big.data[0].x is None and "xaxis2" not in big.layout
    assert "%{z:.4f}" in big.data[0].hovertemplate           # the weight is still in the hover
    assert "head" in big.data[1].hovertemplate               # and the tile centres name the head


def test_overview_heads_down_puts_heads_in_rows_and_layers_in_columns():
    """A phone's Overview (heads_down): 3 tiles across instead of 8; every part moves with the tiles."""
    L, H, Q, K, gap = 2, 3, 4, 5, 1
    w = rows_dirichlet((L, H, Q, K), seed=7)
    fig = overview_figure(w, TGT, SRC, gap=gap, heads_down=True, marked=[(1, 2)])
    z, heat, sq, sk = z_of(fig), fig.data[0], Q + gap, K + gap
    assert z.shape == (H * sq - gap, L * sk - gap)
    for l in range(L):
        for h in range(H):
            np.testing.assert_array_equal(z[h * sq:h * sq + Q, l * sk:l * sk + K], w[l, h])
            assert heat.y[h * sq] == f"head {h} · query 0: {escape_label(TGT[0])}"
            assert heat.x[l * sk + 1] == f"Layer {l} · key 1: {escape_label(SRC[1])}"
    assert list(fig.layout.yaxis.ticktext) == ["Head 0", "Head 1", "Head 2"]
    assert list(fig.layout.xaxis.ticktext) == ["Layer 0", "Layer 1"]
    marks = fig.data[1]
    assert np.asarray(marks.customdata).tolist() == [[l, h] for l in range(L) for h in range(H)]   # as ever
    for (layer, head), x, y in zip(np.asarray(marks.customdata).tolist(), marks.x, marks.y):
        assert (x, y) == (layer * sk + (K - 1) / 2, head * sq + (Q - 1) / 2)     # on its own tile
    outline = fig.layout.shapes[0]
    assert (outline.x0, outline.y0) == (1 * sk - 0.5, 2 * sq - 0.5)              # layer 1's column, head 2's row


def test_overview_markers_sit_on_tile_centres():
    L, H, Q, K = 2, 3, 4, 5
    fig = overview_figure(rows_dirichlet((L, H, Q, K)), TGT, SRC, gap=1)
    marks = fig.data[1]
    assert isinstance(marks, go.Scatter) and len(marks.x) == L * H
    cd = np.asarray(marks.customdata)
    assert cd.tolist() == [[l, h] for l in range(L) for h in range(H)]
    for (l, h), x, y in zip(cd, marks.x, marks.y):
        assert l * (Q + 1) <= y <= l * (Q + 1) + Q - 1
        assert h * (K + 1) <= x <= h * (K + 1) + K - 1
    assert marks.marker.opacity < 0.05


def test_overview_normalize_scales_each_tile_to_its_max():
    w = rows_dirichlet((2, 2, 4, 5), seed=3)
    fig = overview_figure(w, TGT, SRC, normalize=True, gap=1)
    z, cd = z_of(fig), np.asarray(fig.data[0].customdata, dtype=float)
    np.testing.assert_allclose(np.nanmax(z[:4, :5]), 1.0)
    np.testing.assert_allclose(z[:4, :5], w[0, 0] / w[0, 0].max(), rtol=1e-6)
    np.testing.assert_allclose(cd[:4, :5], w[0, 0], rtol=1e-6)      # raw weight for hover
    assert "%{customdata:.4f}" in fig.data[0].hovertemplate


def test_overview_rejects_bad_shapes():
    with pytest.raises(ValueError):
        overview_figure(np.ones((2, 4, 5)), TGT, SRC)
    with pytest.raises(ValueError):
        overview_figure(np.ones((1, 2, 5, 4)), TGT, SRC)


def test_overview_default_gap_visible_at_128_tokens():
    Q = 128
    toks = [f"▁t{i}" for i in range(Q)]
    fig = overview_figure(rows_dirichlet((3, 8, Q, Q)), toks, toks)
    z = z_of(fig)
    assert np.isnan(z[Q]).all() and z.shape[0] > 3 * Q + 2   # gap of several cells
    assert fig.data[0].customdata is None                        # small payload to the browser
    assert fig.data[0].text is None                              # too many cells for hover text


# --------------------------------------------------------------------------- overview_selection

def test_overview_selection_reads_marker_and_cell_customdata():
    assert overview_selection([{"curve_number": 1, "point_index": 4, "customdata": [1, 3]}]) == (1, 3)
    assert overview_selection([{"customdata": [2, 0, 5, 7]}]) == (2, 0)         # heatmap cell
    assert overview_selection([{"customdata": [-1, -1, -1, -1]}]) is None      # gap cell
    assert overview_selection([]) is None and overview_selection(None) is None


def test_overview_selection_from_index_and_wrapped_payloads():
    assert overview_selection([{"curve_number": 1, "point_index": 11}], n_heads=8) == (1, 3)
    assert overview_selection([{"curve_number": 1, "point_index": 11}]) is None   # no n_heads
    assert overview_selection([{"curve_number": 0, "point_index": 11}], n_heads=8) is None
    payload = {"selection": {"points": [{"customdata": [0, 5]}], "point_indices": [5]}}
    assert overview_selection(payload) == (0, 5)
    assert overview_selection({"points": [{"customdata": [2, 6]}]}) == (2, 6)


def test_overview_selection_round_trip_with_figure_markers():
    fig = overview_figure(rows_dirichlet((3, 8, 4, 5)), TGT, SRC)
    index = 8 * 2 + 5
    point = {"curve_number": 1, "point_index": index,
             "customdata": np.asarray(fig.data[1].customdata)[index].tolist()}
    assert overview_selection([point]) == (2, 5)


# --------------------------------------------------------------------------- head grid

def test_head_grid_layout_ticks_and_layer_label():
    H, Q, K = 3, 4, 5
    w = rows_dirichlet((H, Q, K), seed=4)
    fig = head_grid_figure(w, TGT, SRC, "Layer 2", layer=2, gap=1)
    z = z_of(fig)
    assert z.shape == (Q, H * (K + 1) - 1)
    np.testing.assert_array_equal(z[:, K + 1:2 * K + 1], w[1])
    assert np.isnan(z[:, K]).all()
    assert list(fig.layout.xaxis.ticktext) == display_tokens(SRC) * H                  # every tile column
    assert list(fig.layout.xaxis.tickvals) == [h * (K + 1) + k for h in range(H) for k in range(K)]
    assert list(fig.layout.yaxis.ticktext) == display_tokens(TGT)
    assert list(fig.layout.yaxis.range) == list(fig.layout.yaxis2.range) == [Q - 0.5, -0.5]   # row 0 on top
    assert [a.text for a in fig.layout.annotations] == ["Head 0", "Head 1", "Head 2"]
    heat = fig.data[0]          # hover: the head from customdata, query and key from the label axes
    assert heat.text is None and (heat.xaxis, heat.yaxis) == ("x2", "y2")
    assert heat.hovertemplate.startswith("Layer 2 · head %{customdata}<br>%{y} → %{x}<br>weight %{z:.4f}")
    assert np.asarray(heat.customdata)[0, K + 1] == 1
    assert (heat.y[0], heat.x[K + 1]) == (f"query 0: {display_tokens(TGT)[0]}", f"key 0: {display_tokens(SRC)[0]}\u200b")
    assert np.asarray(fig.data[1].customdata).tolist() == [[2, 0], [2, 1], [2, 2]]
    with pytest.raises(ValueError):
        head_grid_figure(w[None], TGT, SRC)


def test_head_grid_wraps_into_rows_of_four_with_each_head_where_its_label_says():
    H, Q, K, gap = 8, 4, 5, 1
    w = rows_dirichlet((H, Q, K), seed=5)
    fig = head_grid_figure(w, TGT, SRC, layer=3, gap=gap)
    z = z_of(fig)
    sq = Q + 2                      # rows of tiles are 2 cells apart (at least): room for the "Head h" titles
    assert z.shape == (2 * sq - 2, 4 * (K + gap) - gap)                               # 2 rows of 4 tiles
    for h in range(H):
        r, c = divmod(h, 4)
        np.testing.assert_array_equal(z[r * sq:r * sq + Q, c * (K + gap):c * (K + gap) + K], w[h])
        heads = np.asarray(fig.data[0].customdata)                # every cell of the tile names its head
        assert (heads[r * sq:r * sq + Q, c * (K + gap):c * (K + gap) + K] == h).all()
        for q in range(Q):          # and its rows and columns their query and key
            assert fig.data[0].y[r * sq + q].rstrip("\u200b") == f"query {q}: {display_tokens(TGT)[q]}"
        for k in range(K):
            assert fig.data[0].x[c * (K + gap) + k].rstrip("\u200b") == f"key {k}: {display_tokens(SRC)[k]}"
    assert len(set(fig.data[0].x)) == z.shape[1] and len(set(fig.data[0].y)) == z.shape[0]
    annotations = {a.text: (a.x, a.y) for a in fig.layout.annotations}
    assert annotations["Head 5"] == (1 * (K + gap) + (K - 1) / 2, 1 * sq - 0.5)       # in the gap above its tile
    assert np.asarray(fig.data[1].customdata).tolist() == [[3, h] for h in range(H)]
    marker = {"curve_number": 1, "point_index": 6, "customdata": [3, 6]}
    assert overview_selection([marker]) == (3, 6)
    assert (fig.data[1].x[6], fig.data[1].y[6]) == (2 * (K + gap) + (K - 1) / 2, 1 * sq + (Q - 1) / 2)
    assert list(fig.layout.yaxis.ticktext) == display_tokens(TGT) * 2
    six = head_grid_figure(w[:6], TGT, SRC, gap=gap)                                   # a short last row
    assert np.isnan(z_of(six)[sq:, 2 * (K + gap):]).all()
    long = head_grid_figure(rows_dirichlet((H, 40, 40), seed=1), [f"q{i}" for i in range(40)],
                            [f"k{i}" for i in range(40)])
    gap_rows = np.flatnonzero(np.isnan(z_of(long)).all(axis=1))
    assert len(gap_rows) >= 6                       # ~15% of a 40-row tile: a title's height at any size
    assert len(six.layout.annotations) == 6 and len(six.data[1].customdata) == 6
    with pytest.raises(ValueError):
        head_grid_figure(w, TGT, SRC, columns=0)


def test_head_grid_normalised_hover_keeps_the_raw_weight_and_the_head():
    H, Q, K = 5, 4, 5
    w = rows_dirichlet((H, Q, K), seed=6)
    fig = head_grid_figure(w, TGT, SRC, normalize=True, gap=1)          # layer unknown: no "Layer" in hover
    heat, sq = fig.data[0], Q + 2
    assert heat.hovertemplate.startswith("head %{customdata[1]}<br>%{y} → %{x}<br>weight %{customdata[0]:.4f}")
    custom = np.asarray(heat.customdata)                                # (R, C, 2): [raw weight, head]
    for h in range(H):
        r, c = divmod(h, 4)
        block = (slice(r * sq, r * sq + Q), slice(c * (K + 1), c * (K + 1) + K))
        np.testing.assert_allclose(custom[block][..., 0], w[h], rtol=1e-6)
        assert (custom[block][..., 1] == h).all()
        np.testing.assert_allclose(z_of(fig)[block], w[h] / w[h].max(), rtol=1e-6)   # colour: share of its max


# --------------------------------------------------------------------------- masks

def test_mask_figure_two_dimensional():
    m = np.tril(np.ones((4, 4), dtype=bool))
    fig = mask_figure(m, TGT, TGT, "Causal")
    z = np.asarray(fig.data[0].z)
    np.testing.assert_array_equal(z, m.astype(int))
    assert set(np.unique(z)) == {0, 1}
    assert fig.layout.yaxis.title.text == "Query" and fig.layout.xaxis.title.text == "Key"
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(fig.layout.xaxis.ticktext)[0] == "&lt;s&gt;"
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0, 1)


def test_mask_figure_padding_row():
    fig = mask_figure(np.array([True, True, True, False, False]), None, SRC)
    assert np.asarray(fig.data[0].z).tolist() == [[1, 1, 1, 0, 0]]
    assert list(fig.layout.yaxis.ticktext) == ["any query"]


def test_mask_figure_rejects_bad_masks():
    with pytest.raises(ValueError):
        mask_figure(np.array([[0.5, 1.0]]), ["a"], ["b", "c"])        # not binary
    with pytest.raises(ValueError):
        mask_figure(np.ones((2, 3), bool), ["a"], ["b", "c", "d"])    # wrong query count
    with pytest.raises(ValueError):
        mask_figure(np.ones((1, 2, 3), bool), ["a"], ["b", "c", "d"])


def test_batch_padding_figure():
    m = np.array([[1, 1, 1], [1, 0, 0]], dtype=bool)
    fig = batch_padding_figure(m, ["first <s>", "second"], title="Batch")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), m.astype(int))
    assert fig.layout.yaxis.title.text == "Sentence in batch"
    assert fig.layout.xaxis.title.text == "Key position"
    assert list(fig.layout.yaxis.ticktext) == ["first &lt;s&gt;", "second"]
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2"]
    with pytest.raises(ValueError):
        batch_padding_figure(m, ["only one"])


# --------------------------------------------------------------------------- encodings

def sinusoidal(P, D):
    pos, i = np.arange(P)[:, None], np.arange(D // 2)[None, :]
    angle = pos / 10000 ** (2 * i / D)
    pe = np.zeros((P, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def test_positional_encoding_figure():
    pe = sinusoidal(4, 8)
    fig = positional_encoding_figure(pe, TGT, "PE")
    np.testing.assert_allclose(z_of(fig), pe)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1, 1)
    assert fig.layout.yaxis.title.text == "Position" and fig.layout.xaxis.title.text == "Dimension"
    assert list(fig.layout.yaxis.ticktext) == ["0 &lt;s&gt;", "1 ▁Ein", "2 ▁Mann", "3 &lt;/s&gt;"]
    assert fig.layout.yaxis.autorange == "reversed"
    assert positional_encoding_figure(pe).layout.yaxis.ticktext is None
    with pytest.raises(ValueError):
        positional_encoding_figure(pe, SRC)


def test_positional_encoding_over_many_positions_marks_the_sentence():
    pe = sinusoidal(64, 16)
    fig = positional_encoding_figure(pe, sentence=TGT, title="PE")
    np.testing.assert_allclose(z_of(fig), pe)                                     # all 64 positions
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert [ticks[i] for i in range(4)] == ["0 &lt;s&gt;", "1 ▁Ein", "2 ▁Mann", "3 &lt;/s&gt;"]
    assert ticks[8] == "8" and ticks[56] == "56" and 5 not in ticks
    (outline,) = fig.layout.shapes
    assert (outline.y0, outline.y1) == (-0.5, 3.5)
    assert fig.layout.annotations[0].text == "this sentence: positions 0–3"
    assert fig.data[0].customdata is None and "Position %{y}" in fig.data[0].hovertemplate   # no string per cell
    with pytest.raises(ValueError):
        positional_encoding_figure(pe[:3], sentence=TGT)                           # longer than the table
    with pytest.raises(ValueError):
        positional_encoding_figure(pe, TGT, sentence=TGT)


def test_position_similarity_figure():
    pe = sinusoidal(5, 8)
    fig = position_similarity_figure(pe)
    np.testing.assert_allclose(z_of(fig), pe @ pe.T)
    np.testing.assert_allclose(np.diag(z_of(fig)), 4.0)        # Σ sin² + cos² = D / 2
    assert fig.data[0].zmin == -fig.data[0].zmax
    assert fig.data[0].customdata is None and "Position %{y}<br>Position %{x}" in fig.data[0].hovertemplate
    labelled = position_similarity_figure(pe, ["a", "b", "c", "d", "e"])
    assert np.asarray(labelled.data[0].customdata)[1, 3].tolist() == ["1 b", "3 d"]        # row, column


def test_embedding_figure():
    emb = np.array([[1.0, -3.0], [0.5, 2.0]])
    fig = embedding_figure(emb, ["<s>", "▁x"])
    np.testing.assert_array_equal(z_of(fig), emb)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-3, 3)
    assert list(fig.layout.yaxis.ticktext) == ["&lt;s&gt;", "▁x"]
    assert fig.layout.xaxis.title.text == "Dimension"
    with pytest.raises(ValueError):
        embedding_figure(emb, ["one"])


# --------------------------------------------------------------------------- top-k and tokens

def test_topk_bar_figure_order_colours_and_escaping():
    top = [("▁Mann", 0.7), ("<unk>", 0.2), ("▁Herr", 0.1)]
    fig = topk_bar_figure(top, chosen="<unk>", title="Step 1")
    bar = fig.data[0]
    assert bar.orientation == "h"
    np.testing.assert_allclose(bar.x, [0.7, 0.2, 0.1])
    assert list(bar.y) == [0, 1, 2] and fig.layout.yaxis.autorange == "reversed"   # best on top
    assert list(fig.layout.yaxis.ticktext) == ["▁Mann", "&lt;unk&gt;", "▁Herr"]
    colours = list(bar.marker.color)
    assert colours[1] != colours[0] and colours[0] == colours[2]
    assert list(fig.layout.xaxis.range) == [0, 1]


def test_topk_bar_figure_chosen_outside_top_k_is_appended():
    fig = topk_bar_figure([("▁a", 0.6), ("▁b", 0.3)], chosen=("▁c", 0.05))
    assert list(fig.data[0].x) == [0.6, 0.3, 0.05]
    assert list(fig.layout.yaxis.ticktext)[-1] == "▁c"
    assert fig.data[0].marker.color[2] != fig.data[0].marker.color[0]
    with pytest.raises(ValueError):
        topk_bar_figure([("▁a", 1.5)])


def test_token_probability_html_script_is_inert():
    html = token_probability_html(["<script>alert(1)</script>", "▁ok"], [0.1, 0.9])
    assert "<script" not in html and "</script" not in html
    assert "&lt;script&gt;" in html
    assert html.count('<span class="aa-token"') == 2
    assert "\n" not in html and html.startswith("<div")


def test_token_probability_html_attributes_and_markdown_are_escaped():
    html = token_probability_html(['"><img src=x onerror=alert(1)>', "**b**", "$x$"], [0.5, 0.5, 0.5])
    assert "<img" not in html and '"><img' not in html
    assert "**" not in html and "$x$" not in html
    assert 'title="step 1: &quot;&gt;&lt;img' in html        # steps counted from 1, as the views say


def test_token_probability_html_shading_and_space():
    html = token_probability_html(["▁a", "▁b"], [0.05, 0.99])
    spans = [part for part in html.split("<span")[1:] if 'class="aa-token"' in part]
    background = [s.split("background-color:")[1].split(";")[0] for s in spans]
    assert background == ["rgb(219,81,14)", "rgb(255,253,252)"]       # unsure: deep orange, sure: white
    assert "sure</span> → " in html and "unsure</span>" in html, "the legend says which is which"
    assert "␣a" in html and "p=0.050" in html
    assert "▁a" in token_probability_html(["▁a"], [0.5], show_space=False)
    with pytest.raises(ValueError):
        token_probability_html(["▁a", "▁b"], [0.5])
    with pytest.raises(ValueError):
        token_probability_html(["▁a"], [1.5])


# --------------------------------------------------------------------------- words

def test_word_spans_and_merge_pieces():
    pieces = ["<s>", "▁Ein", "▁Fahr", "rad", "<unk>", ".", "</s>", "x", "<pad>"]
    spans = word_spans(pieces)
    assert spans == [(0, 1), (1, 2), (2, 6), (6, 7), (7, 8), (8, 9)]
    assert merge_pieces(pieces, spans) == ["<s>", "▁Ein", "▁Fahrrad<unk>.", "</s>", "x", "<pad>"]
    assert word_spans(["rad", "▁x"]) == [(0, 1), (1, 2)]       # first piece always starts one
    assert word_spans([]) == []


def test_merge_attention_hand_example():
    # keys: ▁Fahr rad </s> → words ▁Fahrrad, </s>; queries: ▁a b ▁c → words ▁ab, ▁c
    w = np.array([[0.1, 0.2, 0.7],
                  [0.3, 0.3, 0.4],
                  [0.5, 0.5, 0.0]])
    merged, qw, kw = merge_attention(w, ["▁a", "b", "▁c"], ["▁Fahr", "rad", "</s>"])
    assert qw == ["▁ab", "▁c"] and kw == ["▁Fahrrad", "</s>"]
    np.testing.assert_allclose(merged, [[0.45, 0.55], [1.0, 0.0]])


def test_merge_attention_keeps_leading_dims_and_row_sums():
    w = rows_dirichlet((3, 8, 5, 4), seed=5)
    merged, qw, kw = merge_attention(w, SRC, TGT)
    assert merged.shape == (3, 8, len(qw), len(kw)) == (3, 8, 5, 4)
    np.testing.assert_allclose(merged.sum(-1), 1.0, rtol=1e-5)
    assert merged.dtype == np.float32


def test_merge_attention_rejects_mismatch():
    with pytest.raises(ValueError):
        merge_attention(np.ones((2, 3)), ["a", "b"], ["c", "d"])
    with pytest.raises(ValueError):
        merge_attention(np.ones(3), ["a"], ["b", "c", "d"])


# --------------------------------------------------------------------------- statistics

def test_head_statistics_uniform_and_identity():
    K = 4
    toks = ["▁a", "▁b", "▁c", "</s>"]
    w = np.stack([np.full((K, K), 1 / K), np.eye(K)])[None]          # (1, 2, K, K)
    df = head_statistics(w, toks, toks)
    assert list(df.columns) == ["layer", "head", "entropy", "mean_distance", "max_weight",
                                "special_share", "diagonal_share"]
    assert df[["layer", "head"]].values.tolist() == [[0, 0], [0, 1]]
    uniform, identity = df.iloc[0], df.iloc[1]
    assert uniform.entropy == pytest.approx(math.log(K))
    assert uniform.max_weight == pytest.approx(1 / K)
    assert uniform.diagonal_share == pytest.approx(1 / K)
    assert uniform.special_share == pytest.approx(1 / K)
    assert uniform.mean_distance == pytest.approx(np.abs(np.subtract.outer(range(K), range(K))).mean())
    assert identity.entropy == pytest.approx(0.0)
    assert identity.diagonal_share == pytest.approx(1.0)
    assert identity.mean_distance == pytest.approx(0.0)
    assert identity.special_share == pytest.approx(1 / K)           # only row 3 hits </s>


def test_head_statistics_cross_attention_hand_example():
    w = np.array([[[[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]]]])            # (1, 1, Q=2, K=3)
    df = head_statistics(w, ["▁x", "</s>"], ["<s>", "▁y", "</s>"])
    row = df.iloc[0]
    assert math.isnan(row.diagonal_share)                            # Q != K: not aligned
    assert row.mean_distance == pytest.approx((1.0 + (0.5 * 1 + 0.5 * 1)) / 2)
    assert row.max_weight == pytest.approx(0.75)
    assert row.special_share == pytest.approx((0.0 + 1.0) / 2)
    assert row.entropy == pytest.approx(math.log(2) / 2)
    with pytest.raises(ValueError):
        head_statistics(w[0], ["▁x", "</s>"], ["<s>", "▁y", "</s>"])


def test_statistic_figure_grid_and_validation():
    w = rows_dirichlet((2, 3, 4, 4), seed=6)
    df = head_statistics(w, TGT, TGT)
    fig = statistic_figure(df, "entropy")
    z = z_of(fig)
    assert z.shape == (2, 3)
    assert z[1, 2] == pytest.approx(df.query("layer == 1 and head == 2").entropy.item())
    assert np.asarray(fig.data[0].customdata)[1, 2].tolist() == [1, 2]
    assert fig.layout.yaxis.autorange == "reversed"
    assert np.asarray(fig.data[1].customdata).tolist()[5] == [1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2"] and fig.layout.xaxis.title.text == "Head"
    assert list(fig.layout.yaxis.ticktext) == ["0", "1"] and fig.layout.yaxis.title.text == "Layer"
    assert fig.data[0].textfont.size >= 11 and fig.layout.xaxis.tickangle == 0
    share = statistic_figure(df, "special_share")
    assert (share.data[0].zmin, share.data[0].zmax) == (0, 1)
    with pytest.raises(ValueError):
        statistic_figure(df, "nope")


def test_statistic_maps_figure_draws_each_statistic_with_its_own_axes_and_scale():
    w = rows_dirichlet((2, 3, 4, 4), seed=7)
    df = head_statistics(w, TGT, TGT)
    columns = ["mean_distance", "max_weight", "special_share", "diagonal_share"]
    fig = statistic_maps_figure(df, columns)
    heat = [t for t in fig.data if t.type == "heatmap"]
    markers = [t for t in fig.data if t.type == "scatter"]
    assert len(heat) == len(markers) == 4
    for i, (column, trace, points) in enumerate(zip(columns, heat, markers)):
        z, _, _ = layer_head_grid(df, column)
        np.testing.assert_allclose(np.asarray(trace.z, dtype=float), z)                  # (L, H) of that statistic
        axis = "" if i == 0 else str(i + 1)
        assert (trace.xaxis, trace.yaxis) == (points.xaxis, points.yaxis) == (f"x{axis}", f"y{axis}")
        assert fig.layout[f"yaxis{axis}"].autorange == "reversed"                        # layer 0 on top
        assert np.asarray(points.customdata).tolist()[5] == [1, 2]                       # a click names the head
    assert (heat[1].zmin, heat[1].zmax) == (0, 1) and heat[0].zmax == pytest.approx(np.nanmax(
        layer_head_grid(df, "mean_distance")[0]))                                        # its own range
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:2] == ["mean |query − key| distance", "mean row max weight"]
    # two to a row: the second row sits below the first, and maps never overlap
    y0, y2 = fig.layout.yaxis.domain, fig.layout.yaxis3.domain
    x0, x1 = fig.layout.xaxis.domain, fig.layout.xaxis2.domain
    assert y2[1] < y0[0] and x0[1] < x1[0]
    cross = head_statistics(rows_dirichlet((2, 3, 4, 5), seed=1), TGT, SRC)              # no diagonal
    assert "no value for these heads" in [a.text for a in statistic_maps_figure(cross, columns).layout.annotations]
    with pytest.raises(ValueError):
        statistic_maps_figure(df, ["entropy", "nope"])
    with pytest.raises(ValueError):
        statistic_maps_figure(df, [])


# --------------------------------------------------------------------------- rollout

def test_rollout_identity_and_uniform():
    S = 4
    eye = np.broadcast_to(np.eye(S), (3, 2, S, S))
    np.testing.assert_allclose(rollout(eye), np.eye(S))
    uniform = np.full((2, 2, S, S), 1 / S)
    np.testing.assert_allclose(rollout(uniform, add_residual=False), np.full((S, S), 1 / S))


def test_rollout_matches_hand_product_and_rows_sum_to_one():
    w = rows_dirichlet((3, 4, 5, 5), seed=7).astype(np.float64)
    expected = np.eye(5)
    for layer in w:
        a = 0.5 * layer.mean(0) + 0.5 * np.eye(5)
        expected = (a / a.sum(-1, keepdims=True)) @ expected
    result = rollout(w)
    np.testing.assert_allclose(result, expected)
    np.testing.assert_allclose(result.sum(-1), 1.0)
    assert not np.allclose(result, rollout(w, add_residual=False))
    with pytest.raises(ValueError):
        rollout(np.ones((2, 2, 3, 4)))


# --------------------------------------------------------------------------- export

def test_plotly_configs():
    assert viz.PLOTLY_CONFIG["displaylogo"] is False
    opts = viz.PLOTLY_CONFIG["toImageButtonOptions"]
    assert opts["format"] == "png" and opts["scale"] == 2 and opts["filename"]
    assert viz.svg_config("head")["toImageButtonOptions"]["format"] == "svg"
    assert viz.svg_config("head")["toImageButtonOptions"]["filename"] == "head"


def test_figure_html_embeds_plotly_js():
    html = viz.figure_html(attention_heatmap(np.eye(2), ["a", "b"], ["c", "d"]))
    assert '<script src="http' not in html and len(html) > 1_000_000


# --------------------------------------------------------------------------- fast construction
# Builders construct each figure once from plain dicts without Plotly's validation
# (viz/_figure.py). These checks hold every builder to what validation would produce.

def _stats():
    return head_statistics(rows_dirichlet((2, 3, 4, 4), seed=8), TGT, TGT)


FIGURES = {
    "heatmap": lambda: attention_heatmap(rows_dirichlet((4, 5)), TGT, SRC, title="<s> x"),
    "heatmap options": lambda: attention_heatmap(
        rows_dirichlet((4, 5)), TGT, SRC, normalize=True, show_space=True, hide_special=True,
        colorscale="Cividis", query_title="Out", key_title="In", height=400),
    "heatmap empty": lambda: attention_heatmap(np.ones((1, 1)), ["<s>"], ["</s>"], hide_special=True),
    "overview": lambda: overview_figure(rows_dirichlet((2, 3, 4, 5)), TGT, SRC, kind_label="Cross"),
    "overview image": lambda: overview_figure(rows_dirichlet((2, 3, 4, 5)), TGT, SRC, render="image"),
    "overview normalized": lambda: overview_figure(
        rows_dirichlet((2, 2, 4, 4)), TGT, TGT, title="t", normalize=True, gap=2, colorscale="Magma"),
    "head grid": lambda: head_grid_figure(rows_dirichlet((3, 4, 5)), TGT, SRC, layer=1, title="L1"),
    "mask": lambda: mask_figure(np.tril(np.ones((4, 4), bool)), TGT, TGT, title="causal"),
    "padding mask": lambda: mask_figure([1, 1, 0], None, ["a", "<pad>", "<pad>"]),
    "batch padding": lambda: batch_padding_figure([[1, 1, 0], [1, 0, 0]], ["s0", "s1"]),
    "positional encoding": lambda: positional_encoding_figure(np.sin(np.arange(15.).reshape(5, 3)), SRC),
    "position similarity": lambda: position_similarity_figure(np.cos(np.arange(15.).reshape(5, 3))),
    "embedding": lambda: embedding_figure(np.arange(15.).reshape(5, 3) - 7, SRC, show_space=True),
    "top-k": lambda: topk_bar_figure([("▁a", 0.6), ("<s>", 0.3)], chosen=("▁z", 0.01), title="k"),
    "statistic": lambda: statistic_figure(_stats(), "entropy"),
    "statistic share": lambda: statistic_figure(_stats(), "special_share", colorscale="Cividis"),
    "statistic maps": lambda: statistic_maps_figure(_stats(), ["entropy", "max_weight", "diagonal_share"]),
    "beam tree": lambda: beam_tree_figure([[(["▁A"], -0.1, None, False), (["</s>"], -2.0, None, True)],
                                           [(["▁A", "<s>"], -0.3, 0, False), (["▁A", "</s>"], -0.2, 0, True)]],
                                          (1, 1), title="<s>", show_space=True),
    "probability change": lambda: probability_change_figure(["▁a", "</s>"], [0.9, 0.8], [0.5, 0.85],
                                                            title="<b>"),
    "heatmap norm-weighted": lambda: attention_heatmap(rows_dirichlet((4, 5)) * 6, TGT, SRC, zmax=6.0,
                                                       value_title="‖α·f(x)‖"),
    "overview marked": lambda: overview_figure(rows_dirichlet((2, 3, 4, 5)) * 3, TGT, SRC, zmax=3.0,
                                               value_title="‖α·f(x)‖", marked=[(0, 1), (1, 2)]),
    "importance": lambda: importance_figure([[0.1, -0.02], [0.3, 0.0]], "<b>", marked=[(1, 0)]),
    "pruning curve": lambda: pruning_curve_figure([0, 7, 14], [33.9, 34.6, 31.5], [57.7, 58.0, 57.9]),
}


def drop_empty(value):
    """JSON without empty objects: validation drops an empty `title: {}`, which draws nothing."""
    if isinstance(value, dict):
        kept = {k: drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


@pytest.mark.parametrize("name", FIGURES)
def test_builder_figure_equals_its_validated_rebuild(name):
    fig = FIGURES[name]()
    assert type(fig) is go.Figure
    rebuilt = go.Figure(fig.to_dict())          # every property validated and coerced by Plotly
    assert [type(t) for t in rebuilt.data] == [type(t) for t in fig.data]
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))


@pytest.mark.parametrize("name", FIGURES)
def test_builder_figure_serialises_without_plotlys_slow_fallback(name):
    orjson = pytest.importorskip("orjson")
    # plotly.io falls back to a Python walk of the whole figure when orjson rejects a value
    # (object arrays of hover strings were the culprits).
    options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS      # plotly.io's own
    orjson.dumps(FIGURES[name]().to_dict(), option=options)


def test_built_figures_validate_later_edits():
    fig = overview_figure(rows_dirichlet((1, 2, 4, 5)), TGT, SRC)
    with pytest.raises(ValueError):
        fig.update_layout(height=5)
    with pytest.raises(ValueError):
        fig.data[0].zmin = "low"
    with pytest.raises(ValueError):
        fig.layout.xaxis.tickfont.size = -1
    fig.update_traces(colorscale="Cividis", selector=dict(type="heatmap"))
    assert fig.data[0].colorscale == go.Heatmap(colorscale="Cividis").colorscale
    with pytest.raises(ValueError):
        attention_heatmap(np.eye(2), ["a", "b"], ["c", "d"], colorscale="no-such-scale")
    with pytest.raises(ValueError):
        attention_heatmap(np.eye(2), ["a", "b"], ["c", "d"], height=5)


def test_built_figures_follow_the_default_template_and_copy_independently():
    default = pio.templates.default
    try:
        pio.templates.default = "plotly_white"
        fig = attention_heatmap(rows_dirichlet((4, 5)), TGT, SRC)
        assert fig.to_dict()["layout"]["template"] == pio.templates["plotly_white"].to_plotly_json()
        pio.templates.default = None
        plain = attention_heatmap(np.eye(2), ["a", "b"], ["c", "d"])
        assert "template" not in plain.to_dict()["layout"]
    finally:
        pio.templates.default = default
    before = fig.to_json()
    copied = fig.to_dict()
    copied["data"][0]["customdata"][0][0][0] = "changed"
    copied["layout"]["template"]["layout"]["font"]["color"] = "red"
    deep = copy.deepcopy(fig)
    deep.data[0].customdata[0][0][0] = "changed too"
    assert fig.to_json() == before
    assert json.loads(pickle.loads(pickle.dumps(fig)).to_json()) == json.loads(before)


# --------------------------------------------------------------------------- overview as an image

def test_png_colorize_and_encoding_round_trip():
    from PIL import Image
    from viz._png import colorize, png_bytes
    z = np.array([[0.0, 0.5, np.nan], [1.0, 0.25, 0.75]])
    rgba = colorize(z, "Viridis", 0.0, 1.0)
    assert rgba.shape == (2, 3, 4) and rgba.dtype == np.uint8
    assert tuple(rgba[0, 0, :3]) == (68, 1, 84) and tuple(rgba[1, 0, :3]) == (253, 231, 37)   # Viridis ends
    assert rgba[0, 2, 3] == 0 and (rgba[[0, 0, 1, 1, 1], [0, 1, 0, 1, 2], 3] == 255).all()      # NaN: transparent
    decoded = np.asarray(Image.open(io.BytesIO(png_bytes(rgba))).convert("RGBA"))
    np.testing.assert_array_equal(decoded, rgba)
    with pytest.raises(ValueError):
        png_bytes(rgba[..., :3])


def test_overview_draws_large_grids_as_an_image(monkeypatch):
    import base64
    from PIL import Image
    w = rows_dirichlet((2, 3, 4, 5), seed=2)
    heat = overview_figure(w, TGT, SRC, gap=1, render="heatmap")
    image = overview_figure(w, TGT, SRC, gap=1, render="image")
    assert [t.type for t in image.data] == ["heatmap", "scatter", "image", "scatter"]
    assert image.data[0].visible is False
    np.testing.assert_array_equal(z_of(image), z_of(heat))            # z still holds the weights
    assert image.data[1].customdata.tolist() == heat.data[1].customdata.tolist()   # clickable markers
    png = base64.b64decode(image.data[2].source.split(",", 1)[1])
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
    assert pixels.shape[:2] == z_of(heat).shape
    assert (pixels[:, 5, 3] == 0).all() and (pixels[:4, :5, 3] == 255).all()   # gap column transparent
    assert (image.data[2].x0, image.data[2].dx, image.data[2].y0, image.data[2].dy) == (0, 1, 0, 1)
    assert image.data[3].marker.showscale is True and image.data[3].marker.cmax == 1
    # "auto" switches to the image where per-cell hover text is dropped
    assert [t.type for t in overview_figure(w, TGT, SRC, gap=1).data] == ["heatmap", "scatter"]
    monkeypatch.setattr(viz.overview, "HOVER_TEXT_CELLS", 10)
    assert overview_figure(w, TGT, SRC, gap=1).data[2].type == "image"
    with pytest.raises(ValueError):
        overview_figure(w, TGT, SRC, render="svg")


def test_source_share_axis_numbers_have_room():
    from viz import source_share_figure
    fig = source_share_figure(np.array([0.2, 0.8, 0.5]), ["▁a", "▁b", "</s>"])
    assert fig.layout.yaxis.automargin is True and list(fig.layout.yaxis.ticktext) == ["0", "½", "1"]
    assert list(fig.layout.yaxis.range) == [0.0, 1.0]


def test_pruning_curve_fits_half_a_page():
    from viz import pruning_curve_figure
    fig = pruning_curve_figure([0, 4, 8], [30.0, 28.0, 20.0], [55.0, 54.0, 48.0],
                               "Pruning curve: BLEU as heads are removed, least important first", total_heads=72)
    assert fig.layout.title.text == "Pruning curve<br><sup>BLEU as heads are removed, least important first</sup>"
    assert fig.layout.xaxis.automargin is True and fig.layout.yaxis.automargin is True
    assert (fig.layout.legend.x, fig.layout.legend.y) == (0.01, 0.02)         # inside, away from the title
    assert pruning_curve_figure([0, 1], [1.0, 0.5], title="Pruning curve").layout.title.text == "Pruning curve"


def test_presenter_colour_bars_do_not_stack_labels():
    from viz import attention_heatmap, overview_figure, presenter_figure
    one_row = presenter_figure(attention_heatmap(np.full((1, 3), 1 / 3), ["▁a"], ["x", "y", "z"], title="t"))
    bar = one_row.data[0].colorbar
    assert bar.title.side == "right" and bar.nticks == 3 and bar.title.text == "weight"
    assert bar.tickfont.size == 14 and one_row.layout.font.size == 18
    image = presenter_figure(overview_figure(rows_dirichlet((1, 2, 3, 4), seed=1), TGT[:3], SRC[:4], render="image"))
    carrier = image.data[3].marker.colorbar
    assert carrier.title.side == "right" and carrier.nticks == 3


def test_token_probability_html_marks_the_current_step():
    html = token_probability_html(["▁a", "▁b", "</s>"], [0.9, 0.5, 0.99], current=1)
    spans = [part for part in html.split("<span")[1:] if 'class="aa-token' in part]
    assert ["aa-current" in span for span in spans] == [False, True, False]
    assert "outline:2px solid" in spans[1] and "outline" not in spans[0]
    assert "aa-current" not in token_probability_html(["▁a"], [0.9])
    with pytest.raises(ValueError):
        token_probability_html(["▁a"], [0.9], current=1)
