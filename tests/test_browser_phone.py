"""The phone is the follower's screen (issue 52): at 390x844 with a phone's browser, every view's
share link opens with its chart inside the first screen, above the translation strip; the sentence box
and the view picker are one tap away in a bar above the chart, and a tap opens the sentence box."""
from __future__ import annotations

import pytest

from atlas_ui.views import VIEWS
from browser_utils import NEEDS_BROWSER, script_run, wait_charts_drawn
from test_browser_room import PHONE, SENTENCES, view_link

pytestmark = NEEDS_BROWSER
FIRST_SCREEN_TOP = 200          # px: the title, the sentence · view bar, then the chart
TOPS = """() => {
  const top = (sel) => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().top : null; };
  const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
  return {chart: Math.min(...charts.map(c => c.getBoundingClientRect().top)),
          chartBottom: charts.length ? charts[0].getBoundingClientRect().bottom : null,
          bar: top('.st-key-phone_bar'), strip: top('.st-key-translation'),
          box: top('[data-testid="stMain"] [data-testid="stTextArea"]'),
          radio: top('.st-key-view [role="radiogroup"]'), picker: top('.st-key-view input')};
}"""


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_views_chart_starts_in_a_phones_first_screen(pages, app_url, view):
    page = pages.open(view_link(app_url, view, SENTENCES[18]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    tops = page.evaluate(TOPS)
    assert 0 < tops["chart"] <= FIRST_SCREEN_TOP, f"{view}: the chart starts at {tops['chart']:.0f} px"
    assert tops["bar"] is not None and tops["bar"] < tops["chart"], tops
    assert tops["picker"] is not None and tops["picker"] < tops["chart"] and tops["radio"] is None, tops
    assert tops["strip"] is not None and tops["strip"] > tops["chart"], "the translation comes after the chart"
    assert tops["box"] is None, "the sentence box is folded into the bar's ✎ Sentence"
    assert page.problems == []


def test_one_tap_opens_the_sentence_box_on_a_phone(pages, app_url):
    page = pages.open(view_link(app_url, "Heatmap", SENTENCES[10]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    with script_run(page, runs=0):
        page.get_by_role("button", name="✎ Sentence").click()
    box = page.locator('[data-testid="stPopoverBody"] textarea')
    box.wait_for()
    assert box.input_value() == SENTENCES[10]
    rect = box.bounding_box()
    assert rect["x"] >= 0 and rect["x"] + rect["width"] <= PHONE[0] and rect["y"] + rect["height"] <= PHONE[1]
    assert page.problems == []


def test_the_logit_lens_shows_a_window_of_steps_on_a_phone(pages, app_url):
    """20 steps in a phone's ~250 px were 8-px columns without text; a window of 4 steps around the
    page's step gets columns a finger wide, and Later moves it on."""
    page = pages.open(view_link(app_url, "Logit lens", SENTENCES[18]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    ticks = page.evaluate("""() => Array.from(document.querySelectorAll('.st-key-lens_picture .xtick text'))
                              .map(t => t.getBoundingClientRect().left)""")
    assert 2 <= len(ticks) <= 4 and min(b - a for a, b in zip(ticks, ticks[1:])) >= 30, ticks
    with script_run(page):
        page.get_by_role("button", name="Later ▶").click()
    wait_charts_drawn(page)
    # step 5 now, with two steps before it
    assert "3–6 of 20" in page.evaluate("""() => document.querySelector('.st-key-lens_picture .js-plotly-plot')
                                               .layout.title.text""")
    assert page.problems == []
