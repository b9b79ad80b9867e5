"""Browser checks of issue 31's "Behaviour that surprises" that are about what the page shows
where: every what-if candidate reachable, a tile click bringing the opened head into view, and the
beam tree readable after a click. Playwright drives Debian's Chromium at 1280x720 (a projector)."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from browser_utils import NEEDS_BROWSER, click_point, script_run, wait_charts_drawn, wait_for_text

pytestmark = NEEDS_BROWSER
SENTENCE = "Two dogs play in the snow."
WINDOW = (1280, 720)


def opened(pages, app_url: str, charts: int, **params):
    page = pages.open(f"{app_url}/?" + urlencode({"model": "en-de", "sentence": SENTENCE, **params}),
                     viewport=WINDOW)
    wait_charts_drawn(page, charts)
    return page


def test_every_what_if_candidate_is_on_screen_and_the_last_one_branches(pages, app_url):
    page = opened(pages, app_url, 3, view="Decoding steps", step_no=2)
    pills = page.evaluate("""() => {
        const group = document.querySelector('.st-key-step_branch_pick');
        const box = group.getBoundingClientRect();
        const scrollers = Array.from(group.querySelectorAll('*')).filter(e => e.scrollWidth > e.clientWidth + 1);
        return {left: box.left, right: box.right, scrolls: scrollers.length,
                pills: Array.from(group.querySelectorAll('button')).filter(b => b.innerText.trim())
                            .map(b => ({text: b.innerText.trim(), ...b.getBoundingClientRect().toJSON()}))};
    }""")
    assert len(pills["pills"]) == 9, pills          # top 10 candidates but the one chosen
    outside = [p["text"] for p in pills["pills"] if p["left"] < pills["left"] - 1 or p["right"] > pills["right"] + 1]
    assert not outside and pills["scrolls"] == 0, f"cut off by the column: {outside}"
    last = page.locator(".st-key-step_branch_pick button").filter(has_text=pills["pills"][-1]["text"]).first
    last.scroll_into_view_if_needed()
    with script_run(page):
        last.click()
    wait_for_text(page, "What if step 2 had been")
    assert pills["pills"][-1]["text"] in page.locator(".aa-branch-title").inner_text()
    assert page.problems == []


def in_view(page, key: str) -> None:
    """Wait (the page scrolls smoothly) until the opened head's panel starts in the top third of the
    window, or, at the end of the page where it cannot scroll that far, lies wholly in the window."""
    page.wait_for_function("""(key) => { const r = document.querySelector(`.st-key-${key}_opened`).getBoundingClientRect();
                                         return r.top >= 0 && (r.top < window.innerHeight / 3 || r.bottom <= window.innerHeight); }""",
                           arg=key, timeout=10_000)


def panel_box(page, key: str) -> dict:
    return page.evaluate("(key) => document.querySelector(`.st-key-${key}_opened`).getBoundingClientRect().toJSON()",
                         key)


@pytest.mark.parametrize("view, chart_key, layer", [("Overview", "overview_cross", 1),
                                                    ("Layer grid", "grid_cross_2", 2)])
def test_a_tile_click_brings_the_opened_head_into_view(pages, app_url, view, chart_key, layer):
    page = opened(pages, app_url, 2, view=view, kind="cross", layer=2, head=3)
    custom = page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0]
                                    ._fullData[1].customdata, point => Array.from(point).map(Number))""")
    marker = next(i for i, point in enumerate(custom) if point[:2] == [layer, 1])
    # click_point centres the tiles in the window first: the opened head's panel is then below the fold
    click_point(page, 0, 1, marker)                # waits for the run the click starts
    page.wait_for_function(f"""() => document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[1]
                                      .layout.title.text.includes('layer {layer} · head 1')""")
    in_view(page, chart_key)
    head = page.evaluate("""() => document.querySelectorAll('[data-testid="stPlotlyChart"]')[1]
                                  .getBoundingClientRect().toJSON()""")
    assert head["top"] < WINDOW[1] - 200, f"the opened head's chart starts in the window: {head}"
    # a second click (another head) scrolls again, after the page was scrolled back to the tiles
    page.evaluate("() => document.querySelector('[data-testid=\"stPlotlyChart\"]').scrollIntoView({block: 'start'})")
    assert panel_box(page, chart_key)["bottom"] > WINDOW[1], "scrolled back: the opened head is out of view"
    click_point(page, 0, 1, next(i for i, point in enumerate(custom) if point[:2] == [layer, 0]))
    in_view(page, chart_key)
    assert page.problems == []


def test_after_a_click_on_a_beam_node_the_other_nodes_stay_readable(pages, app_url):
    page = opened(pages, app_url, 2, view="Beam", beam=4)
    nodes = page.evaluate("""() => document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0]
                                   ._fullData[2].customdata.length""")
    click_point(page, 0, 2, nodes - 1)             # the last hypothesis of the last step
    page.wait_for_function("""() => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
                                      return Array.from(gd.querySelectorAll('.scatterlayer .trace:last-child .point'))
                                                  .some(p => parseFloat(getComputedStyle(p).opacity) < 1); }""")
    faded = page.evaluate("""() => {
        const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
        const trace = gd.querySelector('.scatterlayer .trace:last-child');
        const opacity = e => parseFloat(getComputedStyle(e).opacity) * parseFloat(getComputedStyle(e).fillOpacity || 1);
        return {points: Array.from(trace.querySelectorAll('.point')).map(opacity),
                labels: Array.from(trace.querySelectorAll('.textpoint text')).map(t => [opacity(t), getComputedStyle(t).fill])};
    }""")
    assert min(faded["points"]) >= 0.5, faded            # plotly.js's default fades them to 0.2
    dim = [fill for value, fill in faded["labels"] if value < 0.5 or fill in ("rgb(255, 255, 255)",)]
    assert not dim and len(faded["labels"]) == nodes, faded
    assert page.problems == []
