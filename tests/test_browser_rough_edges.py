"""Rough edges of issue 52's walk that are about layout, read from Chromium at 1280x720."""
from __future__ import annotations

import pytest

from browser_utils import NEEDS_BROWSER, wait_charts_drawn
from test_browser_room import CUT_BUTTONS, PROJECTOR, SENTENCES, view_link

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
