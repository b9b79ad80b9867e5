"""Browser tests of the what-if branches (issue 23), in Chromium: a click on a candidate in Decoding
steps puts the original and the branch side by side below it; a click on a beam node off the
returned path branches too, and the tree keeps its returned path drawn."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlencode, urlparse

from browser_utils import (NEEDS_BROWSER, SHARE_LINK, TRANSLATION, click_point, script_run, wait_charts_drawn,
                           wait_for_text)

pytestmark = NEEDS_BROWSER
SENTENCE = "Two dogs play in the snow."
CHARTS = '[data-testid="stPlotlyChart"] .js-plotly-plot'


def link(base: str, **params) -> str:
    return f"{base}/?{urlencode(params, quote_via=quote)}"


def compare_table(page) -> dict | None:
    """The side-by-side table's title, rows (pieces as the page shows them) and top, or None."""
    return page.evaluate("""() => {
        const box = document.querySelector('.aa-branch');
        if (!box) return null;
        const rows = Array.from(box.querySelectorAll('tr')).filter(tr => tr.querySelector('th.aa-row'))
            .map(tr => Array.from(tr.querySelectorAll('td.aa-piece')).map(td => td.textContent));
        return {title: box.querySelector('.aa-branch-title').textContent, rows, top: box.getBoundingClientRect().top};
    }""")


def test_a_click_on_a_candidate_puts_both_translations_side_by_side(pages, app_url, screenshots):
    page = pages.open(link(app_url, view="Decoding steps", step=1, sentence=SENTENCE), viewport=(1280, 900))
    wait_charts_drawn(page, 3)
    original = page.locator(TRANSLATION).inner_text().strip()
    pills = page.locator(".st-key-step_branch_pick button").filter(has_text=re.compile(r"\S"))   # not the "?"
    candidate = pills.first.inner_text().strip()
    pill_top = pills.first.bounding_box()["y"]
    with script_run(page):
        pills.first.click()
    wait_for_text(page, "They part at step 2")
    chart = compare_table(page)
    assert chart is not None and "What if step 2" in chart["title"]
    top, bottom = chart["rows"]
    assert bottom[1] == candidate and top[0] == bottom[0] and top[1] != bottom[1]
    assert chart["top"] > pill_top                              # below the control that was clicked
    assert page.locator(TRANSLATION).inner_text().strip() == original     # the switch stays on the original
    share = parse_qs(urlparse(page.locator(SHARE_LINK).get_attribute("href")).query)
    assert share["branch"][0].split(" ")[1] == candidate
    page.screenshot(path=str(screenshots / "branch-decoding-steps.png"), full_page=True)
    # the switch: the branch becomes the run on screen
    with script_run(page):
        page.locator(".st-key-branch_view label").filter(has_text="Branch").click()
    wait_charts_drawn(page, 3)
    assert page.locator(TRANSLATION).inner_text().strip() != original
    assert page.problems == []


def test_a_click_on_a_beam_node_branches_and_keeps_the_returned_path(pages, app_url, screenshots):
    page = pages.open(link(app_url, view="Beam", beam=4, sentence=SENTENCE), viewport=(1280, 900))
    wait_charts_drawn(page, 2)
    before = page.evaluate(f"""() => {{ const gd = document.querySelectorAll('{CHARTS}')[0];
        return {{path: [gd.data[1].x, gd.data[1].y], custom: gd._fullData[gd._fullData.length - 1].customdata,
                 trace: gd._fullData.length - 1, range: gd._fullLayout.yaxis.range}}; }}""")
    path = set(zip(before["path"][0], before["path"][1]))
    target = next(i for i, (s, k) in enumerate(before["custom"]) if s >= 1 and (s + 1, k) not in path)
    click_point(page, 0, before["trace"], target)
    wait_for_text(page, "They part at step")
    wait_charts_drawn(page, 2)
    after = page.evaluate(f"""() => {{ const gd = document.querySelectorAll('{CHARTS}')[0];
        return {{path: [gd.data[1].x, gd.data[1].y], range: gd._fullLayout.yaxis.range}}; }}""")
    assert after["path"] == before["path"] and after["range"] == before["range"]   # the winner stays drawn, same scale
    chart = compare_table(page)
    assert chart is not None
    step, index = before["custom"][target]
    assert f"What if step {step + 1}" in chart["title"]
    page.screenshot(path=str(screenshots / "branch-beam.png"), full_page=False)
    assert page.problems == []
