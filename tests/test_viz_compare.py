"""viz.compare: two translations side by side, checked through the figures and the table."""
import numpy as np
import pytest

from viz.compare import align_pieces, changed_positions, changed_table, swap_map_figure, swap_pieces_figure

SRC_A = ["▁A", "▁man", "▁rides", "▁a", "▁bike", ".", "</s>"]
SRC_B = ["▁A", "▁man", "▁rides", "▁a", "▁bi", "cycle", ".", "</s>"]
OUT_A = ["▁Ein", "▁Mann", "▁fährt", "▁Fahrrad", ".", "</s>"]
OUT_B = ["▁Ein", "▁Mann", "▁fährt", "▁ein", "▁Rad", ".", "</s>"]
P_A, P_B = np.linspace(0.1, 0.9, 6), np.linspace(0.2, 0.8, 7)


def maps():
    rng = np.random.default_rng(0)
    a, b = rng.random((6, 7)), rng.random((7, 8))
    return a / a.sum(1, keepdims=True), b / b.sum(1, keepdims=True)


def test_align_pieces_pairs_equal_runs_and_marks_the_rest():
    columns = align_pieces(OUT_A, OUT_B)
    assert columns == [(0, 0, True), (1, 1, True), (2, 2, True), (3, 3, False), (None, 4, False), (4, 5, True),
                       (5, 6, True)]
    assert changed_positions(columns) == ([3], [3, 4])
    assert align_pieces(OUT_A, OUT_A) == [(i, i, True) for i in range(6)]
    assert align_pieces([], ["▁x"]) == [(None, 0, False)]
    assert changed_positions(align_pieces(SRC_A, SRC_B)) == ([4], [4, 5])


def test_pieces_figure_aligns_rows_and_outlines_changes():
    fig = swap_pieces_figure(SRC_A, SRC_B, OUT_A, OUT_B, P_A, P_B)
    source, output = fig.data
    z_out = np.asarray(output.z, dtype=float)
    assert z_out.shape == (2, 7)                                          # rows original/edited, 7 aligned columns
    np.testing.assert_allclose(z_out[0, [0, 1, 2, 3, 5, 6]], P_A)
    assert np.isnan(z_out[0, 4])                                          # ▁Rad has no partner in the original
    np.testing.assert_allclose(z_out[1], P_B)
    assert list(output.text[1]) == ["▁Ein", "▁Mann", "▁fährt", "▁ein", "▁Rad", ".", "&lt;/s&gt;"]
    z_src = np.asarray(source.z, dtype=float)
    assert z_src[1].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]                  # ▁bi cycle edited
    outlined = sorted((shape.x0 + shape.x1) / 2 for shape in fig.layout.shapes)
    assert outlined == [3, 4]


def test_pieces_figure_rejects_disagreeing_lengths():
    with pytest.raises(ValueError, match="probabilities"):
        swap_pieces_figure(SRC_A, SRC_B, OUT_A, OUT_B, P_A[:-1], P_B)
    with pytest.raises(ValueError, match="within"):
        swap_pieces_figure(SRC_A, SRC_B, OUT_A, OUT_B, P_A * 2, P_B)
    with pytest.raises(ValueError, match="list of pieces"):
        swap_pieces_figure("▁A", SRC_B, OUT_A, OUT_B, P_A, P_B)


def test_map_figure_rows_queries_columns_keys_with_edits_highlighted():
    a, b = maps()
    fig = swap_map_figure(a, b, OUT_A, OUT_B, SRC_A, SRC_B, value_title="contribution")
    left, right = fig.data
    np.testing.assert_allclose(np.asarray(left.z), a)
    np.testing.assert_allclose(np.asarray(right.z), b)
    assert left.zmax == right.zmax == pytest.approx(max(a.max(), b.max()))
    layout = fig.layout
    assert list(layout.yaxis2.ticktext)[3:5] == ["≠ ▁ein", "≠ ▁Rad"]      # changed output rows
    assert list(layout.yaxis.ticktext)[3] == "≠ ▁Fahrrad"
    assert list(layout.xaxis2.ticktext)[4:6] == ["✎ ▁bi", "✎ cycle"]      # edited source columns
    assert list(layout.xaxis.ticktext)[4] == "✎ ▁bike"
    columns = [(s.xref, (s.x0 + s.x1) / 2) for s in layout.shapes if s.y0 == -0.5]
    assert ("x", 4) in columns and ("x2", 4) in columns and ("x2", 5) in columns
    assert layout.xaxis.ticktext[-1] == "&lt;/s&gt;"                     # pieces escaped, never markup
    assert swap_map_figure(a, b, OUT_A, OUT_B, SRC_A, SRC_B, zmax=2.0).data[0].zmax == 2.0


def test_map_figure_rejects_a_map_that_does_not_fit_its_pieces():
    a, b = maps()
    with pytest.raises(ValueError, match="values_b"):
        swap_map_figure(a, b.T, OUT_A, OUT_B, SRC_A, SRC_B)
    with pytest.raises(ValueError, match="values_a"):
        swap_map_figure(a[:, :3], b, OUT_A, OUT_B, SRC_A, SRC_B)


def test_changed_table_says_where_changed_pieces_came_from():
    a, b = maps()
    table = changed_table(OUT_A, OUT_B, P_A, P_B, a, b, SRC_A, SRC_B)
    assert table["original"].tolist() == ["▁Fahrrad", ""]
    assert table["edited"].tolist() == ["▁ein", "▁Rad"]
    assert table["p edited"].tolist() == pytest.approx([P_B[3], P_B[4]])
    assert table["from edited source (edited)"].tolist() == pytest.approx([b[3, 4:6].sum(), b[4, 4:6].sum()])
    assert table["from edited source (original)"].iloc[0] == pytest.approx(a[3, 4])
    assert np.isnan(table["from edited source (original)"].iloc[1])
    assert table["read most (edited)"].tolist() == [SRC_B[int(np.argmax(b[3]))], SRC_B[int(np.argmax(b[4]))]]
    assert changed_table(OUT_A, OUT_A, P_A, P_A, a, a, SRC_A, SRC_A).empty


def test_exported_and_free_of_torch():
    import viz
    import viz.compare as module
    for name in ("align_pieces", "swap_pieces_figure", "swap_map_figure", "changed_table"):
        assert name in viz.__all__ and hasattr(viz, name)
    source = open(module.__file__, encoding="utf-8").read()
    assert "import torch" not in source and "streamlit" not in source
