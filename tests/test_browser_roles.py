"""The Head roles view in Chromium (issue 34): the alignment's links read back from the page's SVG
(each line's two ends matched to the word labels above and below) equal translate(align=True)'s, by
words; presenter mode at 1280x720 (a projector) with an 18-word sentence draws the alignment first,
inside the window, no label on another, tick labels >= 12 px; a click on a head of the role map
opens it; a phone (390x844) opens the link on the alignment, its labels apart. Screenshots go to the test's
temporary folder."""
from __future__ import annotations

import pytest

from browser_utils import NEEDS_BROWSER, click_point, wait_charts_drawn, wait_for_text
from test_app import MODELS
from test_browser_room import CHART_LABELS, MIN_TICK_PX, PHONE, PROJECTOR, SENTENCES, overlapping_labels, view_link

pytestmark = [NEEDS_BROWSER, pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")]
VIEW = "Head roles"

# Every line of the first chart (the alignment): its path's two ends on the screen, matched to the
# nearest word label of the top axis (source) and of the bottom axis (output) by x, and the line's
# colour. The labels' text carries the word's index as subscript digits.
SVG_LINKS = """() => {
  const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  const centre = el => { const b = el.getBoundingClientRect(); return {x: b.left + b.width / 2, y: b.top + b.height / 2,
                                                                   text: el.textContent}; };
  const top = Array.from(gd.querySelectorAll('.x2tick text')).map(centre);
  const bottom = Array.from(gd.querySelectorAll('.xtick text')).map(centre);
  const ends = [];
  for (const path of gd.querySelectorAll('.scatterlayer .trace path.js-line')) {
    const n = path.getTotalLength();
    if (!n) continue;
    const m = path.getScreenCTM(), at = p => [m.a * p.x + m.c * p.y + m.e, m.b * p.x + m.d * p.y + m.f];
    const a = at(path.getPointAtLength(0)), b = at(path.getPointAtLength(n));
    const [up, down] = a[1] < b[1] ? [a, b] : [b, a];
    ends.push({up, down, colour: getComputedStyle(path).stroke});
  }
  return {top, bottom, ends};
}"""
SUB = {c: str(i) for i, c in enumerate("₀₁₂₃₄₅₆₇₈₉")}
# test_browser_room's labels of every chart, with the ticks of the second and third axes too (the
# alignment's source words are x2 ticks, the role maps' kinds have axes 2 and 3)
TICKS = ".xtick, .x2tick, .x3tick, .ytick, .y2tick, .y3tick"
LABELS = CHART_LABELS.replace("'.xtick text, .ytick text, .colorbar text, ",
                              "'" + ", ".join(f"{t} text" for t in TICKS.split(", ")) + ", .colorbar text, ").replace(
    "el.closest('.xtick, .ytick')", f"el.closest('{TICKS}')")
assert LABELS.count("x2tick") == 2


def label_index(text: str) -> int:
    """"man₁" -> 1: the word's index from its subscript digits."""
    digits = "".join(SUB[c] for c in text if c in SUB)
    assert digits, text
    return int(digits)


def svg_links(page) -> list[tuple[int, int]]:
    drawn = page.evaluate(SVG_LINKS)
    links = []
    for end in drawn["ends"]:
        source = min(drawn["top"], key=lambda label: abs(label["x"] - end["up"][0]))
        output = min(drawn["bottom"], key=lambda label: abs(label["x"] - end["down"][0]))
        assert abs(source["x"] - end["up"][0]) < 2 and abs(output["x"] - end["down"][0]) < 2, (end, source, output)
        assert source["y"] < end["up"][1] < end["down"][1] < output["y"]   # source words above, output words below
        links.append((label_index(source["text"]), label_index(output["text"])))
    return sorted(links)


def api_word_links(translator, text: str) -> list[tuple[int, int]]:
    """translate(align=True)'s piece links as word links, the words as the view counts them."""
    from atlas_ui.runs.alignment import word_links_of
    from transformer.analysis.aligner import pair_words
    from transformer.analysis.alignment import text_words
    out = translator.translate(text, align=True)
    words = pair_words(translator, out.source_ids, out.output_ids, text_words(text), text_words(out.text))
    return word_links_of(out.alignment, words.source, words.target)


def test_the_alignment_links_on_the_page_are_the_api_links(pages, app_url, translator, tmp_path):
    text = SENTENCES[10]
    page = pages.open(view_link(app_url, VIEW, text), viewport=(1280, 900))
    wait_charts_drawn(page, 2)
    expected = api_word_links(translator, text)
    assert expected and svg_links(page) == expected
    page.screenshot(path=str(tmp_path / "roles-1280x900.png"), full_page=True)
    assert page.problems == []


def test_a_click_on_a_head_of_the_map_opens_it(pages, app_url, tmp_path):
    page = pages.open(view_link(app_url, VIEW, SENTENCES[10], kind="cross", layer=2, head=3,
                                        gold="0-0 1-1 2-2 3-3 4p4 5-5 9-6"), viewport=(1280, 900))
    wait_charts_drawn(page, 3)
    wait_for_text(page, "Against your gold")
    page.screenshot(path=str(tmp_path / "roles-gold-1280x900.png"))
    # the role map is the second chart; its traces: per kind a heatmap, then its click markers
    # (encoder self, decoder self, cross): trace 5 is cross-attention's, point 8 + 7 = layer 1, head 7
    click_point(page, 1, 5, 8 + 7)
    wait_for_text(page, "Cross-attention, layer 1, head 7")
    assert "layer=1" in page.url and "head=7" in page.url and "kind=cross" in page.url
    page.screenshot(path=str(tmp_path / "roles-clicked-1280x900.png"), full_page=True)
    assert page.problems == []


def test_presenter_alignment_is_legible_and_inside_a_projector_window(pages, app_url, translator, tmp_path):
    text = SENTENCES[18]
    page = pages.open(view_link(app_url, VIEW, text, present=1), viewport=PROJECTOR)
    wait_charts_drawn(page)
    page.screenshot(path=str(tmp_path / "roles-presenter-1280x720.png"))
    charts = page.evaluate(LABELS)
    width, height = PROJECTOR
    first = min(charts, key=lambda chart: chart["rect"][1])
    assert first["title"].startswith("Word alignment"), first["title"]
    left, top, right, bottom = first["rect"]
    assert left >= 0 and top >= 0 and right <= width and bottom <= height and top < height / 2, first["rect"]
    for chart in charts:
        assert overlapping_labels(chart["labels"]) == [], chart["title"][:60]
        sizes = [label["size"] for label in chart["labels"] if label["tick"]]
        assert sizes and min(sizes) >= MIN_TICK_PX, f"{chart['title'][:60]}: tick labels of {min(sizes or [0])} px"
    # every word of the 18-word sentence has its label, and the links are still the API's
    drawn = page.evaluate(SVG_LINKS)
    assert len(drawn["top"]) >= 18
    assert svg_links(page) == api_word_links(translator, text)
    assert page.problems == []


def test_a_phone_opens_the_link_on_the_alignment(pages, app_url, tmp_path):
    page = pages.open(view_link(app_url, VIEW, SENTENCES[18]), viewport=PHONE)
    wait_charts_drawn(page)
    page.screenshot(path=str(tmp_path / "roles-phone-390x844.png"))
    box = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
    assert 0 < box["y"] < PHONE[1] - 120 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0] + 1, box
    title = page.evaluate("() => document.querySelector('.js-plotly-plot').layout.title.text")
    assert title.startswith("Word alignment"), title
    # the words stand upright there and fill the top margin: the title gives way, no label on another
    alignment = page.evaluate(LABELS)[0]
    texts = [label["text"] for label in alignment["labels"]]
    assert overlapping_labels(alignment["labels"]) == [] and len(texts) >= 18 + 16, texts
    assert not any(label["text"].startswith("Word alignment") for label in alignment["labels"])
    page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "roles-phone-alignment-390x844.png"))
    page.locator('.st-key-roles_maps').scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "roles-phone-maps-390x844.png"))
    assert page.problems == []
