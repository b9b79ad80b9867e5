"""Browser test with a Hugging Face model: a tiny Marian directory (built offline by hf_tiny) is the
only model in $ATLAS_MODELS_DIR of this module's own server; every view renders in Chromium and a
translation is shown."""
from __future__ import annotations

import re

import pytest

from atlas_ui.views import VIEWS
from browser_utils import NEEDS_BROWSER, TRANSLATION, pick_view, running_app, script_run, wait_charts_drawn

pytestmark = NEEDS_BROWSER


@pytest.fixture(scope="module")
def marian_url(hf_dirs, tmp_path_factory):
    models = tmp_path_factory.mktemp("hf-models")
    hf_dirs.copy("marian", models / "opus-tiny-en-de")
    with running_app(tmp_path_factory.mktemp("hf-server"), env={"ATLAS_MODELS_DIR": str(models)}) as url:
        yield url


def test_every_view_renders_with_a_marian_model(pages, marian_url):
    page = pages.open(f"{marian_url}/?sentence=A+man+is+riding+a+bike.")
    assert page.locator(TRANSLATION).inner_text().strip(), "a translation is shown"
    assert "Hugging Face model" in page.locator('[data-testid="stSidebar"]').inner_text()
    for view in VIEWS:
        pick_view(page, view)
        if view == "Beam":                       # greedy: the view offers beam search
            with script_run(page):
                page.get_by_role("button", name="Use beam search").click()
        if view == "Ablation":                   # the head picker is folded in a popover above the chart
            with script_run(page):               # drawn only while open: opening it is one run
                page.get_by_role("button", name=re.compile(r"Heads switched off")).click()
            with script_run(page):
                page.get_by_role("button", name="Whole layer 0").first.click()
        wait_charts_drawn(page)
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "Something went wrong" not in main and "did not work" not in main, f"{view}: {main[:300]}"
        assert page.locator('[data-testid="stException"]').count() == 0, view
    assert page.problems == []
