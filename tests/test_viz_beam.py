"""Tests for viz.beam: the beam-search lattice, its selection and its table, on hand-made histories."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from viz.beam import beam_path, beam_selection, beam_table, beam_tree_figure  # noqa: E402


@dataclass
class Hyp:                      # the attribute form (like transformer.decoding.Hypothesis)
    pieces: list
    score: float
    parent: int | None
    finished: bool


# K = 2 over 3 steps: step 1 has a hypothesis that finished there (index 2),
# step 2's finished index 2 is the returned one; its path is (0,1) → (1,0) → (2,2).
HISTORY = [
    [(["▁Ein"], -0.5, None, False), (["<b>x</b>"], -0.9, None, False)],
    [(["<b>x</b>", "▁Hund"], -0.7, 1, False), (["▁Ein", "▁Mann"], -0.8, 0, False),
     (["▁Ein", "</s>"], -1.2, 0, True)],
    [Hyp(["<b>x</b>", "▁Hund", "▁läuft"], -0.6, 0, False),
     Hyp(["▁Ein", "▁Mann", "<s>"], -1.0, 1, False),
     Hyp(["<b>x</b>", "▁Hund", "</s>"], -0.4, 0, True)],
]
FINAL = (2, 2)
NODES = [(t, i) for t, step in enumerate(HISTORY) for i in range(len(step))]


def parent_of(h):
    return h[2] if isinstance(h, tuple) else h.parent


def nodes_of(fig: go.Figure):
    return fig.data[-1]


def test_beam_path_follows_parents():
    assert beam_path(HISTORY, FINAL) == [(0, 1), (1, 0), (2, 2)]
    assert beam_path(HISTORY, (2, 1)) == [(0, 0), (1, 1), (2, 1)]
    assert beam_path(HISTORY, (1, 2)) == [(0, 0), (1, 2)]
    assert beam_path(HISTORY, (0, 1)) == [(0, 1)]
    assert beam_path(HISTORY, [np.int64(2), np.int64(0)]) == [(0, 1), (1, 0), (2, 0)]


def test_nodes_customdata_positions_and_trace_order():
    fig = beam_tree_figure(HISTORY, FINAL)
    assert [t.name for t in fig.data] == ["edges", "final path", "nodes"]
    node = nodes_of(fig)
    assert len(node.x) == len(NODES) == 8
    assert np.asarray(node.customdata).tolist() == [list(n) for n in NODES]
    assert list(node.x) == [t + 1 for t, _ in NODES] and list(node.y) == [i for _, i in NODES]
    assert list(fig.layout.xaxis.ticktext) == ["step 1", "step 2", "step 3"]
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 3]
    assert fig.layout.xaxis.title.text == "Decoding step"
    assert fig.layout.yaxis.title.text == "Hypothesis"
    assert fig.layout.yaxis.autorange == "reversed"             # row 0 on top


def test_edges_join_each_child_to_its_parent():
    fig = beam_tree_figure(HISTORY, FINAL)
    x, y = list(fig.data[0].x), list(fig.data[0].y)
    segments = [((x[k], y[k]), (x[k + 1], y[k + 1])) for k in range(0, len(x), 3)]
    assert x[2::3] == [None] * len(segments) and y[2::3] == [None] * len(segments)
    expected = [((t, parent_of(HISTORY[t][i])), (t + 1, i)) for t, i in NODES if t > 0]
    assert segments == expected
    assert len(segments) == 6


def test_final_path_is_highlighted():
    fig = beam_tree_figure(HISTORY, FINAL)
    path = fig.data[1]
    assert list(zip(path.x, path.y)) == [(t + 1, i) for t, i in beam_path(HISTORY, FINAL)]
    assert path.line.width > fig.data[0].line.width and path.line.color != fig.data[0].line.color
    node = nodes_of(fig)
    on_path = set(beam_path(HISTORY, FINAL))
    big = {n for n, size in zip(NODES, node.marker.size) if size == max(node.marker.size)}
    assert big == on_path
    ringed = {n for n, c in zip(NODES, node.marker.line.color) if c == path.line.color}
    assert ringed == on_path
    assert "on the returned path" in node.hovertext[NODES.index(FINAL)]
    assert "on the returned path" not in node.hovertext[NODES.index((2, 0))]


def test_without_final_nothing_is_highlighted_but_traces_stay_in_place():
    fig = beam_tree_figure(HISTORY)
    assert len(fig.data) == 3 and fig.data[-1].name == "nodes"
    assert len(fig.data[1].x) == 0
    assert len(set(nodes_of(fig).marker.size)) == 1


def test_finished_symbols_and_score_colours():
    node = nodes_of(beam_tree_figure(HISTORY, FINAL))
    finished = {n for n, s in zip(NODES, node.marker.symbol) if s != "circle"}
    assert finished == {(1, 2), (2, 2)}
    scores = [h[1] if isinstance(h, tuple) else h.score for step in HISTORY for h in step]
    assert list(node.marker.color) == pytest.approx(scores)
    assert (node.marker.cmin, node.marker.cmax) == pytest.approx((-1.2, -0.4))
    hover = node.hovertext[NODES.index((1, 2))]
    assert "score -1.200" in hover and "finished" in hover
    assert "kept" in node.hovertext[0] and "finished" not in node.hovertext[0]


def test_labels_and_hover_are_escaped():
    fig = beam_tree_figure(HISTORY, FINAL, title="<s> beam")
    node = nodes_of(fig)
    assert node.text[NODES.index((0, 1))] == "&lt;b&gt;x&lt;/b&gt;"
    assert node.text[NODES.index((1, 2))] == "&lt;/s&gt;"
    assert node.text[NODES.index((2, 1))] == "&lt;s&gt;"
    assert "&lt;b&gt;x&lt;/b&gt; ▁Hund &lt;/s&gt;" in node.hovertext[NODES.index(FINAL)]
    everything = json.dumps(fig.to_dict()["data"]) + fig.layout.title.text
    assert "<b>x" not in everything and "</s>" not in everything and "<s>" not in everything
    assert fig.layout.title.text == "&lt;s&gt; beam"


def test_show_space_uses_the_projects_visible_space():
    # display_tokens draws ▁ as ␣ (U+2423) with show_space, as every other figure does.
    plain = nodes_of(beam_tree_figure(HISTORY, FINAL))
    spaced = nodes_of(beam_tree_figure(HISTORY, FINAL, show_space=True))
    k = NODES.index((1, 0))
    assert plain.text[k] == "▁Hund" and spaced.text[k] == "␣Hund"
    assert "&lt;b&gt;x&lt;/b&gt; ␣Hund" in spaced.hovertext[k]
    assert "▁" not in "".join(spaced.text + spaced.hovertext)


def test_height_option_and_validation():
    assert beam_tree_figure(HISTORY, height=420).layout.height == 420
    assert 300 <= beam_tree_figure(HISTORY).layout.height <= 900
    with pytest.raises(ValueError):
        beam_tree_figure(HISTORY, height=5)


def test_beam_selection_reads_node_customdata():
    assert beam_selection([{"curve_number": 2, "point_index": 7, "customdata": [2, 2]}]) == (2, 2)
    assert beam_selection([{"curve_number": 0, "point_index": 1},
                           {"customdata": [1, 0]}]) == (1, 0)
    assert beam_selection({"selection": {"points": [{"customdata": [0, 1]}]}}) == (0, 1)
    assert beam_selection({"points": [{"customdata": [2.0, 1.0]}]}) == (2, 1)
    assert beam_selection([{"curve_number": 2, "point_index": 3}]) is None
    assert beam_selection([{"customdata": [1, 2, 3, 4]}]) is None          # another figure's cell
    assert beam_selection([{"customdata": ["a", 1]}, {"customdata": [-1, 0]}]) is None
    assert beam_selection([{"customdata": [True, 1]}]) is None
    assert beam_selection([]) is None and beam_selection(None) is None


def test_beam_selection_round_trip_with_figure_nodes():
    node = nodes_of(beam_tree_figure(HISTORY, FINAL))
    for k, expected in enumerate(NODES):
        point = {"curve_number": 2, "point_index": k,
                 "customdata": np.asarray(node.customdata)[k].tolist()}
        assert beam_selection([point]) == expected


@pytest.mark.parametrize("history, final", [
    ([], None),
    ([[]], None),
    ("abc", None),
    (HISTORY, (3, 0)),                                           # step out of range
    (HISTORY, (2, 3)),                                           # index out of range
    (HISTORY, (-1, 0)),
    (HISTORY, (1,)),
    (HISTORY, (1.0, 0)),
    (HISTORY + [[(["a", "b", "c", "d"], -1.0, 3, False)]], None),   # parent past step 2's list
    (HISTORY + [[(["a", "b", "c", "d"], -1.0, None, False)]], None),  # no parent after step 0
    ([[(["a"], -1.0, 0, False)]], None),                         # parent at step 0
    ([[(["a"], -1.0, None)]], None),                             # three fields
    ([[("a", -1.0, None, False)]], None),                        # pieces as a string
    ([[([], -1.0, None, False)]], None),
    ([[(["a"], "bad", None, False)]], None),
    ([[(["a"], float("nan"), None, False)]], None),
    ([[(["a"], -1.0, None, "no")]], None),
])
def test_bad_input_raises_value_error(history, final):
    with pytest.raises(ValueError):
        beam_tree_figure(history, final)
    with pytest.raises(ValueError):
        beam_table(history, final)
    if final is not None:
        with pytest.raises(ValueError):
            beam_path(history, final)


def test_beam_path_rejects_bad_parent_and_final():
    with pytest.raises(ValueError, match="parent"):
        beam_path(HISTORY + [[(["a", "b", "c", "d"], -1.0, 5, False)]], (3, 0))
    with pytest.raises(ValueError, match="final"):
        beam_path(HISTORY, (0, 2))


def test_beam_table_rows_and_final_path_flags():
    table = beam_table(HISTORY, FINAL)
    assert list(table.columns) == ["step", "rank", "piece", "prefix", "score", "finished",
                                   "on_final_path"]
    assert len(table) == len(NODES)
    assert table["step"].tolist() == [t + 1 for t, _ in NODES]
    assert table["rank"].tolist() == [i + 1 for _, i in NODES]           # counted from 1, as steps are
    last = table.iloc[-1]
    assert (last["piece"], last["prefix"]) == ("</s>", "<b>x</b> ▁Hund </s>")   # raw text
    assert last["score"] == pytest.approx(-0.4) and bool(last["finished"])
    flagged = {(r.step - 1, r.rank - 1) for r in table.itertuples() if r.on_final_path}
    assert flagged == set(beam_path(HISTORY, FINAL))
    assert table["finished"].tolist() == [False, False, False, False, True, False, False, True]
    assert not beam_table(HISTORY)["on_final_path"].any()


def test_beam_selection_reads_streamlits_typed_array_customdata():
    """Streamlit returns numpy (typed-array) customdata as {"0": a, "1": b}."""
    point = {"curve_number": 2, "point_index": 5, "customdata": {"0": 1, "1": 3}}
    assert beam_selection({"selection": {"points": [point]}}) == (1, 3)
    from viz import overview_selection
    assert overview_selection([{"curve_number": 0, "customdata": {"0": 2, "1": 7}}]) == (2, 7)
