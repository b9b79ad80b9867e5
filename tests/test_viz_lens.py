"""viz.lens through what it draws: the logit lens grid (cell text = the lens's top-1 piece, colour =
p(chosen), hover = the cell's top-k, click markers), the one sentence "at which layer does the model
know the word?" on arrays with known answers, and the DecoderLens table aligned by step."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from viz import escape_label
from viz.lens import (decision_sites, decoder_lens_frame, lens_selection, lens_sentence,
                      logit_lens_figure, site_label, site_layers)

SITES = ["L0.self", "L0.cross", "L0.ffn", "L1.self", "L1.cross", "L1.ffn"]
OUTPUT = ["▁Ein", "▁Fahrrad", "</s>"]


def lens_arrays(seed: int = 0, k: int = 3):
    """(chosen_prob (3, 6), top pieces (3, 6, k), top probs (3, 6, k), chosen_rank (3, 6)), distinct per cell."""
    rng = np.random.default_rng(seed)
    prob = rng.uniform(0, 1, (3, 6)).astype(np.float32)
    pieces = [[[f"p{t}{j}_{i}" for i in range(k)] for j in range(6)] for t in range(3)]
    top = np.sort(rng.uniform(0, 1, (3, 6, k)), axis=-1)[..., ::-1].astype(np.float32)
    rank = rng.integers(0, 5, (3, 6)).astype(np.int32)
    return prob, pieces, top, rank


def test_the_grid_writes_each_cell_s_top_piece_and_colours_it_by_p_chosen():
    prob, pieces, top, rank = lens_arrays()
    fig = logit_lens_figure(prob, pieces, top, OUTPUT, SITES, "Lens", chosen_rank=rank)
    assert isinstance(fig, go.Figure)
    heat = fig.data[0]
    assert heat.type == "heatmap" and (heat.zmin, heat.zmax) == (0.0, 1.0)
    # rows: the last site on top; columns: steps
    assert list(fig.layout.yaxis.ticktext) == [site_label(s) for s in SITES[::-1]]
    assert fig.layout.yaxis.ticktext[0] == "layer 1 · FFN"
    assert list(fig.layout.xaxis.ticktext) == ["▁Ein", "▁Fahrrad", "&lt;/s&gt;"]
    z = np.asarray(heat.z, dtype=float)
    assert z.shape == (6, 3)
    for row, site in enumerate(range(5, -1, -1)):
        for t in range(3):
            assert z[row, t] == pytest.approx(float(prob[t, site]))
            assert heat.text[row][t] == pieces[t][site][0]                    # the lens's top-1 there
            hover = heat.hovertext[row][t]
            assert f"step {t + 1} → {fig.layout.xaxis.ticktext[t]}" in hover and site_label(SITES[site]) in hover
            assert f"rank {rank[t, site] + 1}" in hover and "p(" in hover
            for i, piece in enumerate(pieces[t][site]):                      # the cell's top-k, in order
                assert f"{i + 1}. {piece}  {top[t, site, i]:.3f}" in hover
    assert heat.texttemplate == "%{text}"


def test_cell_text_is_cut_to_the_column_and_escaped_only_when_no_size_holds_it():
    prob, pieces, top, _ = lens_arrays()
    pieces[1][5][0] = "<b>" + "x" * 60
    fig = logit_lens_figure(prob, pieces, top, OUTPUT, SITES, width=600)
    cell = fig.data[0].text[0][1]                                              # last site, step 2
    assert cell.startswith("&lt;b&gt;") and cell.endswith("…") and len(cell) < 40
    assert "<b>" not in str(fig.data[0].hovertext[0][1])
    assert fig.data[0].textfont.size == 11, "a hopeless piece does not shrink the others"


def test_a_long_piece_is_shown_whole_in_two_lines_or_smaller_type():
    """Issue 52: presenter mode cut the lens's pieces ("ju…", "bl…"). A piece that does not fit its
    cell loses its ▁, then breaks over two lines, and the grid's type shrinks until two lines fit."""
    from viz import presenter_figure
    words = "▁Ein ▁Mann ▁in ▁einer ▁roten ▁Jacke ▁fährt ▁mit ▁seine m ▁Fahrrad ▁eine ▁schmale ▁Straße ▁entlang . </s>"
    sites = [f"L{i // 3}.{('self', 'cross', 'ffn')[i % 3]}" for i in range(9)]
    for cell_font in (14, 11):                            # presenter mode's, a plain page's
        output = words.split()
        T = len(output)
        top = [[[output[t]] for _ in sites] for t in range(T)]
        fig = logit_lens_figure(np.full((T, 9), 0.5), top, np.full((T, 9, 1), 0.5), output, sites, "Lens",
                                cell_font=cell_font, height=420)
        heat = fig.data[0]
        for t, piece in enumerate(output):
            text = heat.text[0][t]
            assert "…" not in text and text.replace("<br>", "") in (escape_label(piece), escape_label(piece[1:])), text
            assert text.count("<br>") <= 1
        assert any("<br>" in text for text in heat.text[0]), "the test needs a piece too wide for one line"
        assert 9 <= heat.textfont.size <= cell_font
        big = presenter_figure(fig, max_height=440)
        assert big.data[0].textfont.size == heat.textfont.size, "presenter type keeps the size the cells fit"


def test_each_cell_carries_a_click_marker_that_names_site_and_step():
    prob, pieces, top, _ = lens_arrays()
    fig = logit_lens_figure(prob, pieces, top, OUTPUT, SITES)
    markers = fig.data[1]
    assert markers.type == "scatter" and len(markers.x) == 18
    for x, y, cd in zip(markers.x, markers.y, markers.customdata):
        assert cd[1] == x and cd[0] == 5 - y                                 # row y shows site 5 - y
    assert lens_selection([{"customdata": [4, 2]}]) == (4, 2)
    assert lens_selection([{"customdata": {"0": 1, "1": 0}}]) == (1, 0)       # Streamlit's typed-array form
    assert lens_selection([{"x": 1}]) is None and lens_selection([]) is None


def test_a_selected_cell_is_framed():
    prob, pieces, top, _ = lens_arrays()
    fig = logit_lens_figure(prob, pieces, top, OUTPUT, SITES, selected=(0, 2))
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (1.5, 2.5, 4.5, 5.5)   # step 3, the bottom row
    assert not logit_lens_figure(prob, pieces, top, OUTPUT, SITES).layout.shapes


@pytest.mark.parametrize("change", ["prob_rows", "prob_cols", "top_probs", "pieces", "rank", "site", "string"])
def test_disagreeing_shapes_are_refused(change):
    prob, pieces, top, rank = lens_arrays()
    args = dict(chosen_prob=prob, top_pieces=pieces, top_probs=top, output_tokens=OUTPUT, sites=SITES,
                chosen_rank=rank)
    if change == "prob_rows":
        args["chosen_prob"] = prob[:2]
    elif change == "prob_cols":
        args["sites"] = SITES[:5]
    elif change == "top_probs":
        args["top_probs"] = top[:, :4]
    elif change == "pieces":
        args["top_pieces"] = [row[:5] for row in pieces]
    elif change == "rank":
        args["chosen_rank"] = rank[:, :2]
    elif change == "site":
        args["sites"] = SITES[:5] + ["layer one"]
    else:
        args["output_tokens"] = "▁Ein ▁Fahrrad </s>"
    with pytest.raises(ValueError):
        logit_lens_figure(**args)


def test_probabilities_outside_0_1_are_refused():
    prob, pieces, top, _ = lens_arrays()
    with pytest.raises(ValueError):
        logit_lens_figure(prob + 1.5, pieces, top, OUTPUT, SITES)
    with pytest.raises(ValueError):
        logit_lens_figure(np.full((3, 6), np.nan), pieces, top, OUTPUT, SITES)


def ranks(*decided_at, n_sites: int = 6, never=()):
    """chosen_rank rows: rank 0 from site `decided_at[t]` on (rank 2 before it, and a wobble at 1
    two sites before, which must not count), rank 3 everywhere for the steps in `never`."""
    rows = []
    for t, first in enumerate(decided_at):
        row = [2] * n_sites
        if t in never:
            row = [3] * n_sites
            row[0] = 0                                              # top at the first site only
        else:
            row[first:] = [0] * (n_sites - first)
            if first >= 2:
                row[first - 2] = 0                                  # on top once, then not: not decided there
        rows.append(row)
    return np.array(rows, dtype=np.int32)


def test_decided_means_top_from_that_site_to_the_last():
    rank = ranks(0, 3, 5, 0, never={3})
    assert decision_sites(rank).tolist() == [0, 3, 5, -1]
    assert site_layers(SITES) == [0, 0, 0, 1, 1, 1]


def test_the_sentence_names_the_majority_layer_and_the_late_pieces():
    # 4 pieces decided in layer 0 (sites 0..2), one in layer 1 at its last site: "only at the last layer"
    tokens = ["▁Ein", "▁Mann", "▁fährt", "▁Fahrrad", "</s>"]
    rank = ranks(0, 1, 2, 5, 0)
    assert lens_sentence(rank, tokens, SITES) == (
        "Most pieces (4 of 5) are decided by decoder layer 0; '▁Fahrrad' only at the last layer.")
    assert lens_sentence(rank, tokens, SITES, show_space=True) == (
        "Most pieces (4 of 5) are decided by decoder layer 0; '␣Fahrrad' only at the last layer.")


def test_the_sentence_when_every_piece_is_decided_early_or_most_only_at_the_end():
    assert lens_sentence(ranks(0, 2, 1), OUTPUT, SITES) == "Every piece is decided by decoder layer 0."
    assert lens_sentence(ranks(3, 4, 0), OUTPUT, SITES) == "Every piece is decided by the last layer."
    assert lens_sentence(ranks(4), ["▁Ein"], SITES) == "The piece is decided by the last layer."


def test_the_sentence_with_three_layers_names_a_middle_layer_and_the_never_decided():
    sites = [f"L{i}.{s}" for i in range(3) for s in ("self", "cross", "ffn")]
    tokens = ["▁a", "▁b", "▁c", "▁d", "▁e", "▁f", "▁g"]
    # decided at layers 1, 1, 0, 1, 2, never, 2 (sites 3, 5, 1, 4, 8, -, 6)
    rank = ranks(3, 5, 1, 4, 8, 0, 6, n_sites=9, never={5})
    assert decision_sites(rank).tolist() == [3, 5, 1, 4, 8, -1, 6]
    assert lens_sentence(rank, tokens, sites) == (
        "Most pieces (4 of 7) are decided by decoder layer 1; '▁e' and '▁g' only at the last layer; "
        "'▁f' never (not the top piece at the last site).")


def test_the_sentence_names_a_piece_once_and_at_most_limit_pieces():
    tokens = ["▁x", "▁y", "▁y", "▁z", "▁w", "▁v", "▁u", "▁t", "▁s"]
    rank = ranks(0, 5, 5, 4, 3, 0, 0, 0, 0)
    assert lens_sentence(rank, tokens, SITES, limit=2) == (
        "Most pieces (5 of 9) are decided by decoder layer 0; '▁y', '▁z' and 1 more only at the last layer.")


def test_the_sentence_when_most_pieces_never_settle_and_bad_input():
    rank = ranks(0, 0, 0, never={0, 1})
    assert lens_sentence(rank, OUTPUT, SITES).startswith("Most pieces are never settled: 2 of 3")
    assert lens_sentence(np.zeros((0, 6), dtype=int), [], SITES) == "There are no output pieces to read."
    with pytest.raises(ValueError):
        lens_sentence(rank, OUTPUT[:2], SITES)
    with pytest.raises(ValueError):
        lens_sentence(rank, OUTPUT, SITES[:5])
    with pytest.raises(ValueError):
        lens_sentence(rank, OUTPUT, SITES[:5] + ["L1.attn"])


def test_the_decoder_lens_table_aligns_steps_like_the_what_if_table():
    rows = [("encoder layer 0", ["▁Ein", "▁Mann", "</s>"], [0.5, 0.4, 0.9]),
            ("encoder layer 1", ["▁Ein", "▁Junge", "▁fährt", "</s>"], [0.9, 0.3, 0.6, 0.95]),
            ("encoder layer 2 (the model)", ["▁Ein", "▁Mann", "▁fährt", "</s>"], [0.95, 0.8, 0.7, 0.99])]
    frame = decoder_lens_frame(rows, show_space=True)
    assert list(frame["from"]) == [label for label, _, _ in rows]
    assert list(frame.columns) == ["from", "total log p", "differs at", "1", "2", "3", "4"]
    assert frame.iloc[0].tolist()[3:] == ["␣Ein", "␣Mann", "</s>", ""]                    # a blank after it ends
    assert frame.iloc[1]["2"] == "␣Junge"
    assert frame["total log p"].tolist() == [round(math.log(0.5 * 0.4 * 0.9), 2),
                                             round(math.log(0.9 * 0.3 * 0.6 * 0.95), 2),
                                             round(math.log(0.95 * 0.8 * 0.7 * 0.99), 2)]
    # steps, from 1, where a row's piece is not the model's own (a shorter row differs where it has none)
    assert frame["differs at"].tolist() == ["3, 4", "2", ""]
    assert decoder_lens_frame(rows, model_row=0)["differs at"].tolist() == ["", "2, 3, 4", "3, 4"]


def test_the_decoder_lens_table_refuses_disagreeing_rows():
    with pytest.raises(ValueError):
        decoder_lens_frame([("a", ["▁x", "▁y"], [0.5])])
    with pytest.raises(ValueError):
        decoder_lens_frame([("a", ["▁x"], [1.5])])
    with pytest.raises(ValueError):
        decoder_lens_frame([("a", "▁x ▁y", [0.5, 0.5])])


def test_the_grid_equals_its_validated_rebuild_and_serialises_fast():
    """As tests/test_viz.py holds every builder: built without validation, equal to a validated rebuild."""
    from test_viz import drop_empty
    orjson = pytest.importorskip("orjson")
    import json
    prob, pieces, top, rank = lens_arrays()
    fig = logit_lens_figure(prob, pieces, top, OUTPUT, SITES, "<b>", chosen_rank=rank, show_space=True)
    rebuilt = go.Figure(fig.to_dict())
    assert [type(t) for t in rebuilt.data] == [type(t) for t in fig.data]
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))
    orjson.dumps(fig.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def test_a_window_of_steps_keeps_every_steps_number_for_hover_clicks_and_the_frame():
    """A phone draws a window of the steps (atlas_ui/views/logit_lens.py step_window): its hover,
    its clicks and its framed cell still name the step of the whole translation."""
    from atlas_ui.views.logit_lens import step_window
    assert step_window(0, 20, 4) == (0, 4) and step_window(10, 20, 4) == (8, 12)
    assert step_window(19, 20, 4) == (16, 20) and step_window(1, 3, 4) == (0, 3)
    T, n, k = 6, 3, 2
    prob = np.linspace(0, 1, T * n).reshape(T, n)
    pieces = [[["▁a", "▁b"] for _ in range(n)] for _ in range(T)]
    probs = np.full((T, n, k), 0.5)
    sites = ["L0.self", "L0.cross", "L0.ffn"]
    tokens = [f"▁w{t}" for t in range(T)]
    fig = logit_lens_figure(prob[2:5], pieces[2:5], probs[2:5], tokens[2:5], sites, first_step=2, selected=(1, 3))
    markers = [trace for trace in fig.data if trace.type == "scatter"][0]
    assert sorted({int(row[1]) for row in markers.customdata}) == [2, 3, 4]
    assert markers.hovertext[0].startswith("step 3 → ")
    assert fig.layout.shapes[0].x0 == 0.5                     # step 3 is the window's second column
