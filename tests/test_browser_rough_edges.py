"""Rough edges of issue 52's walk that are about layout, read from Chromium at 1280x720 (the phone's are in
tests/test_browser_phone.py)."""
from __future__ import annotations

import pytest

from browser_utils import GROWN_MARGINS, NEEDS_BROWSER, chart_share, script_run, wait_charts_drawn
from test_browser_room import CHURCH, CUT_BUTTONS, PROJECTOR, SENTENCES, X_LABEL_BOXES, boxes_apart, view_link

pytestmark = NEEDS_BROWSER
SIDEBAR_OPEN = """() => { const s = document.querySelector('[data-testid="stSidebar"]');
                          const m = document.querySelector('[data-testid="stMainBlockContainer"]');
                          return s && m && s.getBoundingClientRect().right > 200
                                 && m.getBoundingClientRect().left >= s.getBoundingClientRect().right; }"""


@pytest.mark.parametrize("present", [False, True])
def test_head_summary_keeps_the_undo_buttons_words(pages, app_url, present, screenshots):
    """The opened head's "↩ Undo focus" sat in a fifth of a half column: "↩ Undo f…" with the
    sidebar open."""
    page = pages.open(view_link(app_url, "Head summary", SENTENCES[18], **({"present": 1} if present else {})),
                      viewport=PROJECTOR)
    wait_charts_drawn(page)
    if not present:
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.wait_for_function(SIDEBAR_OPEN)
    assert page.get_by_role("button", name="↩ Undo focus").is_visible()
    assert page.evaluate(CUT_BUTTONS, '[data-testid="stMain"]') == []
    page.screenshot(path=str(screenshots / f"rough_head_summary_{'present' if present else 'sidebar'}.png"))
    assert page.problems == []


# ---- an 18-word sentence whose last words are long (test_browser_room.CHURCH) ----------------------
# Presenter mode is checked on every view's link in test_browser_room.test_presenter_charts_are_legible_on_a_projector.
MODES = {"plain": {}, "presenter": {"present": 1}}


@pytest.mark.parametrize("view", ["Heatmap", "Layer grid", "Overview", "Beam", "Ablation", "Attribution",
                                  "Diagnosis"])
def test_x_tick_labels_never_touch_their_neighbours(pages, app_url, view):
    """Tilted 30 degrees, "▁church" reached over "."; labels that do not fit side by side now stand
    upright (or every k-th stays), and no two label boxes overlap."""
    page = pages.open(view_link(app_url, view, CHURCH), viewport=PROJECTOR)
    wait_charts_drawn(page)
    charts = page.evaluate(X_LABEL_BOXES)
    assert any(len(boxes) > 15 for boxes in charts), f"{view}: the test needs a chart with the sentence's pieces"
    for boxes in charts:
        assert boxes_apart(boxes) == [], view
    assert page.problems == []


BRIGHT_CELL = """() => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
  .filter(gd => (gd.layout.title.text || '').startsWith('Cross-attention over the source'))
  .map(gd => { const row = Array.from(gd._fullData[0].z[0]), x = gd._fullLayout.xaxis;     // decoded (typed) arrays
               return {column: row.indexOf(Math.max(...row)), keys: row.length, tickvals: Array.from(x.tickvals),
                       ticktext: Array.from(x.ticktext),
                       drawn: Array.from(gd.querySelectorAll('.xtick text')).map(t => t.textContent)}; })"""


def test_the_bright_cell_of_decoding_steps_keeps_its_label_in_presenter_mode(pages, app_url):
    """Presenter type keeps every k-th key label; the step's brightest key is always among them."""
    thinned = 0
    for step in (2, 4, 9, 14):
        page = pages.open(view_link(app_url, "Decoding steps", CHURCH, present=1, step_no=step), viewport=PROJECTOR)
        wait_charts_drawn(page, 3)
        (cell,) = page.evaluate(BRIGHT_CELL)
        thinned += len(cell["tickvals"]) < cell["keys"]
        assert cell["column"] in cell["tickvals"], (step, cell)
        assert cell["ticktext"][cell["tickvals"].index(cell["column"])] in cell["drawn"], (step, cell)
        assert page.problems == []
    assert thinned, "the test needs a step whose key labels were thinned"


LENS_CELLS = """() => { const gd = document.querySelector('.st-key-lens_picture .js-plotly-plot');
  const text = gd.data[0].text, hover = gd.data[0].hovertext;
  return {cells: text.flatMap((row, r) => row.map((t, c) => [t, /<br>1\\. (.*?)  [0-9.]+(<br>|$)/.exec(hover[r][c])[1]])),
          size: gd.data[0].textfont.size,
          drawn: Array.from(gd.querySelectorAll('.heatmaplayer text')).map(t => t.textContent)}; }"""


def test_the_logit_lens_shows_each_cells_piece_whole_in_presenter_mode(pages, app_url, screenshots):
    """"ju…", "bl…": presenter type cut the lens's pieces. Each cell holds its whole top piece (in two
    lines or smaller type where it must; a piece may lose its word-start ▁)."""
    page = pages.open(view_link(app_url, "Logit lens", CHURCH, present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    lens = page.evaluate(LENS_CELLS)
    for text, piece in lens["cells"]:
        assert text.replace("<br>", "") in (piece, piece[1:]), (text, piece)
    assert any("<br>" in text for text, _ in lens["cells"]), "the test needs a piece too wide for one line"
    assert lens["drawn"] and not [text for text in lens["drawn"] if "…" in text]
    assert lens["size"] >= 9
    page.screenshot(path=str(screenshots / "rough_lens_present.png"))
    assert page.problems == []


PILLS = """() => Array.from(document.querySelectorAll('[data-testid="stPopoverBody"] [data-testid="stButtonGroup"]'))
  .map(group => { const g = group.getBoundingClientRect();
    return {scrolls: group.scrollWidth > group.clientWidth + 1,
            heads: Array.from(group.querySelectorAll('button')).map(b => { const r = b.getBoundingClientRect();
              return [b.innerText.trim(), r.left >= g.left - 1 && r.right <= g.right + 1 && r.width > 0]; })}; })"""


@pytest.mark.parametrize("mode", list(MODES))
def test_the_ablation_popover_shows_every_head(pages, app_url, mode):
    """An 8-head layer's pills ran past their third of the popover: heads 5-7 behind a scroll."""
    page = pages.open(view_link(app_url, "Ablation", CHURCH, **MODES[mode]), viewport=PROJECTOR)
    wait_charts_drawn(page)
    with script_run(page):
        page.get_by_role("button", name="Heads switched off").click()
    page.locator('[data-testid="stPopoverBody"] [data-testid="stButtonGroup"]').first.wait_for()
    groups = page.evaluate(PILLS)
    assert len(groups) == 9                                   # 3 kinds x 3 layers
    for group in groups:
        assert [head for head, _ in group["heads"]] == [str(h) for h in range(8)]
        assert not group["scrolls"] and all(inside for _, inside in group["heads"]), group
    assert page.problems == []


PLOT_AREA = """(title) => { const gd = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot'))
  .find(gd => (gd.layout.title.text || '') === title); const s = gd._fullLayout._size; return [s.w, s.h]; }"""


@pytest.mark.parametrize("mode", list(MODES))
def test_the_masks_use_the_screen(pages, app_url, mode, screenshots):
    """In thirds, beside the one-row padding mask, the masks were 115 px wide in presenter mode; the
    two square ones now share the width."""
    page = pages.open(view_link(app_url, "Masks", CHURCH, **MODES[mode]), viewport=PROJECTOR)
    wait_charts_drawn(page)
    for title in ("Causal mask", "Combined decoder mask"):
        width, height = page.evaluate(PLOT_AREA, title)
        assert width >= 400 and height >= 250, (title, width, height)
    assert chart_share(page) >= 0.55
    assert page.evaluate(GROWN_MARGINS) == []
    page.screenshot(path=str(screenshots / f"rough_masks_{mode}.png"))
    assert page.problems == []


SHARE_BOX = """() => { const body = document.querySelector('[data-testid="stPopoverBody"]');
  const b = body.getBoundingClientRect(), code = body.querySelector('[data-testid="stCode"]').getBoundingClientRect();
  const link = body.querySelector('.st-key-share_link a'), l = link.getBoundingClientRect();
  const top = document.elementFromPoint(l.left + l.width / 2, l.top + l.height / 2);
  return {scrolls: body.scrollHeight > body.clientHeight + 1, code: [code.top, code.bottom], body: [b.top, b.bottom],
          window: window.innerHeight, linkOnTop: link.contains(top)}; }"""


def test_the_presenter_share_popover_shows_the_whole_link_and_nothing_covers_it(pages, app_url):
    page = pages.open(view_link(app_url, "Heatmap", CHURCH, present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    share = page.get_by_role("button", name="Share")
    share.hover()
    with script_run(page):
        share.click()
    page.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]').wait_for()
    page.locator('[data-testid="stPopoverBody"] [data-testid="stImage"] img').first.wait_for()
    box = page.evaluate(SHARE_BOX)
    assert not box["scrolls"] and box["code"][1] <= min(box["body"][1], box["window"]), box
    assert box["linkOnTop"], "a tooltip covers “Link to this view”"
    assert page.problems == []


SELECT_TEXT = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stSelectbox"] input'))
  .filter(input => input.offsetParent !== null).map(input => {
    const probe = document.createElement('span');
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap;font:' + getComputedStyle(input).font;
    probe.textContent = input.value;
    document.body.appendChild(probe);
    const needs = probe.getBoundingClientRect().width, style = getComputedStyle(input);
    probe.remove();
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return [input.value, Math.max(needs, input.scrollWidth > input.clientWidth + 1 ? Infinity : 0), room]; })"""
CUT_TOGGLES = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .stCheckbox label p'))
  .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.innerText)"""


@pytest.mark.parametrize("sidebar", [False, True])
@pytest.mark.parametrize("view, extra", [("Compare", {}), ("Head summary", {"kind": "decoder_self"}),
                                         ("Heatmap", {"kind": "decoder_self"})])
def test_dropdowns_and_toggles_keep_their_words(pages, app_url, view, extra, sidebar):
    """"Cross-attenti" with the sidebar open; the Compare metric and the Head summary statistic cut."""
    page = pages.open(view_link(app_url, view, CHURCH, **extra), viewport=PROJECTOR)
    wait_charts_drawn(page)
    if sidebar:
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.wait_for_function(SIDEBAR_OPEN)
    fields = page.evaluate(SELECT_TEXT)
    assert fields and [field for field in fields if field[1] > field[2] + 1] == [], fields
    assert page.evaluate(CUT_TOGGLES) == []
    assert page.evaluate(CUT_BUTTONS, '[data-testid="stMain"]') == []
    assert page.problems == []
