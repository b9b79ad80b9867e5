"""viz/patching.py: the encoder and head maps of a patching sweep (shapes checked, diverging colours
centred at 0, clicks report [layer, head]) and the one sentence computed from the arrays."""
import numpy as np
import pytest

from viz import DIVERGING_COLORSCALE, overview_selection
from viz.patching import carrier_sentence, encoder_patch_figure, head_patch_figure, position_labels

CLEAN = ["▁A", "▁man", "▁rides", "▁a", "▁horse", "</s>"]
CORRUPT = ["▁A", "▁man", "▁rides", "▁a", "▁bike", "</s>"]


def sweep():
    encoder = np.zeros((3, 6))
    encoder[0, 4], encoder[1, 4], encoder[2, 2] = 0.97, 0.6, 0.3
    heads = {"encoder_self": np.full((3, 4), 0.01), "decoder_self": np.full((2, 4), -0.02),
             "cross": np.zeros((2, 4))}
    heads["cross"][1, 3] = 0.62
    return encoder, heads


def test_encoder_map_rows_are_layers_and_columns_positions():
    encoder, _ = sweep()
    fig = encoder_patch_figure(encoder, CLEAN, CORRUPT)
    heat = fig.data[0]
    np.testing.assert_array_equal(np.asarray(heat.z), encoder)
    assert list(fig.layout.yaxis.ticktext) == ["0", "1", "2"] and fig.layout.yaxis.autorange == "reversed"
    assert list(fig.layout.xaxis.ticktext) == ["▁A", "▁man", "▁rides", "▁a", "▁horse→▁bike", "&lt;/s&gt;"]
    assert heat.colorscale and heat.zmin == -heat.zmax and heat.zmax >= 1          # centred at 0
    assert fig.layout.yaxis.title.text == "Encoder layer"


def test_encoder_map_colour_range_covers_overshoot():
    encoder, _ = sweep()
    encoder[2, 0] = -1.8
    heat = encoder_patch_figure(encoder, CLEAN, CORRUPT).data[0]
    assert (heat.zmin, heat.zmax) == (-1.8, 1.8)


@pytest.mark.parametrize("encoder, clean, corrupt", [
    (np.zeros((3, 5)), CLEAN, CORRUPT),                # one position too few
    (np.zeros((3, 6)), CLEAN, CORRUPT[:-1]),           # the sources differ in piece count
    (np.zeros(6), CLEAN, CORRUPT),                     # not layers x positions
    (np.zeros((3, 6)), "A man", CORRUPT),              # a string, not pieces
])
def test_encoder_map_refuses_disagreeing_shapes(encoder, clean, corrupt):
    with pytest.raises(ValueError):
        encoder_patch_figure(encoder, clean, corrupt)


def test_head_map_is_clickable_and_diverging():
    _, heads = sweep()
    fig = head_patch_figure(heads["cross"], "cross", n_heads=4)
    heat, markers = fig.data
    np.testing.assert_array_equal(np.asarray(heat.z), heads["cross"])
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2", "3"]
    assert list(fig.layout.yaxis.ticktext) == ["0", "1"]
    assert heat.zmin == -heat.zmax
    assert fig.layout.title.text == "Cross-attention"
    point = {"curve_number": 1, "point_index": 7, "customdata": list(markers.customdata[7])}
    assert overview_selection([point], n_heads=4) == (1, 3)
    assert "RdBu" in str(DIVERGING_COLORSCALE)


def test_head_map_keeps_nan_cells():
    z = np.array([[np.nan, 0.5]])
    fig = head_patch_figure(z, "decoder_self")
    assert np.isnan(np.asarray(fig.data[0].z, dtype=float)[0, 0])
    assert "restored –" in fig.data[1].text[0]


@pytest.mark.parametrize("values, kind, n_heads", [
    (np.zeros((2, 4)), "cross", 8), (np.zeros(4), "cross", None), (np.zeros((2, 4)), "self", None)])
def test_head_map_refuses_disagreeing_shapes(values, kind, n_heads):
    with pytest.raises(ValueError):
        head_patch_figure(values, kind, n_heads=n_heads)


def test_sentence_names_the_position_and_the_head():
    encoder, heads = sweep()
    assert carrier_sentence(encoder, heads, CLEAN, CORRUPT) == (
        "The change is carried by 'horse→bike' in encoder layer 0 (97%) and cross-attention layer 1 head 3 (62%).")


def test_sentence_takes_the_earliest_layer_of_a_tie_and_the_best_kind():
    encoder, heads = sweep()
    encoder[2, 1] = 0.97
    heads["decoder_self"][0, 2] = 0.8
    assert carrier_sentence(encoder, heads, CLEAN, CORRUPT) == (
        "The change is carried by 'horse→bike' in encoder layer 0 (97%) and decoder self-attention layer 0 "
        "head 2 (80%).")


def test_sentence_without_encoder_positions():
    _, heads = sweep()
    heads["encoder_self"] = None
    sentence = carrier_sentence(None, heads, CLEAN, CORRUPT[:-1])
    assert sentence.startswith("The change is carried by cross-attention layer 1 head 3 (62%).")
    assert "differ in piece count" in sentence


def test_sentence_when_nothing_carries_it_or_nothing_differs():
    encoder, heads = sweep()
    small = {k: v * 0 + 0.05 for k, v in heads.items()}
    assert carrier_sentence(encoder * 0.05, small, CLEAN, CORRUPT).startswith("No single encoder position or head")
    nan = {k: v * np.nan for k, v in heads.items()}
    assert "no difference" in carrier_sentence(encoder * np.nan, nan, CLEAN, CORRUPT)


def test_sentence_refuses_disagreeing_arrays():
    encoder, heads = sweep()
    with pytest.raises(ValueError):
        carrier_sentence(encoder[:, :4], heads, CLEAN, CORRUPT)
    with pytest.raises(ValueError):
        carrier_sentence(encoder, {**heads, "cross": np.zeros((2, 8))}, CLEAN, CORRUPT)
    with pytest.raises(ValueError):
        carrier_sentence(encoder, {"other": np.zeros((2, 4))}, CLEAN, CORRUPT)


def test_position_labels_mark_the_edit():
    assert position_labels(["▁a", "▁b"], ["▁a", "▁c"], show_space=True) == ["␣a", "␣b→␣c"]
