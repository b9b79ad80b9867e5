"""The phone is the follower's screen (issue 52): at 390x844 with a phone's browser, every view's
share link opens with its chart inside the first screen, above the translation strip; the sentence box
and the view picker are one tap away in a bar above the chart, and a tap opens the sentence box; a tap
on a chart opens its tooltip inside the plot, and the next tap closes it."""
from __future__ import annotations

import html

import pytest

from atlas_ui.views import VIEWS
from browser_utils import PHONE_AGENT, NEEDS_BROWSER, load, run_tracker_js, script_run, wait_charts_drawn
from test_browser_room import CHART_LABELS, PHONE, SENTENCES, overlapping_labels, view_link

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
def test_every_views_chart_starts_in_a_phones_first_screen_and_is_legible(pages, app_url, view):
    """A phone's browser (390x844, a phone's User-Agent) on a share link with an 18-word sentence:
    the chart starts in the first screen, under the bar that holds the sentence and the view picker,
    above the translation strip and the view's controls. Each chart is refit for the width
    (viz.phone_figure): no text label of any chart runs into another, none reaches past the screen's
    edges (titles ran off the right) or its chart's top and bottom, tick labels are at least 9 px,
    and no colour bar or plotly tool bar takes room."""
    page = pages.open(view_link(app_url, view, SENTENCES[18]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    tops = page.evaluate(TOPS)
    assert 0 < tops["chart"] <= FIRST_SCREEN_TOP, f"{view}: the chart starts at {tops['chart']:.0f} px"
    assert tops["bar"] is not None and tops["bar"] < tops["chart"], tops
    assert tops["picker"] is not None and tops["picker"] < tops["chart"] and tops["radio"] is None, tops
    assert tops["strip"] is not None and tops["strip"] > tops["chart"], "the translation comes after the chart"
    assert tops["box"] is None, "the sentence box is folded into the bar's ✎ Sentence"
    controls = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.st-key-view_body [data-testid="stSelectbox"]')).map(c => c.getBoundingClientRect().top)""")
    assert all(top > tops["chart"] for top in controls), (tops["chart"], controls)
    charts = page.evaluate(CHART_LABELS)
    assert charts, view
    for chart in charts:
        name = f"{view}, {chart['title'][:50]!r}"
        assert overlapping_labels(chart["labels"]) == [], name
        outside = [label["text"][:30] for label in chart["labels"]
                   if not all(-1 <= x <= PHONE[0] + 1 for x, _ in label["corners"])]
        assert outside == [], name
        # nor past its chart's top or bottom, where the next element or the page would cut it (a
        # title wrapped to two lines and hung from the top: plotly.js ignores title.pad there)
        top, bottom = chart["rect"][1], chart["rect"][3]
        cut = [label["text"][:30] for label in chart["labels"]
               if not all(top - 1 <= y <= bottom + 1 for _, y in label["corners"])]
        assert cut == [], name
        assert min((label["size"] for label in chart["labels"] if label["tick"]), default=9) >= 9, name
    assert page.locator('[data-testid="stPlotlyChart"] .colorbar').count() == 0
    # no plotly tool bar: without hover a touch screen keeps it up, over the chart's title
    assert page.locator('[data-testid="stPlotlyChart"] .modebar-btn').count() == 0
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


# each tile title of the Layer grid: its text, its box on the screen, and the bottom (px) of the tile row above it
TILE_TITLES = """() => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
  const z = gd._fullData[0].z, ya = gd._fullLayout.yaxis, top = gd.getBoundingClientRect().top + ya._offset;
  const filled = z.map((row, r) => Array.from(row).some(Number.isFinite) ? r : -1).filter(r => r >= 0);
  return Array.from(gd.querySelectorAll('.annotation')).map((note, i) => {
    const y = gd.layout.annotations[i].y, above = filled.filter(r => r < y);
    const box = note.querySelector('text').getBoundingClientRect();
    return {text: note.textContent, left: box.left, top: box.top, bottom: box.bottom,
            above: above.length ? top + ya.c2p(Math.max(...above) + 0.5) : null}; }); }"""


def test_a_phone_shows_the_layer_grid_two_tiles_a_row_each_title_clear_of_the_row_above(pages, app_url):
    """Four 60-px tiles a row were too small to read on a phone, and the second row's titles sat on the
    first row's tiles: a phone gets two tiles a row (atlas_ui/views/layer_grid.py)."""
    page = pages.open(view_link(app_url, "Layer grid", SENTENCES[18]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    titles = {title["text"]: title for title in page.evaluate(TILE_TITLES)}
    assert sorted(titles) == [f"Head {h}" for h in range(8)], titles
    for h in range(0, 8, 2):                          # heads 2r and 2r+1 side by side, row r under row r-1
        left, right = titles[f"Head {h}"], titles[f"Head {h + 1}"]
        assert abs(left["top"] - right["top"]) < 1 and left["left"] < right["left"], (left, right)
        if h:
            assert left["top"] > titles[f"Head {h - 2}"]["bottom"], titles
    for title in titles.values():
        assert title["above"] is None or title["top"] >= title["above"] - 0.5, title
    # every label the phone's figure kept is drawn, the same pieces beside each tile: a page rule for
    # narrow windows hid every other one again, so the two tiles of a row showed different words
    drawn = page.evaluate("""() => { const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
      const shown = (a) => Array.from(gd.querySelectorAll(`.${a}tick text`))
        .filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent);
      return {x: shown('x'), y: shown('y'), x_kept: gd.layout.xaxis.ticktext, y_kept: gd.layout.yaxis.ticktext}; }""")
    for letter, tiles in (("x", 2), ("y", 4)):
        labels, per_tile = drawn[letter], len(drawn[letter]) // tiles
        assert labels == [html.unescape(text) for text in drawn[f"{letter}_kept"]] and per_tile >= 3, drawn
        assert labels == labels[:per_tile] * tiles, drawn
    assert page.problems == []


def test_a_phone_shows_the_overview_heads_down(pages, app_url):
    """Eight heads across a phone made 30-px tiles: there the Overview puts heads in rows and layers in
    columns (viz.overview_figure(heads_down=True)), three tiles a row."""
    page = pages.open(view_link(app_url, "Overview", SENTENCES[18]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    drawn = page.evaluate("""() => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[0];
      const xa = gd._fullLayout.xaxis, ticks = (a) => Array.from(gd.querySelectorAll(`.${a}tick text`)).map(t => t.textContent);
      return {x: ticks('x'), y: ticks('y'), pitch: xa.c2p(xa.tickvals[1]) - xa.c2p(xa.tickvals[0])}; }""")
    assert drawn["y"] == [f"Head {h}" for h in range(8)] and drawn["x"] == ["Layer 0", "Layer 1", "Layer 2"], drawn
    assert drawn["pitch"] >= 80, drawn                          # px from one layer's tiles to the next's
    captions = page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
    assert any("Rows of tiles are heads, columns are layers" in text for text in captions), captions
    assert page.problems == []


# the chart's plot area, its tooltip and its axis labels on the screen (the tooltip null while none is up)
TOOLTIP = """(index) => { const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[index];
  const s = gd._fullLayout._size, r = gd.getBoundingClientRect(), box = gd.querySelector('.hoverlayer .hovertext');
  const rect = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return {plot: [r.left + s.l, r.top + s.t, r.left + s.l + s.w, r.top + s.t + s.h], tooltip: box && rect(box),
          labels: Array.from(gd.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text'))
                  .filter(t => t.textContent.trim()).map(rect)}; }"""
TOOLTIP_UP = """(index) => Boolean(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[index]
                              .querySelector('.hoverlayer .hovertext'))"""


def overlaps(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


@pytest.mark.parametrize("view", ["Heatmap", "Masks"])
def test_a_taps_tooltip_stays_in_the_plot_and_the_next_tap_closes_it(browser, app_url, view, screenshots):
    """Issue 52, a follower's phone: plotly.js hung a tap's tooltip over the axis labels under the
    bottom row and never closed it (a finger never leaves the plot). Tapped at each corner of the map,
    the tooltip lies inside the plot area; a second tap on its cell, or a tap outside, closes it."""
    context = browser.new_context(viewport={"width": PHONE[0], "height": PHONE[1]}, user_agent=PHONE_AGENT,
                                  has_touch=True, is_mobile=True)
    context.add_init_script(run_tracker_js())
    try:
        page = context.new_page()
        page.problems = []
        page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))
        load(page, view_link(app_url, view, SENTENCES[18]), PHONE)
        wait_charts_drawn(page)
        page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
        tapped = 0
        for fx, fy in ((0.03, 0.03), (0.97, 0.03), (0.03, 0.97), (0.97, 0.97), (0.5, 0.5)):
            where = page.evaluate(TOOLTIP, 0)
            left, top, right, bottom = where["plot"]
            x, y = left + fx * (right - left), top + fy * (bottom - top)
            page.touchscreen.tap(x, y)
            page.wait_for_function(TOOLTIP_UP, arg=0)
            # keepInside moves it within a frame of plotly.js drawing it: wait for that, then measure
            page.wait_for_function(f"""() => {{ const w = ({TOOLTIP})(0);
                return w.tooltip && w.tooltip[0] >= w.plot[0] - 1 && w.tooltip[2] <= w.plot[2] + 1
                       && w.tooltip[1] >= w.plot[1] - 1 && w.tooltip[3] <= w.plot[3] + 1; }}""", timeout=5_000)
            shown = page.evaluate(TOOLTIP, 0)
            assert [label for label in shown["labels"] if overlaps(label, shown["tooltip"])] == [], (fx, fy, shown)
            tapped += 1
            if (fx, fy) == (0.03, 0.97):
                page.screenshot(path=str(screenshots / f"phone_tap_{view.lower()}.png"))
            page.touchscreen.tap(x, y)                                 # the same cell again: closed
            page.wait_for_function(f"(index) => !({TOOLTIP_UP})(index)", arg=0, timeout=5_000)
        page.touchscreen.tap(left + 0.5 * (right - left), top + 0.5 * (bottom - top))
        page.wait_for_function(TOOLTIP_UP, arg=0)
        page.touchscreen.tap(PHONE[0] / 2, bottom + 60)                 # below the plot, off the chart's cells
        page.wait_for_function(f"(index) => !({TOOLTIP_UP})(index)", arg=0, timeout=5_000)
        assert tapped == 5 and page.problems == []
    finally:
        context.close()
