"""Compare's "What carries the difference" in Chromium (issue 53): a click on a tile of a patching
head map opens that head of the original below it, scrolled into view, on a projector window and on
a phone, and the link keeps the pick. AppTest cannot click a plotly chart (test_app_patching.py
calls the callback instead)."""
from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from browser_utils import NEEDS_BROWSER, click_point, wait_charts_drawn

pytestmark = NEEDS_BROWSER
SENTENCE = "A man is riding a bike."
EDITED = "A man is riding a horse."
CHART_PLOTS = '[data-testid="stPlotlyChart"] .js-plotly-plot'


def chart_titles(page) -> list[str]:
    return page.evaluate(f"""() => Array.from(document.querySelectorAll('{CHART_PLOTS}'),
                                            gd => (gd.layout.title && gd.layout.title.text) || '')""")


@pytest.mark.parametrize("viewport, present, phone", [((1280, 720), "1", False), ((390, 844), None, True)],
                         ids=["presenter", "phone"])
def test_a_click_on_a_patching_tile_opens_that_head(pages, app_url, viewport, present, phone):
    params = {"model": "en-de", "view": "Compare", "sentence": SENTENCE, "edited": EDITED}
    if present:
        params["present"] = present
    page = pages.open(f"{app_url}/?" + urlencode(params), viewport=viewport, phone=phone)
    page.wait_for_function(f"""() => Array.from(document.querySelectorAll('{CHART_PLOTS}'))
                                     .some(gd => gd.layout && gd.layout.title && gd.layout.title.text.startsWith('Cross-attention')
                                               && !gd.layout.title.text.includes('original (left)'))""",
                           timeout=120_000)
    wait_charts_drawn(page, 4)
    titles = chart_titles(page)
    # the section's map, not the pair's cross-attention chart above it ("original (left), edited (right)")
    cross = next(i for i, title in enumerate(titles) if title.startswith("Cross-attention") and "original (left)" not in title)
    assert not any("Cross-attention · layer 1 · head 3" in title for title in titles), titles   # nothing opened yet
    custom = page.evaluate(f"""(c) => Array.from(document.querySelectorAll('{CHART_PLOTS}')[c]._fullData[1].customdata,
                                                  point => Array.from(point).map(Number))""", cross)
    assert custom, titles
    marker = next((i for i, point in enumerate(custom) if point[:2] == [1, 3]), None)
    assert marker is not None, (titles[cross], custom[:20])
    click_point(page, cross, 1, marker)            # waits for the run the click starts
    page.wait_for_function(f"""() => Array.from(document.querySelectorAll('{CHART_PLOTS}'))
                                     .some(gd => gd.layout.title && gd.layout.title.text.includes('Cross-attention · layer 1 · head 3'))""",
                           timeout=60_000)
    assert re.search(r"kind=cross&layer=1&head=3|layer=1&head=3", page.url), page.url   # the link keeps the pick
    # the opened head's panel is scrolled into the window (the page scrolls smoothly)
    page.wait_for_function("""() => { const r = document.querySelector('.st-key-compare_patch_opened').getBoundingClientRect();
                                      return r.top >= 0 && r.top < window.innerHeight * 0.75; }""", timeout=10_000)
    assert page.problems == []
