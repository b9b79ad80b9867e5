"""What a room sees (issue 31), in Chromium: every view's share link in presenter mode at 1280x720
(a projector), with a 10-word and an 18-word sentence, draws its main chart over at least 60% of the
window, each chart in one pass, with text labels that never overlap (with the 18 words, whose last are
long, not even their upright boxes), tick labels of at least 12 px,
and the charts on the first screen wholly inside the window; the first screen of the default view holds its whole heatmap, both axes, under a one-line
page title; a phone (390x844) opens a share link on its chart, every view legible there; the presenter's bar and the input row
keep their buttons' words whole, and presenter mode offers the share link and its QR code."""
from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest

from atlas_ui.views import VIEWS
from browser_utils import GROWN_MARGINS, NEEDS_BROWSER, chart_share, script_run, wait_charts_drawn, wait_for_text

pytestmark = NEEDS_BROWSER
PROJECTOR, PHONE = (1280, 720), (390, 844)
SENTENCES = {10: "A little girl climbs the stairs to the red house.",
             18: "Two men in blue shirts and a woman in a red dress walk their dog on the beach."}
# 18 words whose last words are long: tilted 30 degrees, "▁church" ran onto "." (issue 52)
CHURCH = "A man in a red jacket is riding his bicycle down a narrow street past an old church."
PROJECTOR_SENTENCES = {10: SENTENCES[10], 18: CHURCH}
# the share-link parameters a view needs to show its picture (Beam: beam search; Ablation: heads off)
LINK_PARAMS = {"Decoding steps": {"step": 3}, "Beam": {"beam": 4},
               "Ablation": {"ablate": "cross:2:0,cross:2:1,cross:2:2,cross:2:3"}}
MIN_TICK_PX = 12
# each chart's x tick labels as drawn (.xtick, and .x2tick ... of its other x axes): their boxes on the
# screen (getBoundingClientRect: upright boxes, so a tilted label's box reaches over its neighbour's
# as its ink does)
X_LABEL_BOXES = """() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
  .map(gd => Array.from(new Set(gd.querySelectorAll('.xtick text, .xaxislayer-above text')))
    .filter(t => t.textContent.trim())
    .map(t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; }))"""


def boxes_apart(boxes) -> list:
    return [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5]


def view_link(base: str, view: str, sentence: str, **extra) -> str:
    params = {"view": view, "sentence": sentence, **LINK_PARAMS.get(view, {}), **extra}
    return f"{base}/?{urlencode(params, quote_via=quote)}"


# Every text label plotly.js drew in each chart (ticks, colour-bar numbers and words, legends, axis,
# chart and tile titles, text beside markers such as a beam tree's pieces), as the four corners of
# its box on the screen: the box in the text's own
# coordinates (getBBox) through its transform to the screen (getScreenCTM), so tilted labels keep
# their tilt instead of a larger upright box.
CHART_LABELS = """() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
  .map(gd => {
    const labels = [];
    const texts = gd.querySelectorAll('.xtick text, .ytick text, .colorbar text, .legendtext, '
                                      + 'text[class*="title"], .annotation-text, .textpoint text');
    for (const el of new Set(texts)) {
      const style = getComputedStyle(el);
      if (!el.textContent.trim() || style.display === 'none' || style.visibility === 'hidden') continue;
      const box = el.getBBox(), m = el.getScreenCTM();
      if (!m || box.width === 0) continue;
      const at = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
      labels.push({text: el.textContent, tick: Boolean(el.closest('.xtick, .ytick')),
                   size: parseFloat(style.fontSize),
                   corners: [at(box.x, box.y), at(box.x + box.width, box.y),
                             at(box.x + box.width, box.y + box.height), at(box.x, box.y + box.height)]});
    }
    const r = gd.getBoundingClientRect();
    return {title: (gd.layout && gd.layout.title && gd.layout.title.text) || '', labels,
            rect: [r.left, r.top, r.right, r.bottom]};
  })"""


def _projection(corners, axis):
    return [x * axis[0] + y * axis[1] for x, y in corners]


def boxes_overlap(a, b, slack: float = 1.0) -> bool:
    """Whether two convex quadrilaterals overlap by more than `slack` px (separating axis test):
    glyph boxes include the font's leading, so boxes that touch are not text on text."""
    for corners in (a, b):
        for i in range(4):
            (x1, y1), (x2, y2) = corners[i], corners[(i + 1) % 4]
            length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5
            if length == 0:
                continue
            axis = ((y1 - y2) / length, (x2 - x1) / length)
            pa, pb = _projection(a, axis), _projection(b, axis)
            if min(pa) >= max(pb) - slack or min(pb) >= max(pa) - slack:
                return False
    return True


def overlapping_labels(labels: list) -> list:
    return [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:]
            if boxes_overlap(a["corners"], b["corners"])]


def test_the_overlap_check_sees_overlap_and_tilted_neighbours_apart():
    square = [(0, 0), (10, 0), (10, 10), (0, 10)]
    assert boxes_overlap(square, [(5, 5), (15, 5), (15, 15), (5, 15)])
    assert not boxes_overlap(square, [(10.5, 0), (20, 0), (20, 10), (10.5, 10)])
    # two boxes tilted 45 degrees side by side: their upright bounding boxes overlap, they do not
    tilted = [(0, 10), (10, 0), (12, 2), (2, 12)]
    assert not boxes_overlap(tilted, [(x + 6, y + 6) for x, y in tilted])


@pytest.mark.parametrize("words", sorted(PROJECTOR_SENTENCES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_presenter_charts_are_legible_on_a_projector(pages, app_url, view, words):
    """Presenter mode at 1280x720: no sidebar, the main chart fills at least 60% of the window's
    height, every chart is drawn in one pass in presenter type (browser_utils.GROWN_MARGINS), and its
    text labels are legible (below)."""
    page = pages.open(view_link(app_url, view, PROJECTOR_SENTENCES[words], present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    share = chart_share(page)
    assert share >= 0.60, f"{view}, {words} words: the main chart fills {share:.0%} of a 1280x720 window"
    assert not page.locator('[data-testid="stSidebar"]').first.is_visible()
    assert page.evaluate(GROWN_MARGINS) == [], "presenter type: every chart drawn in one pass"
    charts, x_label_boxes = page.evaluate(CHART_LABELS), page.evaluate(X_LABEL_BOXES)
    width, height = PROJECTOR
    for chart, x_boxes in zip(charts, x_label_boxes):
        name = f"{view}, {words} words, {chart['title'][:50]!r}"
        assert overlapping_labels(chart["labels"]) == [], name
        if words == 18:                # CHURCH: the long last pieces' upright boxes keep apart too
            assert boxes_apart(x_boxes) == [], name
        sizes = [label["size"] for label in chart["labels"] if label["tick"]]
        assert sizes and min(sizes) >= MIN_TICK_PX, f"{name}: tick labels of {min(sizes or [0])} px"
        left, top, right, bottom = chart["rect"]
        if top < height:               # on the first screen: wholly inside the window
            assert left >= 0 and top >= 0 and right <= width and bottom <= height, f"{name}: {chart['rect']}"
    first = min(charts, key=lambda chart: chart["rect"][1])
    assert first["rect"][1] < height / 2, f"{view}: the main chart starts at {first['rect'][1]:.0f} px"
    assert page.problems == []


def test_the_first_screen_holds_the_default_heatmap_with_both_axes_under_a_page_title(pages, app_url):
    page = pages.open(app_url, viewport=PROJECTOR)         # the default view, as a newcomer opens it
    wait_charts_drawn(page)
    width, height = PROJECTOR
    # every view's name on one line: a second line of the picker pushes the chart below the window
    tops = page.evaluate("""() => [...document.querySelectorAll('.st-key-view [data-testid="stRadioOption"]')]
                                 .map(option => Math.round(option.getBoundingClientRect().top))""")
    assert len(tops) >= 15 and len(set(tops)) == 1, f"the view picker takes {len(set(tops))} lines: {tops}"
    main = page.evaluate(CHART_LABELS)[0]
    left, top, right, bottom = main["rect"]
    assert left >= 0 and top >= 0 and right <= width and bottom <= height, main["rect"]
    ticks = [label for label in main["labels"] if label["tick"]]
    assert len({label["text"] for label in ticks}) > 10               # both axes' pieces are drawn...
    for label in ticks:                                               # ...and every one is on screen
        assert all(0 <= x <= width and 0 <= y <= height for x, y in label["corners"]), label["text"]
    # the title is on the page (the sidebar, which holds the other one, starts folded), on one line
    title = page.locator('[data-testid="stMain"] .aa-title')
    assert title.inner_text().startswith("Attention Atlas")
    box = title.bounding_box()
    assert box["height"] < 50 and box["y"] + box["height"] <= top
    assert not page.locator('[data-testid="stSidebar"]').first.is_visible()
    assert page.problems == []


# buttons whose words do not fit: the label's text runs wider than the room it is drawn in
CUT_BUTTONS = """(scope) => Array.from(document.querySelectorAll(scope + ' button'))
    .filter(b => b.offsetParent !== null)
    .map(b => [b.innerText.trim(), b.querySelector('p, [data-testid="stMarkdownContainer"]') || b])
    .filter(([text, el]) => text && el.scrollWidth > el.clientWidth + 1)
    .map(([text]) => text)"""


def test_the_presenter_bar_keeps_its_buttons_words_and_shows_the_share_link(pages, app_url):
    page = pages.open(view_link(app_url, "Heatmap", SENTENCES[10], present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    with script_run(page, runs=0):                    # opening the popover draws what it holds already
        page.get_by_role("button", name="Sentence and decoding").click()
    popover = '[data-testid="stPopoverBody"]'
    page.locator(popover).get_by_role("button", name="Translate").wait_for()
    assert page.evaluate(CUT_BUTTONS, popover) == []
    page.keyboard.press("Escape")
    # the share link and its QR code, without leaving presenter mode
    with script_run(page):
        page.get_by_role("button", name="Share").click()
    wait_for_text(page, "Scan to open this view")
    link = page.locator(f'{popover} .st-key-share_link a')
    href = link.get_attribute("href")           # the audience opens the plain page on a phone
    assert "view=Heatmap" in href and "present=" not in href
    assert page.locator(f'{popover} [data-testid="stImage"]').first.is_visible()
    assert page.problems == []


def test_the_input_row_keeps_its_buttons_words_with_the_sidebar_open(pages, app_url):
    page = pages.open(view_link(app_url, "Heatmap", SENTENCES[10]), viewport=PROJECTOR)
    wait_charts_drawn(page)
    page.locator('[data-testid="stExpandSidebarButton"]').click()
    # open, and the main area moved over beside it (the buttons are measured in the narrower row)
    page.wait_for_function("""() => { const s = document.querySelector('[data-testid="stSidebar"]');
                                      const m = document.querySelector('[data-testid="stMainBlockContainer"]');
                                      return s && m && s.getBoundingClientRect().right > 200
                                             && m.getBoundingClientRect().left >= s.getBoundingClientRect().right; }""")
    assert page.evaluate(CUT_BUTTONS, '[data-testid="stMain"]') == []
    assert page.problems == []


def test_a_desktop_keeps_the_chart_tool_bar_a_phone_does_not(pages, app_url):
    """The camera button (download the chart as a picture) stays on a desktop; a phone gets none."""
    camera = '[data-testid="stPlotlyChart"] .modebar-btn[data-title^="Download plot"]'
    page = pages.open(view_link(app_url, "Heatmap", SENTENCES[10]), viewport=PROJECTOR)
    wait_charts_drawn(page)
    assert page.locator(camera).count() >= 1
    page = pages.open(view_link(app_url, "Heatmap", SENTENCES[10]), viewport=PHONE, phone=True)
    wait_charts_drawn(page)
    assert page.locator(camera).count() == 0
    assert page.problems == []


@pytest.mark.parametrize("view", ["Heatmap", "Decoding steps"])
def test_a_narrow_desktop_window_thins_its_tick_labels(pages, app_url, view):
    """A desktop browser's window narrowed to a phone's width (no phone User-Agent: its charts are
    built for 1280 px) keeps at most every k-th x label (page/style.phone_tick_css)."""
    page = pages.open(view_link(app_url, view, SENTENCES[18]), viewport=PHONE)
    wait_charts_drawn(page)
    for chart in page.evaluate(CHART_LABELS):
        ticks = [label for label in chart["labels"] if label["tick"]]
        assert overlapping_labels(ticks) == [], f"{view}, {chart['title'][:50]!r}"
    assert page.locator('[data-testid="stPlotlyChart"] .colorbar').count() > 0     # built for a desktop
    assert page.problems == []
