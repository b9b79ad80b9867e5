"""Tests for viz.ablation: the translation diff and the per-step probability change."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:          # plain `pytest` puts tests/, not the repo, on the path
    sys.path.insert(0, str(ROOT))

from viz.ablation import (changed_count, diff_html, piece_diff,  # noqa: E402
                          probability_change_figure, probability_change_table)

OLD = ["▁Ein", "▁Mann", "▁läuft", "</s>"]
NEW = ["▁Ein", "▁Hund", "▁läuft", "▁schnell", "</s>"]       # one replaced, one inserted


def test_importing_viz_ablation_pulls_in_neither_streamlit_nor_torch():
    code = ("import sys, viz.ablation; bad = [m for m in ('torch', 'streamlit', 'transformer') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- piece_diff

def test_piece_diff_identical_is_one_equal_block():
    assert piece_diff(OLD, OLD) == [("equal", OLD, OLD)]
    assert piece_diff([], []) == []


def test_piece_diff_replace_insert_delete():
    assert piece_diff(["a", "b", "c"], ["a", "x", "c"]) == [
        ("equal", ["a"], ["a"]), ("replace", ["b"], ["x"]), ("equal", ["c"], ["c"])]
    assert piece_diff(["a", "c"], ["a", "b", "c"]) == [
        ("equal", ["a"], ["a"]), ("insert", [], ["b"]), ("equal", ["c"], ["c"])]
    assert piece_diff(["a", "b", "c"], ["a", "c"]) == [
        ("equal", ["a"], ["a"]), ("delete", ["b"], []), ("equal", ["c"], ["c"])]
    blocks = piece_diff(OLD, NEW)
    assert [tag for tag, _, _ in blocks] == ["equal", "replace", "equal", "insert", "equal"]
    # the blocks rebuild both sides exactly
    assert sum((a for _, a, _ in blocks), []) == OLD and sum((b for _, _, b in blocks), []) == NEW


def test_piece_diff_rejects_a_bare_string():
    with pytest.raises(ValueError):
        piece_diff("abc", ["a"])


def test_changed_count():
    assert changed_count(OLD, OLD) == 0
    assert changed_count(OLD, NEW) == 2                     # ▁Hund replaced, ▁schnell inserted
    assert changed_count(["a", "b"], ["a"]) == 0            # a pure deletion leaves no new piece
    assert changed_count(["a"], ["x", "y", "z"]) == 3


# --------------------------------------------------------------------------- diff_html

def test_diff_html_marks_exactly_the_changed_pieces():
    old_html = diff_html(OLD, NEW, side="old")
    new_html = diff_html(OLD, NEW, side="new")
    assert old_html.count("atlas-changed") == 1             # ▁Mann
    assert new_html.count("atlas-changed") == 2             # ▁Hund, ▁schnell
    assert old_html.count("<span") == len(OLD) and new_html.count("<span") == len(NEW)
    assert "line-through" in old_html and "line-through" not in new_html
    changed = [s for s in new_html.split("<span")[1:] if "atlas-changed" in s]
    assert "▁Hund" in changed[0] and "▁schnell" in changed[1]
    assert all("title=" in s and "background-color:" in s and ";color:" in s for s in changed)
    unchanged = [s for s in new_html.split("<span")[1:] if "atlas-changed" not in s]
    assert all("background-color" not in s for s in unchanged)


def test_diff_html_identical_marks_nothing_and_deletion_marks_old_side():
    assert "atlas-changed" not in diff_html(OLD, OLD, side="old")
    assert "atlas-changed" not in diff_html(OLD, OLD, side="new")
    old_html = diff_html(["a", "b"], ["a"], side="old")
    assert old_html.count("atlas-changed") == 1 and 'title="removed"' in old_html
    assert 'title="inserted"' in diff_html(["a"], ["a", "b"], side="new")


def test_diff_html_escapes_pieces_and_is_one_line():
    old = ["<script>alert(1)</script>", "</s>"]
    new = ["<s>", "**b**", "</s>"]
    for side in ("old", "new"):
        html = diff_html(old, new, side=side)
        assert "<script" not in html and "</script" not in html
        assert "<s>" not in html and "</s>" not in html and "**" not in html
        assert "&lt;" in html and "\n" not in html and html.startswith("<div")
    assert "&lt;script&gt;" in diff_html(old, new, side="old")
    # the other side's text in the title attribute is escaped too
    title = diff_html(['"><img src=x>'], ["a"], side="new")
    assert "<img" not in title and '"><img' not in title and "&quot;&gt;&lt;img" in title


def test_diff_html_show_space_and_bad_side():
    assert "␣Mann" in diff_html(OLD, NEW, side="old", show_space=True)
    plain = diff_html(OLD, NEW, side="old")
    assert "▁Mann" in plain and "␣" not in plain
    with pytest.raises(ValueError):
        diff_html(OLD, NEW, side="both")


# --------------------------------------------------------------------------- probability change

PIECES = ["▁Ein", "<unk>", "</s>"]
BEFORE = [0.9, 0.4, 0.8]
AFTER = [0.5, 0.45, 0.1]


def test_probability_change_figure_traces_and_change():
    fig = probability_change_figure(PIECES, BEFORE, AFTER, title="Layer 1 off")
    names = [t.name for t in fig.data]
    assert names == ["original", "ablated", "change"]
    original, ablated, change = fig.data
    assert original.type == ablated.type == "bar"
    np.testing.assert_allclose(original.y, BEFORE)
    np.testing.assert_allclose(ablated.y, AFTER)
    np.testing.assert_allclose(change.y, np.subtract(AFTER, BEFORE))
    assert list(original.x) == list(ablated.x) == list(change.x) == [0, 1, 2]
    assert "%{customdata[1]}" in original.hovertemplate and "change" in change.hovertemplate
    assert original.customdata[1][1] == "&lt;unk&gt;"
    np.testing.assert_allclose([row[2:] for row in change.customdata],
                               np.column_stack([BEFORE, AFTER, np.subtract(AFTER, BEFORE)]))


def test_probability_change_figure_axes_ticks_and_range():
    fig = probability_change_figure(PIECES, BEFORE, AFTER)
    assert fig.layout.xaxis.title.text == "Output piece (forced)"
    assert fig.layout.yaxis.title.text == "Probability"
    assert list(fig.layout.yaxis.range) == [0, 1]
    assert list(fig.layout.xaxis.ticktext) == ["▁Ein", "&lt;unk&gt;", "&lt;/s&gt;"]
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2]
    lo, hi = fig.layout.yaxis2.range                        # the drop of 0.7 is in view
    assert lo <= -0.7 and hi >= 0.7 and lo == -hi
    assert list(probability_change_figure(PIECES, BEFORE, AFTER, show_space=True)
                .layout.xaxis.ticktext)[0] == "␣Ein"
    assert probability_change_figure(PIECES, BEFORE, AFTER, height=300).layout.height == 300


def test_probability_change_title_escaped_and_edits_validated():
    fig = probability_change_figure(PIECES, BEFORE, AFTER, title="<s> off", show_space=True)
    assert "<s>" not in fig.layout.title.text
    with pytest.raises(ValueError):
        fig.update_layout(height=5)             # later edits are validated again


@pytest.mark.parametrize("pieces, before, after", [
    (PIECES, BEFORE[:2], AFTER),                # length mismatches
    (PIECES, BEFORE, AFTER[:2]),
    (PIECES[:2], BEFORE, AFTER),
    (PIECES, [0.9, 1.5, 0.8], AFTER),           # out of [0, 1]
    (PIECES, BEFORE, [0.5, -0.2, 0.1]),
    (PIECES, [0.9, np.nan, 0.8], AFTER),        # not finite
    (PIECES, BEFORE, [0.5, np.inf, 0.1]),
    ("abc", BEFORE, AFTER),                     # a string, not pieces
])
def test_probability_change_rejects_bad_input(pieces, before, after):
    with pytest.raises(ValueError):
        probability_change_figure(pieces, before, after)
    with pytest.raises(ValueError):
        probability_change_table(pieces, before, after)


def test_probability_change_table():
    table = probability_change_table(PIECES, BEFORE, AFTER)
    assert list(table.columns) == ["step", "piece", "original", "ablated", "change"]
    assert table["step"].tolist() == [1, 2, 3]
    assert table["piece"].tolist() == PIECES                # raw text: a dataframe is not HTML
    np.testing.assert_allclose(table["original"], BEFORE)
    np.testing.assert_allclose(table["ablated"], AFTER)
    np.testing.assert_allclose(table["change"], np.subtract(AFTER, BEFORE))
    assert probability_change_table([], [], []).empty
