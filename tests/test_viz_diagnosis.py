"""viz.diagnosis and the diagnosis marks of token_probability_html, through the figure and the HTML."""
import numpy as np
import plotly.graph_objects as go
import pytest

from viz.diagnosis import (NOTHING_FLAGGED, diagnosis_figure, diagnosis_selection, diagnosis_summary,
                           source_strip_html, strongest_unflagged, words_of)

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
    assert diagnosis_summary([], OUTPUT, SOURCE) == NOTHING_FLAGGED
    assert words_of(["▁a"] * 40, limit=10) == "a a a a a…"


def test_the_summary_says_what_the_model_expected_instead_of_an_unsupported_word():
    flags = [("hallucination", 1, 2, 0.8), ("omission", 1, 3, 0.9)]
    text = diagnosis_summary(flags, OUTPUT, SOURCE, expected={1: ("▁Katze", "▁ca" + "t")})
    assert text == ("“Hund” (the model expected “Katze” for “cat”) looks unsupported by the source; "
                    "“cat” in the source looks left out.")
    # only the span that starts there; a detached sentence keeps the note in its second sentence
    assert "expected" not in diagnosis_summary(flags, OUTPUT, SOURCE, expected={0: ("▁Katze", "▁cat")})
    assert "(the model expected “Katze” for “cat”)" in diagnosis_summary(flags, OUTPUT, SOURCE, detached=0.95,
                                                                        expected={1: ("▁Katze", "▁cat")})


def test_the_summary_says_which_word_fits_back_in_for_a_left_out_one():
    flags = [("omission", 1, 3, 0.9)]
    assert diagnosis_summary(flags, OUTPUT, SOURCE, put_back={1: "▁Katze"}) == (
        "“cat” in the source looks left out (the translation is likelier with “Katze” put back).")
    assert diagnosis_summary(flags, OUTPUT, SOURCE, put_back={0: "▁Katze"}) == "“cat” in the source looks left out."


def test_an_unsure_summary_names_the_likeliest_unflagged_word():
    source = ["▁A", "▁man", "▁is", "▁riding", "▁a", "▁bi", "ke", ".", "</s>"]
    output = ["▁Ein", "▁Mann", "▁fährt", ".", "</s>"]
    omission = [0.01, 0.0, 0.01, 0.01, 0.02, 0.28, 0.28, 0.0, 0.0]
    candidate = strongest_unflagged([0.0, 0.1, 0.0, 0.0, 0.0], omission, output, source)
    assert candidate == ("omission", 5, 7, pytest.approx(0.28))
    text = diagnosis_summary([], output, source, probs=[0.9, 0.9, 0.9, 1e-4, 0.9], candidate=candidate)
    assert text.startswith("No word is flagged, but the model is unsure") and text.endswith(
        "The likeliest left-out word is “bike” in the source (score 0.28, under the flag threshold).")
    # a confident translation, or a candidate too weak to point at, names none
    assert diagnosis_summary([], output, source, probs=[0.9] * 5, candidate=candidate) == \
        NOTHING_FLAGGED
    assert "likeliest" not in diagnosis_summary([], output, source, unsure=True, candidate=("omission", 5, 7, 0.1))
    # flagged words (at or above the threshold) are never the candidate
    assert strongest_unflagged([0.0, 0.9, 0.0, 0.0, 0.0], omission, output, source)[0] == "omission"
    assert strongest_unflagged([0.0] * 5, [0.0] * 9, output, source) is None


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


def y_numbers(fig, axis_name: str) -> tuple[list, float, float]:
    """(tickvals, px between the closest two, the labels' font size) of one panel's y axis, as the
    figure is laid out: its domain of the plot's height (the figure's less its margins)."""
    axis, margin = fig.layout[axis_name], fig.layout.margin
    panel_px = (axis.domain[1] - axis.domain[0]) * (fig.layout.height - margin.t - margin.b)
    ticks = sorted(float(v) for v in axis.tickvals)
    px = panel_px / (axis.range[1] - axis.range[0])
    pitch = min((b - a) * px for a, b in zip(ticks, ticks[1:])) if len(ticks) > 1 else float("inf")
    return ticks, pitch, (axis.tickfont.size if axis.tickfont and axis.tickfont.size else 12)


def many_panels(height: int):
    """The app's six panels (two scores, four evidence signals): ~14 px each in 300 px, ~27 px in the
    app's 470 px, ~100 px in 1400 px."""
    rng = np.random.default_rng(0)
    out = {"log_p": (rng.random(22) * 14 - 12).tolist(), "pmi": (rng.random(22) * 12 - 1).tolist()}
    src = {"deletion_drop": (rng.random(20) * 18 - 6).tolist(), "unmet_demand": rng.random(20).tolist()}
    return diagnosis_figure(rng.random(22), [f"▁o{i}" for i in range(22)], rng.random(20),
                            [f"▁s{i}" for i in range(20)], output_evidence=out, source_evidence=src,
                            title="t", note="n", height=height)


@pytest.mark.parametrize("height", [300, 470, 1400])
def test_a_short_panel_keeps_its_y_numbers_apart(height):
    """Presenter mode at 1280x720 drew "0", "−5", "−10" on top of each other in the ~23 px log p
    panel (plotly.js's three automatic numbers). Every y axis now carries its numbers: three where
    they stand two font sizes apart, else two (or one), never closer than the font size + 4 px;
    presenter_figure's thinning keeps the far end, not 0."""
    from viz import presenter_figure
    fig = many_panels(height)
    axes = [f"yaxis{'' if k == 0 else k + 1}" for k in range(6)]
    counts = []
    for figure in (fig, presenter_figure(fig, max_height=480)):
        for name in axes:
            ticks, pitch, font = y_numbers(figure, name)
            assert 1 <= len(ticks) <= 3 and pitch >= font + 4, (height, name, ticks, pitch, font)
            assert any(t != 0 for t in ticks), (name, ticks)                   # not 0 alone
            lo, hi = figure.layout[name].range
            assert all(lo <= t <= hi for t in ticks), (name, ticks, lo, hi)   # every number drawn
        counts.append([len(y_numbers(figure, name)[0]) for name in axes])
    panel = fig.layout.yaxis2.domain[1] - fig.layout.yaxis2.domain[0]
    panel_px = panel * (height - fig.layout.margin.t - fig.layout.margin.b)
    if panel_px < 50:
        assert max(counts[0]) <= 2, (panel_px, counts)
    if height == 1400:                                 # room: the scores keep their threshold too
        assert counts[0][0] == 3 and list(fig.layout.yaxis.tickvals) == [0, 0.5, 1]
        assert all(count == 3 for count in counts[0]), counts
    assert fig.layout.title.text == "t<br><sup>n</sup>" and fig.layout.margin.t > 50   # two title lines


def test_evidence_numbers_are_round_and_near_the_bars_ends():
    from viz.diagnosis import value_ticks
    span, ticks = value_ticks([-13.8, -1.0, 0.0], 23)
    assert ticks == [-12.0, 0.0] and span[0] < -13.8 and span[1] == 0.0
    assert value_ticks([-13.8, 0.0], 80)[1] == [-12.0, -6.0, 0.0]
    assert value_ticks([-5.2, 11.0], 23)[1] == [10.0, -5.0]          # 0 too close to 10: both ends
    assert value_ticks([0.0, 0.0], 23) == ([0.0, 1.05], [1.0, 0.0])  # nothing to draw: still a scale
    assert value_ticks([0.3, 0.05], 8)[1] == [0.3]                   # no room for two
