"""Browser tests: Playwright drives Debian's Chromium against `streamlit run app.py`.

Skipped only when /usr/bin/chromium is missing (CI installs it, so they run there).
"""
from __future__ import annotations

import re

import pytest

from browser_utils import (CHART, NEEDS_BROWSER, TRANSLATION, click_point, pick_view, plot_state, script_run,
                           translate, wait_charts_drawn, wait_for_plot)

pytestmark = NEEDS_BROWSER
INJECTION = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@pytest.fixture
def page(pages, app_url):
    """The app as a new session (a new document on a pooled page, browser_utils.Pages); console
    errors and page errors are collected in page.problems."""
    page = pages.open(app_url)           # returns once the first script run has ended
    wait_for_plot(page, "gd.data[0].type === 'heatmap' && gd.querySelector('.xtick')")
    yield page


def test_page_loads_with_heatmap_and_screenshot(page, screenshots):
    state = plot_state(page)
    assert state["types"][0] == "heatmap"
    assert "</s>" in state["xticks"], "special tokens show literally on the axes"
    assert page.locator(TRANSLATION).inner_text().strip(), "a translation is shown"
    wait_charts_drawn(page)
    page.screenshot(path=str(screenshots / "screenshot-main.png"))
    assert (screenshots / "screenshot-main.png").stat().st_size > 10_000
    assert page.problems == []


def test_the_chart_library_is_fetched_once_and_before_the_websocket_opens(page):
    """atlas_ui/server/asgi.py: the page's HTML imports plotly.js while the page boots; Streamlit's own
    lazy import later is the same module (one download, one evaluation)."""
    loads = page.evaluate("""() => ({socket: window.__atlasRuns.socketCreated,
        chunks: performance.getEntriesByType('resource').filter(e => /\\/PlotlyChart\\.[\\w-]+\\.js$/.test(e.name))
                .map(e => e.startTime)})""")
    assert len(loads["chunks"]) == 1, loads
    assert loads["socket"] is not None and loads["chunks"][0] < loads["socket"], loads
    assert plot_state(page)["types"][0] == "heatmap"
    assert page.problems == []


def test_typed_sentence_is_translated(page):
    before = page.locator(TRANSLATION).inner_text()
    translate(page, "Two dogs are playing in the snow.")     # returns when its runs have ended
    after = page.locator(TRANSLATION).inner_text()
    assert after.strip() and after != before
    assert "Hund" in after, after                             # the new sentence's translation
    wait_for_plot(page, "Array.from(gd.querySelectorAll('.xtick text')).some(e => /dog/.test(e.textContent))")
    assert page.problems == []


def test_hover_shows_query_key_and_weight(page):
    drag = page.locator(f"{CHART} .nsewdrag").first
    box = drag.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.3)
    page.mouse.move(box["x"] + box["width"] * 0.35, box["y"] + box["height"] * 0.35)
    hover = page.locator(".hoverlayer .hovertext").first
    hover.wait_for(timeout=15_000)
    text = hover.text_content()
    assert "Query" in text and "Key" in text
    assert re.search(r"weight \d\.\d{4}", text), text
    assert page.problems == []


def test_html_injection_is_shown_literally_and_never_runs(page):
    translate(page, INJECTION)
    # the typed "<" becomes a piece with "<" (or <unk>): it must show literally on the axis
    wait_for_plot(page, "Array.from(gd.querySelectorAll('.xtick text')).slice(0, -1)"
                        ".some(e => e.textContent.includes('<'))")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0
    assert page.locator('[data-testid="stTextArea"] textarea').first.input_value() == INJECTION
    ticks = plot_state(page)["xticks"]
    assert "</s>" in ticks, ticks                          # specials are shown, not read as tags
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.problems == []


# a cell beside the tile's centre marker: the Overview's tile (layer 1, head 2) and the Layer grid's
# head 5 (second tile row), each at its first query and second key
HOVERED_CELL = {
    "Overview": """(heat) => [heat.y.findIndex(label => label.startsWith('Layer 1 · query 0:')),
                              heat.x.findIndex(label => label.startsWith('head 2 · key 1:'))]""",
    "Layer grid": """(heat) => { const row = heat.customdata.findIndex(cells => Array.from(cells).includes(5));
                                  return [row, Array.from(heat.customdata[row]).indexOf(5) + 1]; }""",
}


@pytest.mark.parametrize("view, head", [("Overview", 2), ("Layer grid", 5)])
def test_tiled_hover_names_the_cell_under_the_pointer(page, view, head):
    """The tiled maps' hover names head, query and key from one label per grid row and column
    (viz.overview.label_axes; the Layer grid's head from a small customdata): the cell under the
    pointer, with its own weight."""
    pick_view(page, view)
    wait_for_plot(page, "gd.data[0].yaxis === 'y2' && gd._fullLayout.yaxis2")
    wait_charts_drawn(page)
    cell = page.evaluate(f"""() => {{
        const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
        const heat = gd._fullData[0], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const [row, col] = ({HOVERED_CELL[view]})(heat);
        const box = gd.getBoundingClientRect(), x2 = gd._fullLayout.xaxis2, y2 = gd._fullLayout.yaxis2;
        return {{row, col, y: heat.y[row], x: heat.x[col], z: heat.z[row][col],
                px: box.left + xa._offset + xa.c2p(col), py: box.top + ya._offset + ya.c2p(row),
                // the labels' hidden axes lie exactly over the ticked ones: px of cell 0 and the length
                drawn: [[x2._offset + x2.c2p(0), xa._offset + xa.c2p(0)], [x2._length, xa._length],
                        [y2._offset + y2.c2p(0), ya._offset + ya.c2p(0)], [y2._length, ya._length]]}};
    }}""")
    for labels_px, ticked_px in cell["drawn"]:
        assert abs(labels_px - ticked_px) < 0.5, cell["drawn"]
    page.mouse.move(cell["px"], cell["py"])       # one move: plotly.js drops a second within 50 ms
    hover = page.locator(".hoverlayer .hovertext").first
    hover.wait_for(timeout=15_000)
    lines = [line.text_content() for line in hover.locator("tspan.line").all()] or [hover.text_content()]
    shown = " | ".join(lines).replace("\u200b", "")

    def unescape(label):
        return label.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("\u200b", "")
    assert unescape(cell["y"]) in shown and unescape(cell["x"]) in shown, (cell, shown)
    assert f"head {head}" in shown and f"weight {cell['z']:.4f}" in shown, (cell, shown)
    assert page.problems == []


@pytest.mark.parametrize("view", ["Overview", "Layer grid"])
def test_click_on_a_tile_opens_that_head(page, view):
    """The tiles report clicks through invisible markers; a click must really select that head."""
    pick_view(page, view)
    wait_for_plot(page, "gd.data.length > 1 && gd.data[1].type === 'scatter'")
    # a new visitor lands on cross-attention at en-de's best aligner (layer 1, head 7; head_roles.json)
    wait_for_plot(page, "gd.layout.title.text.includes('layer 1 · head 7')", index=1)
    # the markers' customdata says which (layer, head) each tile is
    custom = page.evaluate("""() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0]
                                    ._fullData[1].customdata, point => Array.from(point).map(Number))""")
    layer = 1                                      # Layer grid shows the landing layer: 1
    marker = next(i for i, point in enumerate(custom) if point[:2] == [layer, 2])
    click_point(page, 0, 1, marker)                # waits for the run the click starts
    wait_for_plot(page, f"gd.layout.title.text.includes('layer {layer} · head 2')", index=1)
    assert re.search(rf"layer={layer}&head=2", page.url), page.url   # the URL keeps the pick
    # the focus can be undone: back to the head that was open before the click
    with script_run(page):
        page.get_by_role("button", name=re.compile("Undo focus")).click()
    wait_for_plot(page, "gd.layout.title.text.includes('layer 1 · head 7')", index=1)
    assert page.problems == []


def test_a_pooled_page_starts_each_link_as_a_fresh_context_would(pages, app_url):
    """browser_utils.Pages: one page serves many tests, so nothing one test leaves (storage,
    cookies, a resized window) may reach the next; Streamlit keeps the sidebar's state there."""
    page = pages.open(app_url)
    page.evaluate("() => { localStorage.setItem('atlas-test', '1'); sessionStorage.setItem('atlas-test', '1'); }")
    page.context.add_cookies([{"name": "atlas_test", "value": "1", "url": app_url}])
    page.set_viewport_size({"width": 800, "height": 600})
    again = pages.open(app_url)
    assert again is page                                   # the same renderer, a new document
    assert page.evaluate("() => [localStorage.getItem('atlas-test'), sessionStorage.getItem('atlas-test')]") == [None, None]
    assert "atlas_test" not in {cookie["name"] for cookie in page.context.cookies()}   # the app sets its own
    assert page.viewport_size == {"width": 1440, "height": 1100}
    assert page.problems == []
