"""AppTest checks of the what-if branches (issue 23): a click on a candidate decodes on from there,
both translations stand side by side, the switch makes every view draw the branch, a branch of a
branch builds a small tree, the share link holds the branch, and stale or bad branches get a
clear message while the page keeps working. Numbers are checked against the Translator API."""
from __future__ import annotations

import math
from functools import partial
from html.parser import HTMLParser

import pytest

from test_app import MODELS, check_clean, escaped, new_app, opened_link, opened_on_a_branch, specs

EN = "A man in a blue shirt is riding a bike down the street."
pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")


def opened(**params):
    return opened_link(**{"model": "en-de", "view": "Decoding steps", "sentence": EN, **params})


class _Table(HTMLParser):
    """The side-by-side table's rows: name and log p, pieces, hover texts and the framed step."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows, self.title, self._cell, self._in = [], "", None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "th" and attrs.get("class") == "aa-row":
            self.rows.append({"label": "", "pieces": [], "hover": [], "framed": []})
            self._in = "label"
        elif tag == "td" and attrs.get("class") == "aa-piece" and self.rows:
            self.rows[-1]["pieces"].append("")
            self.rows[-1]["hover"].append(attrs.get("title", ""))
            self.rows[-1]["framed"].append("box-shadow" in attrs.get("style", ""))
            self._in = "piece"
        elif tag == "div" and attrs.get("class") == "aa-branch-title":
            self._in = "title"

    def handle_endtag(self, tag):
        if (tag, self._in) in (("th", "label"), ("td", "piece")) or (tag == "div" and self._in == "title"):
            self._in = None

    def handle_data(self, data):
        if self._in == "label":
            self.rows[-1]["label"] += data + " "
        elif self._in == "piece":
            self.rows[-1]["pieces"][-1] += data
        elif self._in == "title":
            self.title += data


def compare_table(at) -> _Table:
    """The what-if side-by-side (viz.branch.branch_compare_html), parsed from the page's markdown."""
    found = [m.value for m in at.markdown if 'class="aa-branch"' in m.value]
    assert len(found) == 1, "one side-by-side table"
    table = _Table()
    table.feed(found[0])
    assert len(table.rows) == 2
    return table


def branch_pieces(at) -> list:
    return compare_table(at).rows[1]["pieces"]


def param(at, name):
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def shown_text(at) -> str:
    return at.text[0].value


def check_side_by_side(at, original, branch, forced: int, forced_pieces: int | None = None) -> None:
    """`forced`: the step (1-based) where the two part; `forced_pieces`: how many of the branch's
    pieces were forced, when checked (the hover says so, the underline marks them)."""
    table = compare_table(at)
    top, bottom = table.rows
    assert top["pieces"][: len(original.output_tokens)] == original.output_tokens
    assert bottom["pieces"][: len(branch.output_tokens)] == branch.output_tokens
    for row, run in ((top, original), (bottom, branch)):
        shown = [float(h.rsplit("p = ", 1)[1]) for h in row["hover"] if h]
        assert shown == pytest.approx([s.prob for s in run.steps], abs=5e-4)       # hover: 3 decimals
        assert f"log p = {sum(math.log(s.prob) for s in run.steps):.2f}" in row["label"]
    if forced_pieces is not None:
        assert ["forced" in h for h in bottom["hover"][: len(branch.steps)]] == [
            t < forced_pieces for t in range(len(branch.steps))]
    part = next(t for t, (a, b) in enumerate(zip(original.output_tokens, branch.output_tokens)) if a != b)
    assert part == forced - 1                                    # they part at the clicked step
    assert [t for t, framed in enumerate(bottom["framed"]) if framed] == [part]
    assert f"they part at step {part + 1}" in table.title


def test_a_branch_a_re_branch_and_the_switch(translator):
    at = opened(step="1")
    original = translator.translate(EN, top_k=10)
    pick = at.pills(key="step_branch_pick")
    assert original.output_tokens[1] not in pick.options           # the chosen piece is no what-if
    assert pick.options == [p for p, _ in original.steps[1].top_k if p != original.output_tokens[1]]
    candidate = pick.options[0]
    pick.set_value(candidate).run()
    check_clean(at, "branch")
    prefix = [original.output_tokens[0], candidate]
    branch = translator.translate(EN, prefix=prefix, top_k=10)
    assert branch.output_tokens[:2] == prefix and branch.prefix_length == 2
    check_side_by_side(at, original, branch, 2, forced_pieces=2)
    assert param(at, "branch") == " ".join(prefix) and param(at, "whatif") == "original"
    # the click changed nothing above it: still the original on screen, still step 2
    assert shown_text(at) == original.text and at.slider(key="step").value == 1
    # the switch: every view draws the branch (the Heatmap too)
    at.radio(key="branch_view").set_value("Branch").run()
    check_clean(at, "switch")
    assert shown_text(at) == branch.text and param(at, "whatif") is None
    at.radio(key="view").set_value("Heatmap").run()
    check_clean(at, "heatmap on the branch")
    assert shown_text(at) == branch.text
    heat = specs(at)[0]
    assert heat["layout"]["yaxis"]["ticktext"] == escaped(branch.output_tokens)
    # a branch of the branch, two steps later
    at.radio(key="view").set_value("Decoding steps").run()
    at.slider(key="step").set_value(3).run()
    pick = at.pills(key="step_branch_pick")
    assert pick.options == [p for p, _ in branch.steps[3].top_k if p != branch.output_tokens[3]]
    again = pick.options[0]
    pick.set_value(again).run()
    check_clean(at, "re-branch")
    second = translator.translate(EN, prefix=branch.output_tokens[:3] + [again], top_k=10)
    assert shown_text(at) == second.text                         # the switch stays on "Branch"
    check_side_by_side(at, original, second, 2 if second.output_tokens[1] != original.output_tokens[1] else 4,
                       forced_pieces=4)
    tree = at.selectbox(key="step_branch_tree")
    assert tree.options == ["step 2: " + candidate, "· └ step 4: " + again]     # the second grew out of the first
    tree.set_value(0).run()
    check_clean(at, "tree pick")
    assert shown_text(at) == branch.text and param(at, "branch") == " ".join(prefix)


def test_a_share_link_holds_the_branch(translator):
    at, original, prefix, branch = opened_on_a_branch(translator, EN, partial(opened, step="2"))
    assert shown_text(at) == branch.text and at.radio(key="branch_view").value == "Branch"
    check_side_by_side(at, original, branch, 2, forced_pieces=2)
    assert param(at, "branch") == " ".join(prefix)
    at = opened(branch=" ".join(prefix), whatif="original")
    assert shown_text(at) == original.text and at.radio(key="branch_view").value == "Original"
    check_side_by_side(at, original, branch, 2)


def test_a_stale_or_bad_branch_link_opens_the_plain_translation_and_says_why(translator):
    original = translator.translate(EN, top_k=10)
    candidates = {p for p, _ in original.steps[1].top_k}
    outsider = next(p for p in ("▁Katze", "▁Zebra", "▁Haus", "▁Auto") if p not in candidates
                    and translator.engine.tokenizer.piece_ids([p]))
    for link, why in ((f"{original.output_tokens[0]} {outsider}", "not among the model"),
                      ("▁Ein ▁Qxqzzvv", "not a piece"),
                      (" ".join(["▁Ein"] * 200), "more than max")):
        at = opened(branch=link)
        assert shown_text(at) == original.text
        assert any("does not fit this sentence" in w.value and why in w.value for w in at.warning), link
        assert param(at, "branch") is None                     # the link no longer holds it
        assert not [m for m in at.markdown if 'class="aa-branch"' in m.value]
        at.slider(key="step").set_value(1).run()               # and the page keeps working
        check_clean(at, "after a stale link")
        assert not at.warning


def test_a_branch_that_ends_the_sentence_says_so(translator):
    original = translator.translate(EN, top_k=10)
    step = next(t for t, s in enumerate(original.steps[:-1]) if "</s>" in {p for p, _ in s.top_k})
    at = opened(step=str(step))
    at.pills(key="step_branch_pick").set_value("</s>").run()
    check_clean(at, "</s> branch")
    assert any("ends the sentence" in i.value for i in at.info)
    assert branch_pieces(at)[: step + 2] == original.output_tokens[:step] + ["</s>", ""]


def test_why_this_rather_than_that_next_to_the_step(translator):
    from transformer.explain.contrastive import contrastive_saliency
    at = opened(step="1")
    original = translator.translate(EN, top_k=10)
    box = at.selectbox(key="step_contrast_alt")
    assert box.value is None                                   # nothing computed until asked
    alternative = box.options[2]
    box.set_value(alternative).run()
    check_clean(at, "contrast")
    expected = contrastive_saliency(translator, original, 1, alternative)
    spec = next(s for s in specs(at) if s["layout"]["title"]["text"].startswith("Why"))
    assert spec["data"][0]["z"][0] == pytest.approx(expected.source.tolist(), abs=1e-5)
    assert spec["data"][1]["z"][0] == pytest.approx(expected.prefix.tolist(), abs=1e-5)
    assert any(f"= {expected.margin:.2f}" in c.value for c in at.caption)


LONG = "very very very very very very very big"      # greedy runs into the length limit (max_len)


def test_a_click_whose_prefix_fills_the_length_limit_says_so(translator):
    original = translator.translate(LONG, top_k=10)
    limit = min(translator.config.max_target_len, 2 * len(original.source_ids) + 16)    # translate()'s max_len
    assert len(original.output_tokens) == limit and original.output_tokens[-1] != "</s>"
    at = new_app()
    at.query_params.update({"model": "en-de", "view": "Decoding steps", "sentence": LONG, "step": str(limit - 1)})
    at.run()
    check_clean(at, "long")
    pick = at.pills(key="step_branch_pick")
    pick.set_value(pick.options[0]).run()                        # a prefix of max_len pieces
    check_clean(at, "max_len branch")
    prefix = original.output_tokens[: limit - 1] + [pick.options[0]]
    assert any("fill the length limit" in i.value and f"{limit} forced pieces" in i.value for i in at.info)
    assert branch_pieces(at) == prefix
    at.radio(key="branch_view").set_value("Branch").run()       # the page keeps working on that branch
    check_clean(at, "on the max_len branch")
    assert shown_text(at) == translator.translate(LONG, prefix=prefix).text
    at.slider(key="step").set_value(limit - 2).run()
    pick = at.pills(key="step_branch_pick")
    pick.set_value(pick.options[0]).run()                        # max_len - 1 pieces: one step is left
    check_clean(at, "max_len - 1 branch")
    branch = translator.translate(LONG, prefix=original.output_tokens[: limit - 2] + [pick.options[0]])
    assert len(branch.output_tokens) == limit and shown_text(at) == branch.text
    assert not any("fill the length limit" in i.value for i in at.info)
    assert branch_pieces(at) == branch.output_tokens
