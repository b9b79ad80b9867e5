"""Browser test of Compare's source swap (issue 23), in Chromium: click a source word, its nearest
neighbours appear below it, pick one, and both translations are drawn side by side; the share link
holds the edited sentence and the main map keeps its share of the window."""
from __future__ import annotations

from urllib.parse import parse_qs, quote, urlencode, urlparse

from browser_utils import NEEDS_BROWSER, SHARE_LINK, chart_share, script_run, wait_charts_drawn

pytestmark = NEEDS_BROWSER
SENTENCE = "A man in a red jacket is riding his bicycle down a narrow street."
CHARTS = '[data-testid="stPlotlyChart"] .js-plotly-plot'


def swap_map(page) -> dict | None:
    """The side-by-side map's source ticks (original, edited) and output rows, or None."""
    return page.evaluate(f"""() => {{
        for (const gd of document.querySelectorAll('{CHARTS}')) {{
            const title = (gd.layout && gd.layout.title && gd.layout.title.text) || '';
            if (title.includes('original (left), edited (right)'))
                return {{title, left: gd.layout.xaxis.ticktext, right: gd.layout.xaxis2.ticktext,
                         rows: gd.layout.yaxis2.ticktext}};
        }}
        return null;
    }}""")


def test_a_swap_draws_both_translations(pages, app_url, screenshots):
    url = f"{app_url}/?{urlencode(dict(view='Compare', sentence=SENTENCE), quote_via=quote)}"
    page = pages.open(url, viewport=(1280, 720))
    wait_charts_drawn(page, 2)
    assert chart_share(page) >= 0.40                            # the map first, as a fresh link opens
    word = page.locator(".st-key-compare_word button").filter(has_text="red")
    with script_run(page):
        word.click()
    neighbour = page.locator(".st-key-compare_swap_4 label").filter(has_text="blue")
    assert neighbour.bounding_box()["y"] > word.bounding_box()["y"]    # below the control that was clicked
    with script_run(page):
        neighbour.click()
    wait_charts_drawn(page, 2)
    edited = SENTENCE.replace("red", "blue")
    assert page.locator(".st-key-compare_text input").input_value() == edited
    drawn = swap_map(page)
    assert drawn is not None
    assert "✎ ▁red" in drawn["left"] and "✎ ▁blue" in drawn["right"]
    assert any(row.startswith("≠ ") for row in drawn["rows"])     # the translation changed somewhere
    share = parse_qs(urlparse(page.locator(SHARE_LINK).get_attribute("href")).query)
    assert share["edited"] == [edited] and share["view"] == ["Compare"]
    page.screenshot(path=str(screenshots / "compare-swap.png"), full_page=True)
    assert page.problems == []
