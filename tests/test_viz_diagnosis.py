"""viz.diagnosis and the diagnosis marks of token_probability_html, through the figure and the HTML."""
import numpy as np
import plotly.graph_objects as go
import pytest

from viz.diagnosis import (diagnosis_figure, diagnosis_selection, diagnosis_summary, source_strip_html,
                           words_of)

OUTPUT = ["▁Ein", "▁Hund", "</s>"]
SOURCE = ["▁A", "▁ca", "t", "</s>"]


def figure(**kwargs):
    return diagnosis_figure([0.1, 0.8, 0.2], OUTPUT, [0.1, 0.9, 0.95, 0.0], SOURCE,
                            output_evidence={"log_p": [-0.1, -3.0, -0.2], "pmi": [1.0, 0.0, 2.0]},
                            source_evidence={"deletion_drop": [2.0, 0.0, 0.0, 1.0]}, **kwargs)


def test_every_score_sits_above_its_evidence_flagged_bars_coloured():
    fig = figure(title="<b>t</b>")
    assert [t.name for t in fig.data] == ["unsupported score", "log p (nats)", "source gain (nats)",
                                         "left-out score", "drop without it (nats)"]
    np.testing.assert_allclose(fig.data[0].y, [0.1, 0.8, 0.2], rtol=1e-6)
    assert list(fig.data[0].marker.color) == ["#c9c9c9", "#7b3294", "#c9c9c9"]       # purple: unsupported
    assert list(fig.data[3].marker.color) == ["#c9c9c9", "#1b7837", "#1b7837", "#c9c9c9"]   # green: left out
    # the output panels share one piece axis, the source panels another; the last of each names the pieces
    assert fig.layout.xaxis2.matches == "x" and fig.layout.xaxis3.matches == "x" and fig.layout.xaxis5.matches == "x4"
    assert list(fig.layout.xaxis3.ticktext) == ["▁Ein", "▁Hund", "&lt;/s&gt;"] and not fig.layout.xaxis.showticklabels
    assert fig.layout.title.text == "&lt;b&gt;t&lt;/b&gt;"
    assert [a.text for a in fig.layout.annotations] == [f"<b>{t.name}</b>" for t in fig.data]   # each panel named
    domains = [fig.layout[f"yaxis{'' if k == 0 else k + 1}"].domain for k in range(5)]
    assert all(lo < hi and 0 <= lo and hi <= 1 for lo, hi in domains)
    assert all(domains[k + 1][1] < domains[k][0] for k in range(4))                    # no overlap
    go.Figure(fig.to_dict())                                                             # validates


def test_a_click_names_the_output_step_and_only_an_output_bar_does():
    fig = figure()
    points = [{"curve_number": 1, "point_index": 2, "customdata": list(fig.data[1].customdata[2])}]
    assert diagnosis_selection({"selection": {"points": points}}) == 2
    assert diagnosis_selection([{"customdata": list(fig.data[3].customdata[1])}]) is None     # a source bar
    assert diagnosis_selection({"selection": {"points": []}}) is None


def test_shapes_that_disagree_are_errors():
    with pytest.raises(ValueError):
        diagnosis_figure([0.1, 0.2], OUTPUT, [0.1] * 4, SOURCE)
    with pytest.raises(ValueError):
        diagnosis_figure([0.1] * 3, OUTPUT, [0.1] * 4, SOURCE, output_evidence={"log_p": [0.0]})
    with pytest.raises(ValueError):
        source_strip_html(SOURCE, [0.1])


def test_source_strip_frames_left_out_pieces_and_escapes():
    html = source_strip_html(["▁<script>", "▁**b**", "</s>"], [0.9, 0.1, 0.0])
    assert "<script" not in html and "**" not in html
    assert html.count("aa-omitted") == 1 and "left out? 0.90" in html and "aa-legend-omitted" in html
    assert "aa-legend-omitted" not in source_strip_html(SOURCE, [0.0] * 4)


def test_the_summary_names_what_was_found_or_that_nothing_was():
    flags = [("hallucination", 1, 2, 0.8), ("omission", 1, 3, 0.9)]
    assert diagnosis_summary(flags, OUTPUT, SOURCE) == ("“Hund” looks unsupported by the source; "
                                                        "“cat” in the source looks left out.")
    assert diagnosis_summary([], OUTPUT, SOURCE) == "Nothing looks unsupported by the source or left out."
    assert words_of(["▁a"] * 40, limit=10) == "a a a a a…"


def test_the_summary_names_a_flagged_end_of_sentence_in_words_not_markup():
    output = ["▁Ein", "▁Hund", "</s>"]
    text = diagnosis_summary([("hallucination", 2, 3, 0.7)], output, SOURCE)
    assert text == "The end of the sentence looks unsupported by the source."
    assert "</s>" not in text and "“" not in text


def test_token_strip_frames_unsupported_pieces_apart_from_the_shading():
    from viz import token_probability_html
    html = token_probability_html(["▁a", "<b>", "</s>"], [0.9, 0.2, 0.99], unsupported=[0.1, 0.9, 0.5],
                                  note="Diagnosis: <i>x</i> **y**")
    assert html.count('aa-unsupported"') == 2 and "border:2px dashed #7b3294" in html   # at the threshold too
    assert 'title="step 2: &lt;b&gt; p=0.200 · unsupported by the source? 0.90"' in html
    assert "aa-legend-unsupported" in html and "<i>" not in html and "**" not in html
    plain = token_probability_html(["▁a"], [0.9], unsupported=[0.1])
    assert "aa-unsupported" not in plain and "aa-legend-unsupported" not in plain and "unsupported 0.10" in plain
    with pytest.raises(ValueError):
        token_probability_html(["▁a"], [0.9], unsupported=[0.1, 0.2])


def test_built_figure_equals_its_validated_rebuild_and_serialises_fast():
    import json

    from test_viz import drop_empty
    fig = figure(title="<s> x", show_space=True)
    rebuilt = go.Figure(fig.to_dict())
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))
    import orjson                      # plotly.io's fast path: no Python walk of the figure
    orjson.dumps(fig.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
