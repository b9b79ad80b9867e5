"""AppTest checks of the Head roles view (issue 34, item 2): its share link opens it for the shipped
en-de model; the alignment figure's lines are translate(align=True).alignment by words; the role
maps' labels are head_roles.json's (recomputed here from the file); a Pharaoh gold gives the AER
transformer/analysis/alignment.py computes, malformed gold a message; the link's head opens beside
its evidence; the branch switch changes what is aligned; presenter mode draws it; a model without
head_roles.json says so in one line and still draws the alignment (the fallback method)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from test_app import APP, MODELS, check_clean, opened_on_a_branch, specs, z_array
from atlas_ui.ui.common import PRESENTER_MAX_HEIGHT
from atlas_ui.runs.alignment import word_links_of
from transformer import Translator
from transformer.analysis.aligner import pair_words
from transformer.analysis.alignment import aer, parse_pharaoh, text_words

EN = "A man in a blue shirt is riding a bike down the street."
VIEW = "Head roles"
pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")
SUB = {c: str(i) for i, c in enumerate("₀₁₂₃₄₅₆₇₈₉")}


def opened(model: str = "en-de", **params):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": model, "view": VIEW, "sentence": EN, **params})
    at.run()
    check_clean(at, str(params))
    return at


def charts(at) -> dict:
    """The view's charts by the start of their titles."""
    out = {}
    for spec in specs(at):
        title = spec["layout"].get("title", {}).get("text", "")
        out[title.split("<br>")[0]] = spec
    return out


def alignment_spec(at) -> dict:
    (spec,) = [s for title, s in charts(at).items() if title.startswith("Word alignment")]
    return spec


def drawn_links(spec) -> list[tuple[int, int]]:
    out = []
    for trace in spec["data"]:
        if str(trace.get("name", "")).startswith("link "):
            i, j = trace["name"][5:].split("-")
            out.append((int(i), int(j)))
    return out


def api_alignment(translator, text: str) -> tuple[list, list, list]:
    """(word links, source words, output words) of translate(align=True), the words as the view counts them."""
    out = translator.translate(text, align=True)
    src, tgt = text_words(text), text_words(out.text)
    words = pair_words(translator, out.source_ids, out.output_ids, src, tgt)
    return word_links_of(out.alignment, words.source, words.target), src, tgt


def expected_label(entry: dict, kind: str) -> str:
    """head_roles.json's entry as the map should label it, computed here from the file."""
    if kind == "cross" and entry["role"] == "none":
        return f"AER {entry['aer']['mutual']['held_out']:.0f}"
    shares = {"prev": entry["positional"]["-1"], "self": entry["positional"]["0"], "next": entry["positional"]["+1"],
              "rare": entry["rare_word"], "sink": entry["sink"]}
    assert entry["role"] == "none"                     # the shipped models have no head with a role
    best = max(shares, key=shares.get)
    return f"{best} {shares[best]:.0%}"


def test_the_share_link_draws_the_api_alignment_and_the_files_roles(translator):
    at = opened()
    assert at.radio(key="view").value == VIEW
    spec = alignment_spec(at)
    links, src, tgt = api_alignment(translator, EN)
    assert links and drawn_links(spec) == links
    # the words above and below, with the indices a Pharaoh link names
    top, bottom = spec["layout"]["xaxis2"]["ticktext"], spec["layout"]["xaxis"]["ticktext"]
    assert ["".join(c for c in t if c not in SUB) for t in top] == src
    assert ["".join(c for c in t if c not in SUB) for t in bottom] == tgt
    assert [int("".join(SUB[c] for c in t if c in SUB)) for t in top] == list(range(len(src)))
    # each line runs from its source word (top) to its output word (bottom)
    lines = [t for t in spec["data"] if str(t.get("name", "")).startswith("link ")]
    for trace, (i, j) in zip(lines, links):
        assert trace["x"] == pytest.approx([spec["layout"]["xaxis2"]["tickvals"][i],
                                            spec["layout"]["xaxis"]["tickvals"][j]])
        assert trace["y"] == [1.0, 0.0]
    # the role maps: every head of every kind labelled as head_roles.json says
    roles = json.loads((Path(MODELS["en-de"]) / "head_roles.json").read_text())
    (maps,) = [s for title, s in charts(at).items() if title.startswith("What each head does")]
    heats = {t["name"]: t for t in maps["data"] if t["type"] == "heatmap"}
    assert set(heats) == {"encoder_self", "decoder_self", "cross"}
    for kind, entries in roles["kinds"].items():
        for entry in entries:
            assert heats[kind]["text"][entry["layer"]][entry["head"]] == expected_label(entry, kind), (kind, entry)
    assert heats["encoder_self"]["text"][1][2] == "prev 38%"       # docs/head_roles.md's strongest
    best = roles["best_alignment_head"]
    assert heats["cross"]["text"][best["layer"]][best["head"]] == f"AER {best['aer_held_out']:.0f}"
    assert not at.warning and not at.info


def test_a_pharaoh_gold_gives_alignment_py_s_aer_and_the_best_head(translator):
    at = opened()
    gold_text = "0-0 1-1 2-2 3p3 4-4 5-5 7-6 9-9 12-11 13-13"
    at.text_input(key="role_gold").set_value(gold_text).run()
    check_clean(at, "gold")
    links, _, _ = api_alignment(translator, EN)
    gold = parse_pharaoh(gold_text)
    expected = 100 * aer([set(links)], [gold])
    spec = alignment_spec(at)
    assert f"AER {expected:.1f} against the gold given" in spec["layout"]["title"]["text"]
    summary = [m.value for m in at.markdown if "Against your gold" in m.value]
    assert len(summary) == 1 and f"AER {expected:.1f}".replace(".", "\\.") in summary[0]
    # the best single head on this sentence: every cross head's mutual links against the same gold
    out = translator.translate(EN, align=True)
    words = pair_words(translator, out.source_ids, out.output_ids, text_words(EN), text_words(out.text))
    from transformer.analysis.alignment import links_from_scores, to_words
    maps = to_words(np.asarray(out.attention.cross), words.target, words.n_target, words.source, words.n_source)
    head_aer = np.array([[100 * aer([links_from_scores(maps[a, b], "mutual")], [gold]) for b in range(maps.shape[1])]
                         for a in range(maps.shape[0])])
    a, b = np.unravel_index(int(np.argmin(head_aer)), head_aer.shape)
    assert f"layer {a} head {b}\\, {head_aer[a, b]:.1f}".replace(".", "\\.") in summary[0]
    # lines in the gold are green, the gold's sure links the alignment missed are drawn dotted
    by_name = {t["name"]: t for t in spec["data"]}
    assert all(by_name[f"link {i}-{j}"]["line"]["color"] == ("#1a7f37" if (i, j) in gold.possible else "#d95f02")
               for i, j in links)
    assert {n for n in by_name if n.startswith("missed ")} == {f"missed {i}-{j}" for i, j in gold.sure - set(links)}
    assert at.query_params["gold"] in (gold_text, [gold_text])             # the share link keeps it


@pytest.mark.parametrize("typed, says", [
    ("0-0 1x2", "not a Pharaoh link"),
    ("0-0 <b>3-99</b>", "not a Pharaoh link"),
    ("0-0 2-99", "names a word that is not there"),
])
def test_malformed_gold_gives_a_message_and_no_aer(typed, says):
    at = opened(gold=typed)
    (warning,) = at.warning
    assert "The gold alignment was not read" in warning.value and says in warning.value
    assert "<b>" not in warning.value                                      # user text shown literally
    assert "AER" not in alignment_spec(at)["layout"]["title"]["text"]
    assert not [m.value for m in at.markdown if "Against your gold" in m.value]


def test_the_link_s_head_opens_beside_its_evidence(translator):
    at = opened(kind="cross", layer=1, head=7)
    assert any("Cross\\-attention\\, layer 1\\, head 7\\: role none" in m.value for m in at.markdown)
    (head,) = [s for title, s in charts(at).items() if title.startswith("Cross-attention · layer 1 · head 7")]
    out = translator.translate(EN)
    np.testing.assert_allclose(z_array(head["data"][0]), out.attention.cross[1, 7], atol=1e-6)
    (table,) = [d.value for d in at.dataframe if list(d.value.columns) == ["score", "corpus", "here"]]
    roles = json.loads((Path(MODELS["en-de"]) / "head_roles.json").read_text())
    entry = next(e for e in roles["kinds"]["cross"] if (e["layer"], e["head"]) == (1, 7))
    assert table.iloc[0]["corpus"] == f"{entry['aer']['mutual']['held_out']:.1f}"
    rows = dict(zip(table["score"], table["here"]))
    top = out.attention.cross[1, 7].argmax(-1) - np.arange(out.attention.cross.shape[2])
    assert rows["peak on the same piece"] == f"{float((top == 0).mean()):.0%}"
    # the map frames the open head
    (maps,) = [s for title, s in charts(at).items() if title.startswith("What each head does")]
    (frame,) = maps["layout"]["shapes"]
    assert (frame["xref"], frame["x0"], frame["y0"]) == ("x3", 6.5, 0.5)


def test_presenter_mode_draws_the_alignment_first_within_the_slide():
    at = opened(present=1)
    titles = list(charts(at))
    assert titles[0].startswith("Word alignment")
    assert all(spec["layout"]["height"] <= PRESENTER_MAX_HEIGHT for spec in specs(at))
    assert at.query_params["present"] in ("1", ["1"])


def test_a_model_without_head_roles_json_says_so_and_still_draws_the_alignment(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    for file in Path(MODELS["en-de"]).resolve().iterdir():
        if file.name != "head_roles.json":
            (plain / file.name).symlink_to(file)
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    at = opened("plain")
    (info,) = at.info
    assert "no head\\_roles.json" in info.value or "no head_roles.json" in info.value
    assert not [t for t, _ in charts(at).items() if t.startswith("What each head does")]
    translator = Translator.load(str(plain), device="cpu")
    assert translator.head_roles is None
    links, _, _ = api_alignment(translator, EN)                             # ALTI+, mutual argmax
    spec = alignment_spec(at)
    assert "ALTI+" in spec["layout"]["title"]["text"] and drawn_links(spec) == links


def test_the_branch_switch_changes_what_is_aligned(translator):
    at, original, _, branch = opened_on_a_branch(translator, EN, opened)

    def expected(pieces):
        out = translator.translate(EN, target=list(pieces), align=True)
        words = pair_words(translator, out.source_ids, out.output_ids, text_words(EN), text_words(out.text))
        return word_links_of(out.alignment, words.source, words.target), text_words(out.text)

    links, words = expected(branch.output_tokens)
    spec = alignment_spec(at)
    assert drawn_links(spec) == links
    assert ["".join(c for c in t if c not in SUB) for t in spec["layout"]["xaxis"]["ticktext"]] == words
    at.radio(key="branch_view").set_value("Original").run()             # back to the original's pieces
    check_clean(at, "original")
    links, words = expected(original.output_tokens)
    spec = alignment_spec(at)
    assert drawn_links(spec) == links
    assert ["".join(c for c in t if c not in SUB) for t in spec["layout"]["xaxis"]["ticktext"]] == words
