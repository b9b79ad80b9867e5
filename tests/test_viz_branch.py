"""viz.branch through what it draws: the side-by-side of two translations (HTML), the what-if
tree and the contrastive saliency map."""
from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.branch import branch_compare_html, branch_tree, contrast_figure, parting_step, total_log_prob

ORIGINAL = ["▁Ein", "▁Mann", "▁fährt", "</s>"]
BRANCH = ["▁Ein", "<b>x</b>", "▁Junge", "▁fährt", "</s>"]


def test_the_html_table_aligns_steps_escapes_pieces_and_frames_the_parting_step():
    html = branch_compare_html(ORIGINAL, [0.9, 0.8, 0.5, 0.99], BRANCH, [0.9, 0.05, 0.7, 0.6, 0.95], forced=2,
                               title="What if step 2 had been “<b>x</b>”?")
    assert "\n" not in html and "<b>" not in html              # one raw HTML block; no piece becomes markup
    rows = re.findall(r'<th class="aa-row".*?</tr>', html)
    assert len(rows) == 2
    cells = [re.findall(r'<td class="aa-piece"([^>]*)>(.*?)</td>', row) for row in rows]
    assert [len(c) for c in cells] == [5, 5]                   # max(T1, T2) columns each
    assert [text for _, text in cells[1]] == ["▁Ein", "&lt;b&gt;x&lt;/b&gt;", "▁Junge", "▁fährt", "&lt;/s&gt;"]
    assert cells[0][4] == (' style="border:none;padding:0"', "")  # the shorter run leaves a blank
    probs = [[float(p) for p in re.findall(r"p = ([0-9.]+)", "".join(a for a, _ in row))] for row in cells]
    assert probs == [[0.9, 0.8, 0.5, 0.99], [0.9, 0.05, 0.7, 0.6, 0.95]]
    assert ["forced" in attrs for attrs, _ in cells[1]] == [True, True, False, False, False]
    assert [("box-shadow" in attrs) for attrs, _ in cells[1]] == [False, True, False, False, False]   # step 2
    assert f"log p = {math.log(0.9 * 0.8 * 0.5 * 0.99):.2f}" in rows[0]
    assert f"log p = {math.log(0.9 * 0.05 * 0.7 * 0.6 * 0.95):.2f}" in rows[1]
    assert "they part at step 2" in html and "“&lt;b&gt;x&lt;/b&gt;”" in html
    # the strip's colours: white for a sure piece, orange for an unsure one
    assert "background:rgb(217,72,1)" not in cells[0][0][0] and "rgb(" in cells[1][1][0]
    assert "the same pieces" in branch_compare_html(["a"], [0.5], ["a"], [0.5])
    assert parting_step(["a", "b"], ["a", "b", "c"]) == 2       # one extends the other: part where it ends


def test_bad_inputs_raise_value_errors():
    with pytest.raises(ValueError, match="3 pieces but 2"):
        branch_compare_html(["a", "b", "c"], [0.5, 0.5], ["a"], [0.5])
    with pytest.raises(ValueError, match="within"):
        branch_compare_html(["a"], [1.5], ["a"], [0.5])
    with pytest.raises(ValueError, match="no pieces"):
        branch_compare_html(["a"], [0.5], [], [])
    with pytest.raises(ValueError, match="not a string"):
        branch_compare_html("ab", [0.5, 0.5], ["a"], [0.5])
    assert total_log_prob([0.5, 0.0]) == -math.inf


def test_the_tree_finds_each_branchs_parent():
    prefixes = [("a", "x"), ("a", "x", "y", "q"), ("b",), ("a", "x", "y", "q", "r", "s")]
    assert branch_tree(prefixes) == [(0, -1), (1, 0), (0, -1), (2, 1)]
    assert branch_tree([]) == []


def test_contrast_figure_shares_one_symmetric_diverging_scale():
    fig = contrast_figure([0.2, -0.6, 0.1], [0.3, -0.1], ["▁A", "▁man", "</s>"], ["<s>", "▁Ein"], "▁Mann", "▁Junge")
    go.Figure(fig.to_dict())
    source, prefix = fig.data
    assert list(source.z[0]) == [0.2, -0.6, 0.1] and list(prefix.z[0]) == [0.3, -0.1]
    for trace in fig.data:
        assert (trace.zmin, trace.zmax) == (-0.6, 0.6)         # ±max |score| on both sides
    assert list(fig.layout.xaxis.ticktext) == ["▁A", "▁man", "&lt;/s&gt;"]
    assert list(fig.layout.xaxis2.ticktext) == ["&lt;s&gt;", "▁Ein"]
    assert "“▁Mann” rather than “▁Junge”" in fig.layout.title.text
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        contrast_figure([0.1, 0.2], [0.3], ["a", "b", "c"], ["d"], "x", "y")
    with pytest.raises(ValueError, match="NaN"):
        contrast_figure([np.nan], [0.3], ["a"], ["d"], "x", "y")
