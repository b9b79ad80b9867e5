"""The Logit lens view in Chromium (issue 33): its share link in presenter mode at 1280x720 (a
projector) with an 18-word sentence draws the grid inside the window with no label on another and
every cell's piece inside its cell; a click on a cell opens that cell's top-k; a phone (390x844)
opens the link on the grid. Screenshots go to the test's temporary folder."""
from __future__ import annotations

from browser_utils import NEEDS_BROWSER, click_point, wait_charts_drawn, wait_for_text
from test_browser_room import CHART_LABELS, MIN_TICK_PX, PHONE, PROJECTOR, SENTENCES, overlapping_labels, view_link

pytestmark = NEEDS_BROWSER
VIEW = "Logit lens"

# each heatmap cell's text box and the cell's own box on the screen (plotly.js writes heatmap text
# into one <text> per cell, in row order of the z it drew)
CELL_TEXTS = """() => {
  const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  const L = gd._fullLayout, xa = L.xaxis, ya = L.yaxis, r = gd.getBoundingClientRect();
  const trace = gd._fullData[0], rows = trace.z.length, cols = trace.z[0].length;
  const texts = Array.from(gd.querySelectorAll('.hm text, .heatmaplayer text')).filter(t => t.textContent.trim());
  return {rows, cols, cells: texts.map(t => { const b = t.getBoundingClientRect();
    return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom}; }),
    cellWidth: Math.abs(xa.l2p(1) - xa.l2p(0)), cellHeight: Math.abs(ya.l2p(1) - ya.l2p(0)),
    x0: r.left + xa._offset, y0: r.top + ya._offset, width: xa._length, height: ya._length};
}"""


def cell_heading(page) -> str:
    return page.locator('.st-key-view_body [data-testid="stMarkdownContainer"]').filter(
        has_text="read after").first.inner_text()


def test_presenter_grid_is_legible_and_inside_a_projector_window(pages, app_url, tmp_path):
    page = pages.open(view_link(app_url, VIEW, SENTENCES[18], present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    wait_for_text(page, "decided by")                       # the one sentence above the grid
    page.screenshot(path=str(tmp_path / "lens-presenter-1280x720.png"))
    (chart,) = page.evaluate(CHART_LABELS)
    width, height = PROJECTOR
    assert overlapping_labels(chart["labels"]) == []
    sizes = [label["size"] for label in chart["labels"] if label["tick"]]
    assert sizes and min(sizes) >= MIN_TICK_PX, f"tick labels of {min(sizes or [0])} px"
    left, top, right, bottom = chart["rect"]
    assert left >= 0 and top >= 0 and right <= width and bottom <= height, chart["rect"]
    assert top < height / 2
    # the sentence stands above the grid
    sentence = page.get_by_text("decided by", exact=False).first.bounding_box()
    assert sentence["y"] + sentence["height"] <= top + 1
    # every cell's piece inside its cell: a column per step of an 18-word sentence
    grid = page.evaluate(CELL_TEXTS)
    assert grid["cols"] >= 18 and len(grid["cells"]) >= grid["rows"] * grid["cols"] * 0.9
    for cell in grid["cells"]:
        column = int((cell["left"] + cell["right"]) / 2 - grid["x0"]) // grid["cellWidth"]
        lo = grid["x0"] + column * grid["cellWidth"]
        assert cell["left"] >= lo - 1 and cell["right"] <= lo + grid["cellWidth"] + 1, cell
        assert cell["bottom"] - cell["top"] <= grid["cellHeight"] + 1, cell
    assert page.problems == []


def test_a_click_on_a_cell_opens_its_top_k(pages, app_url, tmp_path):
    page = pages.open(view_link(app_url, VIEW, SENTENCES[10]), viewport=(1280, 900))
    wait_charts_drawn(page)
    before = cell_heading(page)
    steps = page.evaluate("() => document.querySelector('.js-plotly-plot')._fullData[0].z[0].length")
    # the cell markers run row by row from the top row (the last site), step by step: step 3 of the
    # second row from the top (the last layer's cross-attention)
    click_point(page, 0, 1, 1 * steps + 2)
    after = cell_heading(page)
    assert after != before and after.startswith("Step 3 (chose ") and "layer 2 · cross-attn" in after, after
    assert "step_no=3" in page.url and "lens_site=7" in page.url
    page.screenshot(path=str(tmp_path / "lens-clicked-1280x900.png"), full_page=True)
    assert page.problems == []


def test_a_phone_opens_the_link_on_the_grid(pages, app_url, tmp_path):
    page = pages.open(view_link(app_url, VIEW, SENTENCES[10]), viewport=PHONE)   # as the room test
    wait_charts_drawn(page)
    page.screenshot(path=str(tmp_path / "lens-phone-390x844.png"))
    box = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
    assert 0 < box["y"] < PHONE[1] - 120 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0] + 1, box
    # a column is a few px wide there: no cell text to run into its neighbours, the colours stay
    grid = page.evaluate(CELL_TEXTS)
    assert grid["cellWidth"] < 20 and len(grid["cells"]) >= grid["rows"] * grid["cols"] * 0.9
    assert page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot .heatmaplayer text, '
        + '.js-plotly-plot .hm text')).every(t => getComputedStyle(t).display === 'none')""")
    assert page.problems == []
