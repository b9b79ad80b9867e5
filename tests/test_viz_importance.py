"""viz.importance: head importance maps, the most important heads, the pruning curve, and the
head_importance.json table; plus the norm-weighted colour scale and the outlines of the tiled views."""
import json

import numpy as np
import plotly.graph_objects as go
import pytest

import viz
from test_viz import drop_empty
from viz import (attention_heatmap, head_grid_figure, importance_figure, importance_frame, overview_figure,
                 pruning_curve_figure, top_heads)

LOSS = np.array([[0.01, -0.002, 0.03], [0.2, 0.0, 0.05]])
TGT, SRC = ["<s>", "▁a", "▁b", "</s>"], ["▁x", "▁y", "▁z", "▁x", "</s>"]


def same_as_validated(fig) -> None:
    rebuilt = go.Figure(fig.to_dict())
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))


def test_exported_and_free_of_streamlit():
    for name in ("importance_figure", "pruning_curve_figure", "top_heads", "importance_frame"):
        assert name in viz.__all__ and hasattr(viz, name)


def test_top_heads_largest_first_with_stable_ties():
    assert top_heads(LOSS, 3) == [(1, 0), (1, 2), (0, 2)]
    assert top_heads(np.zeros((2, 2)), 2) == [(0, 0), (0, 1)]
    assert top_heads(LOSS, 0) == [] and len(top_heads(LOSS, 99)) == LOSS.size
    for bad in (np.zeros(3), np.zeros((0, 2)), [[np.nan, 1.0]]):
        with pytest.raises(ValueError):
            top_heads(bad, 1)
    with pytest.raises(ValueError):
        top_heads(LOSS, -1)


def test_importance_figure_values_marks_and_diverging_scale():
    fig = importance_figure(LOSS, "loss <b>", value_title="loss change", marked=[(1, 0)])
    heat, markers = fig.data
    np.testing.assert_array_equal(np.asarray(heat.z), LOSS)
    assert heat.zmin == -heat.zmax == pytest.approx(-0.2)                   # both signs: centred on 0
    assert heat.text[1][0] == "★" and sum(t == "★" for row in heat.text for t in row) == 1
    assert [list(c) for c in markers.customdata] == [[l, h] for l in range(2) for h in range(3)]
    assert list(markers.x) == [0, 1, 2, 0, 1, 2] and list(markers.y) == [0, 0, 0, 1, 1, 1]
    assert "&lt;b&gt;" in fig.layout.title.text and fig.layout.yaxis.autorange == "reversed"
    same_as_validated(fig)
    positive = importance_figure(np.abs(LOSS))
    assert positive.data[0].zmin == 0.0 and positive.data[0].zmax == pytest.approx(0.2)
    with pytest.raises(ValueError):
        importance_figure(LOSS[0])
    with pytest.raises(ValueError):
        importance_figure(LOSS, marked=[(2, 0)])


def test_pruning_curve_lines_and_checks():
    fig = pruning_curve_figure([0, 7, 14], [33.9, 34.6, 31.5], [57.7, 58.0, 57.9], total_heads=72)
    bleu, chrf = fig.data
    assert list(bleu.x) == [0, 7, 14] and list(bleu.y) == [33.9, 34.6, 31.5] and list(chrf.y)[0] == 57.7
    assert bleu.name == "BLEU" and chrf.name == "chrF" and "of 72" in fig.layout.xaxis.title.text
    same_as_validated(fig)
    assert len(pruning_curve_figure([0, 1], [2.0, 1.0]).data) == 1
    for removed, bleu_values, chrf_values in (([0, 7], [1.0], None), ([0, 7], [1.0, 2.0], [1.0]),
                                              ([7, 0], [1.0, 2.0], None), ([[0, 1]], [[1.0, 2.0]], None),
                                              ([], [], None), ([0, 1], [1.0, np.inf], None), ([-1, 0], [1, 2], None)):
        with pytest.raises(ValueError):
            pruning_curve_figure(removed, bleu_values, chrf_values)


def test_importance_frame_reads_the_heads_table_and_checks_its_shape():
    heads = {kind: {"loss_change": LOSS.tolist(), "michel_importance": {"raw": LOSS.tolist(),
                                                                        "normalised": (LOSS * 2).tolist()}}
             for kind in ("encoder_self", "cross")}
    frame = importance_frame(heads, {"encoder_self": 2, "cross": 2}, 3)
    assert list(frame.columns) == ["kind", "layer", "head", "loss_change", "michel"] and len(frame) == 12
    cross = frame[frame["kind"] == "cross"]
    np.testing.assert_allclose(cross["loss_change"], LOSS.ravel())
    np.testing.assert_allclose(cross["michel"], 2 * LOSS.ravel())
    with pytest.raises(ValueError):
        importance_frame(heads, {"encoder_self": 3}, 3)               # another model's file
    with pytest.raises(ValueError):
        importance_frame(heads, {"decoder_self": 2}, 3)               # a kind missing


def test_norm_weighted_scale_keeps_values_as_given():
    rng = np.random.default_rng(0)
    norms = rng.random((4, 5)) * 7
    fig = attention_heatmap(norms, TGT, SRC, zmax=9.0, value_title="‖α·f(x)‖")
    trace = fig.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), norms)
    assert (trace.zmin, trace.zmax) == (0.0, 9.0) and trace.colorbar.title.text == "‖α·f(x)‖"
    assert "‖α·f(x)‖ %{z:.4f}" in trace.hovertemplate
    assert attention_heatmap(norms, TGT, SRC, zmax=9.0, normalize=True).data[0].zmax == pytest.approx(norms.max())
    same_as_validated(fig)
    with pytest.raises(ValueError):
        attention_heatmap(norms, TGT, SRC, zmax=0.0)
    tiled = rng.random((2, 3, 4, 5)) * 3
    for render in ("heatmap", "image"):
        over = overview_figure(tiled, TGT, SRC, zmax=4.0, value_title="‖α·f(x)‖", render=render)
        assert over.data[0].zmax == 4.0 and np.nanmax(np.asarray(over.data[0].z, dtype=float)) == tiled.max()
        same_as_validated(over)
    assert overview_figure(tiled, TGT, SRC, render="image").data[3].marker.cmax == 1.0
    assert overview_figure(tiled, TGT, SRC, zmax=4.0, render="image").data[3].marker.cmax == 4.0
    grid = head_grid_figure(tiled[0], TGT, SRC, zmax=4.0, value_title="‖α·f(x)‖")
    assert grid.data[0].zmax == 4.0 and "‖α·f(x)‖" in grid.data[0].hovertemplate


def test_overview_outlines_the_marked_tiles():
    weights = np.full((2, 3, 4, 5), 0.2)
    fig = overview_figure(weights, TGT, SRC, marked=[(1, 2), (0, 0)], gap=1)
    first, second = fig.layout.shapes
    # tile (layer 1, head 2): rows 1*(4+1) .. +4, columns 2*(5+1) .. +5, edges half a cell out
    assert (first.x0, first.x1, first.y0, first.y1) == (11.5, 16.5, 4.5, 8.5)
    assert (second.x0, second.y0) == (-0.5, -0.5) and first.line.color == second.line.color
    assert not overview_figure(weights, TGT, SRC).layout.shapes
    same_as_validated(fig)
    with pytest.raises(ValueError):
        overview_figure(weights, TGT, SRC, marked=[(2, 0)])
