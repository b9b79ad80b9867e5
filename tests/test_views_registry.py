"""The view registry (atlas_ui/views): the same names as before (share links carry them), one
sentence per view, every view drawn through the page, and a new view needing only a registry entry."""
from __future__ import annotations

import re

import plotly.graph_objects as go
import pytest
import streamlit as st

from test_app import check_clean, new_app
from atlas_ui.views import VIEWS, View, ViewContext

# the names before the registry: links shared since then carry them as view=
RELEASED = ("Heatmap", "Layer grid", "Overview", "Decoding steps", "Beam", "Head summary", "Rollout", "Ablation",
            "Compare", "Masks", "Positional encodings", "Attribution")
SENTENCE = "A dog runs after a red ball."


def opened(**params):
    at = new_app()
    at.query_params.update(sentence=SENTENCE, **params)
    return at.run()


def captions(at) -> list[str]:
    return [caption.value for caption in at.main.caption]


def test_the_registry_keeps_every_released_name_in_order():
    assert tuple(VIEWS)[:len(RELEASED)] == RELEASED                         # new views come after them
    assert [view.name for view in VIEWS.values()] == list(VIEWS)          # each keyed by its own name
    assert len({view.title for view in VIEWS.values()}) == len(VIEWS)
    assert {name for name, view in VIEWS.items() if view.norm_switch} == {
        "Heatmap", "Layer grid", "Overview", "Decoding steps", "Compare"}
    assert [name for name, view in VIEWS.items() if view.needs_explain] == ["Attribution"]


@pytest.mark.parametrize("name", RELEASED)
def test_each_view_says_in_one_sentence_what_it_shows(name):
    view = VIEWS[name]
    assert isinstance(view, View) and callable(view.render) and view.title.strip()
    sentence = view.explains.strip()
    assert 40 <= len(sentence) <= 250, sentence
    assert sentence[0].isupper() and sentence.endswith("."), sentence
    assert not re.search(r"[.!?]\s+[A-Z]", sentence), f"more than one sentence: {sentence}"


@pytest.mark.parametrize("name", RELEASED)
def test_a_share_link_opens_each_view_and_it_renders(name):
    at = opened(view=name)
    check_clean(at, name)
    assert at.radio(key="view").value == name
    above = f"**{VIEWS[name].title}.** {VIEWS[name].explains}"
    assert above in captions(at), "the view's title and sentence are shown above it"
    if name in ("Beam", "Ablation"):           # greedy, nothing ticked: the view says what it needs
        assert at.info, f"{name} explains what it needs"
    else:
        assert at.get("plotly_chart"), f"{name} shows charts"


def test_an_unknown_view_in_a_link_opens_the_first_view():
    at = opened(view="No such view")
    check_clean(at, "unknown view")
    assert at.radio(key="view").value == RELEASED[0]


def fake_view(seen: list, **flags) -> View:
    def render(ctx: ViewContext):
        seen.append(ctx)
        st.markdown(f"Fake view of {len(ctx.result.output_tokens)} pieces")
        return go.Figure()
    return View(name="Fake", title="A view added by a test", explains="A view that only counts the pieces.",
                render=render, **flags)


def test_a_new_view_needs_only_its_registry_entry(monkeypatch):
    seen: list = []
    monkeypatch.setitem(VIEWS, "Fake", fake_view(seen))
    at = opened(view="Fake")
    check_clean(at, "fake view")
    assert at.radio(key="view").options[-1] == "Fake" and at.radio(key="view").value == "Fake"
    assert "**A view added by a test.** A view that only counts the pieces." in captions(at)
    assert len(seen) == 1 and isinstance(seen[0], ViewContext)
    ctx = seen[0]
    assert ctx.text == SENTENCE and ctx.result.output_tokens and not ctx.result.explained
    assert any(m.value == f"Fake view of {len(ctx.result.output_tokens)} pieces" for m in at.main.markdown)
    assert ctx.example_texts() and all(isinstance(text, str) for text in ctx.example_texts())
    at.radio(key="view").set_value("Heatmap").run()                     # and away again, like any view
    check_clean(at, "away from the fake view")
    assert len(seen) == 1 and at.get("plotly_chart")


def test_the_text_a_view_gets_is_the_page_run_s_already_cut(monkeypatch):
    """ctx.text reaches ViewContext.variant (Ablation, Beam) cut to MAX_CHARS: it is the page's run's
    text (page/sentences.split_input cuts the input, page/translation.page_run names the run), so variant
    derives its runs from ctx.run without cutting again, for one long sentence and for several."""
    from atlas_ui.server.settings import MAX_CHARS
    seen: list = []
    off = (("cross", 0, 0),)

    def render(ctx: ViewContext):
        seen.append((ctx, ctx.variant(head_mask=off)))
        return go.Figure()
    monkeypatch.setitem(VIEWS, "Fake", View(name="Fake", title="A view that asks for a variant",
                                            explains="A view that asks for the run with one head off.",
                                            render=render))
    one = " ".join(["A dog runs after a red ball"] * 40)                 # no sentence end: one sentence
    several = "A dog runs. " + one + ". A cat sleeps."                   # the second one shown, cut
    for text, shown, params in ((one, one[:MAX_CHARS], {}), (several, several[12:MAX_CHARS], {"sentence_no": "2"})):
        at = new_app()
        at.query_params.update(sentence=text, view="Fake", **params)
        at.run()
        check_clean(at, "long text")
        assert any(f"{MAX_CHARS} characters" in w.value for w in at.warning)
        ctx, ablated = seen[-1]
        assert len(text) > MAX_CHARS and ctx.text == shown == ctx.run.text
        assert ablated.key == ctx.run.but(head_mask=off, explain=False).digest and ablated.head_mask == off


@pytest.mark.parametrize("norm_switch", [True, False])
def test_the_registry_entry_decides_whether_the_run_is_explained(monkeypatch, norm_switch):
    """A link asking for norm-weighted values gets an explained run only for a view with the switch."""
    seen: list = []
    monkeypatch.setitem(VIEWS, "Fake", fake_view(seen, norm_switch=norm_switch))
    at = opened(view="Fake", norm="1")
    check_clean(at, f"fake view, norm_switch={norm_switch}")
    assert seen[-1].result.explained is norm_switch
    assert seen[-1].display.norm is norm_switch
