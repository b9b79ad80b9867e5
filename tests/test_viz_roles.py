"""viz.roles through what it draws: the layers x heads role maps (cell text = the head's role and
score, or its strongest score; cross-attention its AER; click markers carry (kind, layer, head)),
and the word alignment drawing (source words above, output words below, one line per link, gold
colours, the AER in the note); ValueError on disagreeing shapes."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.roles import (HIT, LINK, MISS, MISSED, alignment_figure, figure_links, head_roles_figure, head_scores,
                       role_table, roles_selection, word_positions)


def entry(layer, head, role="none", prev=0.1, same=0.2, nxt=0.1, rare=0.05, sink=0.05, aer=None):
    out = {"layer": layer, "head": head, "role": role, "positional": {"-1": prev, "0": same, "+1": nxt},
           "rare_word": rare, "sink": sink}
    if aer is not None:
        out["aer"] = {"row": {"fit": aer + 5, "held_out": aer + 6}, "mutual": {"fit": aer - 1, "held_out": aer}}
    return out


def test_a_head_without_a_role_is_labelled_with_its_strongest_score():
    assert head_scores(entry(0, 0, prev=0.38), "encoder_self")[:2] == ("prev 38%", pytest.approx(0.38))
    assert head_scores(entry(0, 0, same=0.49), "decoder_self")[0] == "self 49%"
    assert head_scores(entry(0, 0, nxt=0.7), "encoder_self")[0] == "next 70%"
    assert head_scores(entry(0, 0, rare=0.31), "encoder_self")[0] == "rare 31%"
    assert head_scores(entry(0, 0, sink=0.45), "decoder_self")[0] == "sink 45%"
    # cross-attention: its held-out AER under the rule asked for, coloured 1 - AER
    label, value, hover = head_scores(entry(1, 7, aer=36.2), "cross")
    assert label == "AER 36" and value == pytest.approx(1 - 0.362) and "AER 36.2 (mutual" in hover
    assert head_scores(entry(1, 7, aer=36.2), "cross", rule="row")[0] == "AER 42"


def test_a_head_with_a_role_is_labelled_with_it_and_its_score():
    assert head_scores(entry(0, 0, "positional -1", prev=0.94), "encoder_self")[:2] == (
        "positional -1 94%", pytest.approx(0.94))
    assert head_scores(entry(0, 0, "rare word", rare=0.6), "encoder_self")[0] == "rare word 60%"
    assert head_scores(entry(0, 0, "sink", sink=0.8), "cross", )[0] == "sink 80%"     # no AER: the role
    assert head_scores(entry(0, 0, "sink", sink=0.8, aer=50.0), "cross")[0] == "sink 80%"


def test_role_table_places_each_head_and_refuses_missing_or_outside_heads():
    entries = [entry(layer, head, prev=0.1 * head + 0.01 * layer) for layer in range(2) for head in range(3)]
    values, labels, hovers = role_table(entries, "encoder_self", 2, 3)
    assert values.shape == (2, 3) and values[1, 2] == pytest.approx(0.21)
    assert labels[1][2] == "prev 21%" and labels[0][0] == "self 20%"
    with pytest.raises(ValueError, match="outside"):
        role_table(entries + [entry(2, 0)], "encoder_self", 2, 3)
    with pytest.raises(ValueError, match="no entry"):
        role_table(entries[:-1], "encoder_self", 2, 3)


def maps():
    enc = [entry(layer, h, prev=0.3 + 0.01 * h) for layer in range(2) for h in range(4)]
    cross = [entry(layer, h, aer=80 - 10 * layer - h) for layer in range(3) for h in range(4)]
    return [("encoder_self", *role_table(enc, "encoder_self", 2, 4)), ("cross", *role_table(cross, "cross", 3, 4))]


def test_the_role_maps_write_each_head_s_label_and_carry_clicks():
    fig = head_roles_figure(maps(), "Roles", selected=(1, 2, 3))
    assert isinstance(fig, go.Figure)
    heats = [t for t in fig.data if t.type == "heatmap"]
    markers = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in heats] == ["encoder_self", "cross"] and len(markers) == 2
    assert heats[0].text[1][3] == "prev 33%" and heats[1].text[2][3] == "AER 57"
    assert np.asarray(heats[1].z).shape == (3, 4) and heats[1].z[2][3] == pytest.approx(0.43)
    # each kind on its own axes, the first kind on top, layer 0 at the top of each
    assert (heats[0].yaxis, heats[1].yaxis) == ("y", "y2")
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]
    assert list(fig.layout.yaxis2.ticktext) == ["layer 0", "layer 1", "layer 2"] and fig.layout.yaxis2.range[0] > 0
    # markers: customdata (kind index, layer, head) for every head, and a click reads one back
    cd = np.asarray(markers[1].customdata)
    assert cd.shape == (12, 3) and {tuple(row) for row in cd} == {(1, a, b) for a in range(3) for b in range(4)}
    assert roles_selection([{"customdata": [1, 2, 3]}]) == (1, 2, 3)
    assert roles_selection([{"customdata": {"0": 0, "1": 1, "2": 2}}]) == (0, 1, 2)
    assert roles_selection([{"customdata": [1, 2]}, {}]) is None
    # the selected head is framed on its kind's axes
    (frame,) = fig.layout.shapes
    assert (frame.xref, frame.yref, frame.x0, frame.y0) == ("x2", "y2", 2.5, 1.5)


def test_the_role_maps_refuse_disagreeing_shapes():
    (kind, values, labels, hovers), other = maps()
    with pytest.raises(ValueError, match="labels must be"):
        head_roles_figure([(kind, values, labels[:1], hovers)])
    with pytest.raises(ValueError, match="same number of heads"):
        head_roles_figure([(kind, values, labels, hovers), ("cross", np.zeros((1, 2)), [["a", "b"]], None)])
    with pytest.raises(ValueError):
        head_roles_figure([])


SRC = ["A", "man", "<b>rides</b>"]
OUT = ["Ein", "Mann", "fährt", "."]


def test_the_alignment_draws_a_line_per_link_from_the_source_word_above_to_the_output_word_below():
    links = {(0, 0), (1, 1), (2, 2)}
    fig = alignment_figure(SRC, OUT, links, "Alignment")
    assert figure_links(fig) == [(0, 0), (1, 1), (2, 2)]
    xs, xt = word_positions(3), word_positions(4)
    for trace, (i, j) in zip(fig.data, sorted(links)):
        assert list(trace.x) == pytest.approx([xs[i], xt[j]]) and list(trace.y) == [1.0, 0.0]
        assert trace.line.color == LINK
    # the words with their indices: source on the top axis, output on the bottom one, escaped
    assert list(fig.layout.xaxis2.ticktext) == ["A₀", "man₁", "&lt;b&gt;rides&lt;/b&gt;₂"]
    assert fig.layout.xaxis2.side == "top" and fig.layout.xaxis.side == "bottom"
    assert list(fig.layout.xaxis.ticktext) == ["Ein₀", "Mann₁", "fährt₂", ".₃"]
    assert list(fig.layout.xaxis.tickvals) == pytest.approx(xt)
    # the hover says the pair, escaped
    assert "source 2 &lt;b&gt;rides&lt;/b&gt; ↔ output 2 fährt" in fig.data[2].hovertemplate
    assert "3 links" in fig.layout.title.text and "AER" not in fig.layout.title.text


def test_with_gold_the_links_are_coloured_the_missed_shown_and_the_aer_noted():
    fig = alignment_figure(SRC, OUT, [(0, 0), (1, 2)], gold_sure={(0, 0), (2, 2)}, gold_possible={(1, 2)},
                           aer=25.0)
    by_name = {t.name: t for t in fig.data}
    assert by_name["link 0-0"].line.color == HIT and by_name["link 1-2"].line.color == HIT
    assert by_name["missed 2-2"].line.color == MISSED and by_name["missed 2-2"].line.dash == "dot"
    assert figure_links(fig) == [(0, 0), (1, 2)]
    assert "AER 25.0" in fig.layout.title.text
    wrong = alignment_figure(SRC, OUT, [(0, 1)], gold_sure={(0, 0)})
    assert {t.name: t.line.color for t in wrong.data if t.name.startswith(("link", "missed"))} == {
        "link 0-1": MISS, "missed 0-0": MISSED}


def test_the_alignment_refuses_links_outside_the_words_and_draws_none_without_links():
    with pytest.raises(ValueError, match="outside 3 source words x 4 output words"):
        alignment_figure(SRC, OUT, [(3, 0)])
    with pytest.raises(ValueError, match="outside"):
        alignment_figure(SRC, OUT, [], gold_sure={(0, 4)})
    with pytest.raises(ValueError, match="not strings"):
        alignment_figure("A man", OUT, [])
    empty = alignment_figure(SRC, OUT, [])
    assert figure_links(empty) == [] and "0 links" in empty.layout.title.text
    assert list(empty.layout.xaxis2.ticktext)[0] == "A₀"


def test_source_words_too_many_to_stand_upright_move_the_plot_below_the_title():
    """Tilted source words grow up into the top margin: it grows by their height, so they stay clear
    of the title and its note (a 22-word sentence on a projector ran into the note)."""
    few = alignment_figure(["A", "dog", "."], ["Ein", "Hund", "."], [(0, 0), (1, 1), (2, 2)], "Alignment")
    words = ("A young man in a red jacket and a black hat is riding his old bicycle down a narrow street "
             "today .").split()
    many = alignment_figure(words, words, [(i, i) for i in range(len(words))], "Alignment")
    assert many.layout.margin.t >= few.layout.margin.t + 0.5 * 0.62 * 12 * len("bicycle₁₅")
