"""Browser tests of the analysis features, in Chromium: share links, clicks on beam nodes and head
statistics, ablation marks, downloads, presenter mode with the keyboard in light and dark themes, and
the README tour screenshots (tour-*.png, in docs/ only through `python -m tests.tour --out docs`)."""
from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, quote, urlencode, urlparse

import pytest

from atlas_ui.views import VIEWS
from browser_utils import (GROWN_MARGINS, NEEDS_BROWSER, SHARE_LINK, chart_share, click_point, pick_view, plot_state,
                           script_run, wait_charts_drawn, wait_for_plot, wait_for_text)

pytestmark = NEEDS_BROWSER
SENTENCE = "Two dogs play in the snow."


def link(base: str, **params) -> str:
    return f"{base}/?{urlencode(params, quote_via=quote)}"


PROJECTOR = (1280, 720)             # a projector's screen: the README's tour and presenter screenshots


def opened(pages, url: str, charts: int = 1, viewport=(1440, 1100), dark: bool = False):
    """A page on `url` after its first script run, with at least `charts` charts drawn (`dark`: in a
    browser whose system is in dark mode, browser_utils.new_page)."""
    page = pages.open(url, viewport=viewport, dark=dark)
    wait_charts_drawn(page, charts)
    return page


def chart_titles(page) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
                              .map(gd => (gd.layout && gd.layout.title && gd.layout.title.text) || '')""")


def test_a_shared_link_opens_exactly_that_view(pages, app_url):
    url = link(app_url, view="Decoding steps", kind="cross", layer=1, head=2, step=2, sentence=SENTENCE)
    page = opened(pages, url, charts=3)
    wait_for_text(page, "Step 3 of")
    assert page.locator('[data-testid="stTextArea"] textarea').first.input_value() == SENTENCE
    titles = chart_titles(page)
    assert any("Cross-attention over the source · layer 1 · head 2" in t for t in titles), titles
    # the sidebar's share box links to the same view
    share = page.locator(SHARE_LINK)
    query = parse_qs(urlparse(share.get_attribute("href")).query)
    assert query["view"] == ["Decoding steps"] and query["step_no"] == ["3"] and query["sentence"] == [SENTENCE]
    assert query["layer"] == ["1"] and query["head"] == ["2"]
    assert page.problems == []


def test_clicking_a_beam_node_shows_its_attention(pages, app_url):
    page = opened(pages, link(app_url, view="Beam", beam=4, sentence=SENTENCE), charts=2)
    wait_for_text(page, "on the returned path")
    nodes = page.evaluate("""() => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
                                     const t = gd._fullData[gd._fullData.length - 1];
                                     return {trace: gd._fullData.length - 1, custom: t.customdata}; }""")
    # a node off the returned path: step 2, the last hypothesis of that step
    target = max((i for i, (s, _) in enumerate(nodes["custom"]) if s == 1), key=lambda i: nodes["custom"][i][1])
    step, index = nodes["custom"][target]
    click_point(page, 0, nodes["trace"], target)
    wait_for_text(page, f"Node: step {step + 1}, hypothesis {index + 1}")
    # the node's attention has one row per piece of its hypothesis
    wait_for_plot(page, f"gd.layout.yaxis.ticktext.length === {step + 1}", index=1, timeout=60_000)
    assert page.problems == []


def test_head_summary_cell_opens_the_head_and_ablation_marks_changes(pages, app_url):
    page = opened(pages, link(app_url, view="Head summary"), charts=3)
    wait_for_plot(page, "gd.data.length > 1 && gd.data[1].type === 'scatter'")
    points = page.evaluate("""() => document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0]
                                    ._fullData[1].customdata""")
    target = next(i for i, (layer, head) in enumerate(points) if layer == 1 and head == 3)
    click_point(page, 0, 1, target)                 # waits for the run the click starts
    assert re.search(r"layer=1&head=3", page.url), page.url
    assert any("layer 1 · head 3" in t for t in chart_titles(page)), chart_titles(page)
    # a cell of a small multiple (the third map, in the chart under the large one) opens its head too
    points = page.evaluate("""() => document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[2]
                                    ._fullData[5].customdata""")
    target = next(i for i, (layer, head) in enumerate(points) if layer == 2 and head == 5)
    click_point(page, 2, 5, target)
    assert re.search(r"layer=2&head=5", page.url), page.url
    assert any("layer 2 · head 5" in t for t in chart_titles(page)), chart_titles(page)
    assert page.problems == []
    cross_off = ",".join(f"cross:{layer}:{head}" for layer in range(3) for head in range(8))
    page = opened(pages, link(app_url, view="Ablation", ablate=cross_off), charts=1)
    wait_for_text(page, "24 heads off")
    assert page.locator(".atlas-changed").count() > 0, "changed pieces are marked"
    assert page.problems == []


def test_trace_downloads_as_json(pages, app_url):
    page = opened(pages, link(app_url, view="Heatmap", sentence=SENTENCE))
    with script_run(page):                                # opening Export draws its buttons
        page.get_by_text("Export", exact=True).click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Trace (JSON)").click()
    doc = json.loads(open(download.value.path(), encoding="utf-8").read())
    S, T = len(doc["source_tokens"]), len(doc["output_tokens"])
    assert doc["source_tokens"][-1] == "</s>" and "rows = queries" in doc["schema"]
    assert [len(doc["cross"][0][0]), len(doc["cross"][0][0][0])] == [T, S]
    assert abs(sum(doc["encoder_self"][0][0][0]) - 1) < 1e-4
    assert page.problems == []


def presenter_round(page, screenshot) -> None:
    wait_for_text(page, "Step 1 of")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")   # no widget has focus
    for key, step in (("ArrowRight", 2), ("ArrowRight", 3), ("ArrowLeft", 2)):
        with script_run(page):                       # each key press is one button click, one run
            page.keyboard.press(key)
        assert f"Step {step} of" in page.locator('[data-testid="stMain"]').inner_text()
    assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "19px"
    assert page.locator('[data-testid="stHeader"]').is_hidden()
    assert not page.locator('[data-testid="stSidebar"]').first.is_visible()
    wait_charts_drawn(page, 3)
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000


def luminance(css_colour: str) -> float:
    r, g, b = [int(v) for v in re.findall(r"\d+", css_colour)[:3]]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_presenter_mode_keys_in_light_and_dark_themes(pages, app_url, screenshots):
    url = link(app_url, view="Decoding steps", present=1, sentence=SENTENCE)
    page = opened(pages, url, charts=3, viewport=PROJECTOR)          # the README shows it as a projector would
    presenter_round(page, screenshots / "presenter-light.png")
    assert luminance(page.evaluate("getComputedStyle(document.querySelector('.stApp')).backgroundColor")) > 200
    assert page.problems == []
    page = opened(pages, url, charts=3, viewport=PROJECTOR, dark=True)     # a visitor whose system is dark
    presenter_round(page, screenshots / "presenter-dark.png")
    assert luminance(page.evaluate("getComputedStyle(document.querySelector('.stApp')).backgroundColor")) < 80
    # charts keep their own light background, so their text stays readable on a dark page
    paper = page.evaluate("""() => getComputedStyle(document.querySelector(
                                    '[data-testid="stPlotlyChart"] .main-svg')).backgroundColor""")
    assert luminance(paper) > 200, paper
    assert page.problems == []


# the share-link parameters a view needs to show its picture (Beam: beam search; Ablation: heads off)
LINK_PARAMS = {"Decoding steps": {"step": 3}, "Beam": {"beam": 4},
               "Ablation": {"ablate": "cross:2:0,cross:2:1,cross:2:2,cross:2:3"}}
TOUR_SENTENCE = "A little girl climbs the stairs to the red house."


def view_link(app_url: str, view: str, **extra) -> str:
    return link(app_url, view=view, sentence=TOUR_SENTENCE, **LINK_PARAMS.get(view, {}), **extra)


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_link_shows_its_picture_first_drawn_in_one_pass(pages, app_url, view, screenshots):
    """Each view's share link as a visitor opens it at 1280x720 (a projector's screen) and at
    1440x900 (a laptop), unscrolled: its main chart fills at least 40% of the window's height; every
    chart is drawn in one pass (the margins each figure brings already hold its labels and colour
    bar, viz._base.matrix_margins, so plotly.js's automargin finds nothing to grow and does not draw
    it a second time). The 1280x720 page is the README's tour picture (tour-<view>.png). Presenter
    mode is checked in test_browser_room (test_presenter_charts_are_legible_on_a_projector)."""
    page = opened(pages, view_link(app_url, view), viewport=PROJECTOR)
    wait_for_plot(page, "gd.querySelector('.xtick') || gd.querySelector('.point')")
    option = page.locator('[data-testid="stRadio"] label').filter(has_text=re.compile(rf"^\s*{re.escape(view)}\s*$"))
    assert option.locator("input").first.is_checked()
    assert page.evaluate(GROWN_MARGINS) == []
    share = chart_share(page)
    assert share >= 0.40, f"{view}: the main chart fills {share:.0%} of a 1280x720 window"
    path = screenshots / f"tour-{view.lower().replace(' ', '-')}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 10_000
    assert plot_state(page) is not None
    # the same page in a laptop's window: the layout is the browser's (the server never learns the
    # window's size), so a resize shows what a fresh load at 1440x900 shows
    page.set_viewport_size({"width": 1440, "height": 900})
    wait_charts_drawn(page)
    share = chart_share(page)
    assert share >= 0.40, f"{view}: the main chart fills {share:.0%} of a 1440x900 window"
    assert page.problems == []


# Each HTML block of ours (translation strip, source strip, what-if table): how far its content
# runs below the element Streamlit lays out for it (the next element starts there).
HTML_OVERRUN = """() => Array.from(document.querySelectorAll('.aa-tokens, .aa-sources, .aa-branch')).map(block => {
    const element = block.closest('[data-testid="stElementContainer"]');
    return Math.round(block.getBoundingClientRect().bottom - element.getBoundingClientRect().bottom); })"""


@pytest.mark.parametrize("present", [0, 1])
def test_the_translation_strip_does_not_run_under_the_next_element(pages, app_url, present):
    """Streamlit pulls a markdown element up by 1rem (its last paragraph's margin); the strip ends
    in a div, so its last line ran 16-19 px under the view picker (page/style.COMPACT_CSS undoes it)."""
    page = opened(pages, view_link(app_url, "Decoding steps", present=present), viewport=PROJECTOR)
    overruns = page.evaluate(HTML_OVERRUN)
    assert overruns and max(overruns) <= 0, overruns
    assert page.problems == []


def test_attribution_view_and_the_norm_switch(pages, app_url):
    """The Attribution view draws the methods for the linked step, its tables, and the norm switch
    in the Heatmap view recolours the head on a 0..max scale named ‖α·f(x)‖."""
    page = opened(pages, link(app_url, view="Attribution", step=1, sentence=SENTENCE), charts=2)
    wait_for_text(page, "Perturbation test")
    titles = chart_titles(page)
    assert any(t.startswith("Source vs prefix") for t in titles), titles
    assert any("Which source pieces mattered for step 2" in t for t in titles), titles
    # the view's charts first; the source-share bar comes after them (nothing above the view moves)
    wait_for_plot(page, "gd.data[0].type === 'heatmap' && gd.layout.yaxis.ticktext.length === 4", index=0)
    # the method table, the perturbation summary and the correlations (tables load after the charts)
    page.wait_for_function("""() => document.querySelectorAll('[data-testid="stDataFrame"]').length >= 3""")
    assert page.problems == []
    pick_view(page, "Heatmap")
    option = page.locator('[data-testid="stRadio"] label').filter(has_text="‖α·f(x)‖").first
    with script_run(page):
        option.click()
    wait_for_plot(page, "gd.layout.title.text.includes('norm-weighted') && gd.data[0].zmax > 1", index=0)
    assert "norm=1" in page.url
    assert page.problems == []


def test_the_decoding_popover_opens_on_a_click_and_stays_open_while_used(pages, app_url):
    """Its widgets are drawn only while it is open (one rerun to open it); picking beam search in it
    must leave it open, with the pick in the translation's title."""
    page = opened(pages, link(app_url, sentence=SENTENCE), viewport=PROJECTOR)
    assert page.get_by_text("Reference translation").count() == 0
    with script_run(page):
        page.get_by_role("button", name="Examples · reference · beam").click()
    wait_for_text(page, "Reference translation")
    with script_run(page):
        page.get_by_text("Beam search", exact=True).click()
    wait_for_text(page, "beam search (4)")
    assert page.get_by_text("Reference translation").is_visible(), "the popover stayed open"
    assert page.problems == []
