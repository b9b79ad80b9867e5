"""AppTest checks of issue 31's "Behaviour that surprises": text with several sentences, step
numbers counted from 1 (old links still open the same step), the beam's two scores labelled, the
low-confidence note's hub model in the model's own direction, every what-if candidate reachable,
Beam's faded nodes still readable, source-side embedding neighbours and the language check."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atlas_ui.runs.catalogue import find_models
from atlas_ui.page.sentences import MAX_SENTENCES, split_input, split_sentences
from atlas_ui.server.settings import models_dir

APP = str(ROOT / "app.py")
MODELS = find_models(str(models_dir()))
pytestmark = pytest.mark.skipif(not {"en-de", "de-en"} <= set(MODELS), reason="needs pretrained/en-de and de-en")
FIRST, SECOND = "A man is riding a bike.", "Two dogs play in the snow."


@pytest.fixture(scope="module")
def en_de():
    from transformer import Translator
    return Translator.load(MODELS["en-de"], device="cpu")


def opened(**params):
    """The app's first run on a share link with these query parameters."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": "en-de", **params})
    at.run()
    clean(at)
    return at


def clean(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def link_query(at) -> dict:
    """The sidebar share box's link, parsed (parse_qs: name -> [values])."""
    links = [href for md in at.sidebar.markdown for href in re.findall(r"\]\(([^)]*\?[^)]*)\)", md.value)]
    assert links, "the share box holds a link"
    return parse_qs(urlparse(links[0]).query)


def shown_translation(at) -> str:
    return at.text[0].value


def specs(at) -> list:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def pickers(at) -> list:
    return [group for group in at.get("button_group") if group.key == "sentence_index"]


def strip_html(at) -> str:
    strips = [md.value for md in at.markdown if 'class="aa-tokens"' in md.value]
    assert len(strips) == 1, "one translation strip"
    return strips[0]


# ---- 1. text with several sentences ------------------------------------------------------------
def test_split_sentences_on_lines_and_sentence_ends_but_not_abbreviations():
    assert split_sentences(f"{FIRST}\n{SECOND}") == [FIRST, SECOND]
    assert split_sentences(f"{FIRST} {SECOND}  \n\n") == [FIRST, SECOND]
    assert split_sentences("Mr. Smith rides e.g. a bike. Then he stops!") == ["Mr. Smith rides e.g. a bike.",
                                                                              "Then he stops!"]
    assert split_sentences("Ein Mann fährt z. B. Rad. Er ist alt.") == ["Ein Mann fährt z. B. Rad.", "Er ist alt."]
    assert split_sentences('He said "Stop." Then he left.') == ['He said "Stop."', "Then he left."]
    assert split_sentences("今天下雨。我们走吧！") == ["今天下雨。", "我们走吧！"]
    assert split_sentences("a cat. a dog") == ["a cat. a dog"], "no capital after the dot: one sentence"
    one = split_input(f"  {FIRST}  ", "Ein Mann.")
    assert one.parts == (f"  {FIRST}  ",) and one.references == ("Ein Mann.",), "one sentence: the text unchanged"
    paired = split_input(f"{FIRST} {SECOND}", "Ein Mann fährt. Zwei Hunde spielen.", index=1)
    assert paired.sentence == SECOND and paired.reference == "Zwei Hunde spielen."
    unpaired = split_input(f"{FIRST} {SECOND}", "Ein Mann fährt Rad.", index=7)
    assert unpaired.references == ("", "") and unpaired.index == 0, "a reference that does not pair is not forced"


def test_each_sentence_is_translated_and_the_views_show_the_picked_one(en_de):
    first, second = en_de.translate(FIRST), en_de.translate(SECOND)
    at = opened(sentence=f"{FIRST}\n{SECOND}", view="Heatmap", kind="encoder_self")
    assert shown_translation(at) == f"{first.text} {second.text}", "the whole translation"
    [picker] = pickers(at)
    assert picker.options == ["1", "2"] and picker.value == 0
    heatmap = specs(at)[0]
    keys = heatmap["layout"]["xaxis"]["ticktext"]
    assert "▁bike" in keys and "▁dogs" not in keys
    assert f'title="step {len(first.output_tokens)}: ' in strip_html(at) and "sentence_no" not in link_query(at)
    picker.set_value(1).run()
    clean(at)
    keys = specs(at)[0]["layout"]["xaxis"]["ticktext"]
    assert "▁dogs" in keys and "▁bike" not in keys, "the views draw the second sentence"
    assert shown_translation(at) == f"{first.text} {second.text}"
    assert at.text_area(key="text").value == f"{FIRST}\n{SECOND}", "the box keeps the whole text"
    query = link_query(at)
    assert query["sentence_no"] == ["2"] and query["sentence"] == [f"{FIRST}\n{SECOND}"]
    again = opened(**{name: values[0] for name, values in query.items()})          # the link, in a new tab
    assert pickers(again)[0].value == 1 and "▁dogs" in specs(again)[0]["layout"]["xaxis"]["ticktext"]


def test_a_link_made_before_sentences_opens_the_first_and_one_sentence_has_no_picker():
    old = opened(sentence=f"{FIRST}\n{SECOND}", view="Heatmap", kind="encoder_self", step="0")
    assert pickers(old)[0].value == 0 and "▁bike" in specs(old)[0]["layout"]["xaxis"]["ticktext"]
    single = opened(sentence=FIRST, view="Heatmap")
    assert not pickers(single) and "sentence_no" not in link_query(single)


def test_a_sentence_is_shown_in_the_picker_as_text_never_as_markup():
    at = opened(sentence='A man rides.\n<img src=x onerror="alert(1)"> **Big** [link](http://x) dogs.', view="Heatmap",
                sentence_no="2")
    line = next(md.value for md in at.markdown if md.value.startswith("**Sentence**"))
    literal = line.replace("\\<", "").replace("\\*", "").replace("\\]", "")       # what Markdown shows as text
    assert "2 of 2" in line and "<img" not in literal and "**" not in literal.removeprefix("**Sentence**"), line
    assert "](http" not in literal, line


def test_more_sentences_than_the_cap_are_cut_with_a_message():
    lines = [f"A dog number {n} runs." for n in range(MAX_SENTENCES + 3)]
    at = opened(sentence="\n".join(lines), view="Heatmap", sentence_no=str(MAX_SENTENCES + 2))
    warnings = [w.value for w in at.warning]
    assert any(f"{MAX_SENTENCES + 3} sentences" in w and f"first {MAX_SENTENCES}" in w for w in warnings), warnings
    [picker] = pickers(at)
    assert len(picker.options) == MAX_SENTENCES and picker.value == 0, "a link past the cap opens the first"


# ---- 2. steps counted from 1 -------------------------------------------------------------------
def current_piece_title(at) -> str:
    match = re.search(r'class="aa-token aa-current[^"]*" title="([^"]*)"', strip_html(at))
    assert match, "the strip marks the current step"
    return match.group(1)


def test_steps_are_counted_from_1_and_old_links_open_the_same_step(en_de):
    out = en_de.translate(SECOND)
    old = opened(sentence=SECOND, view="Decoding steps", step="4")              # made before step_no: from 0
    assert any(text.value.startswith(f"Step 5 of {len(out.steps)}:") for text in old.text)
    assert current_piece_title(old).startswith(f"step 5: {out.output_tokens[4]} ")   # the strip's hover agrees
    assert old.slider(key="step").value == 4
    assert link_query(old)["step_no"] == ["5"] and "step" not in link_query(old)
    new = opened(sentence=SECOND, view="Decoding steps", step_no="5")
    assert new.slider(key="step").value == 4 and current_piece_title(new).startswith("step 5: ")
    both = opened(sentence=SECOND, view="Decoding steps", step="1", step_no="3")
    assert both.slider(key="step").value == 2, "step_no wins over an old step="
    for bad in ("0", "-2", "x"):
        assert opened(sentence=SECOND, view="Decoding steps", step_no=bad).slider(key="step").value == 0


# ---- 4. the low-confidence note names a model for the same direction ----------------------------
def test_the_low_confidence_note_suggests_the_models_own_direction():
    at = opened(model="de-en", sentence="Der Aktienkurs ist gefallen, weil die Zinsen steigen.", view="Heatmap")
    notes = [info.value for info in at.info if "mean probability" in info.value]
    assert notes and "Helsinki-NLP/opus-mt-de-en" in notes[0] and "opus-mt-en-de" not in notes[0], notes


# ---- 3. the beam's score and the what-if's log p, each labelled ---------------------------------
def test_the_beam_score_says_it_is_length_normalised_and_hypotheses_count_from_1(en_de):
    out = en_de.translate(SECOND, beam_size=4)
    at = opened(sentence=SECOND, view="Beam", beam="4")
    tree = next(spec for spec in specs(at) if any(trace.get("name") == "nodes" for trace in spec["data"]))
    nodes = next(trace for trace in tree["data"] if trace.get("name") == "nodes")
    assert all("length-normalised" in hover for hover in nodes["hovertext"])
    assert nodes["hovertext"][0].startswith("step 1 · #1<br>") and tree["layout"]["yaxis"]["ticktext"][0] == "1"
    step, index = out.beam_final                                 # the node shown first: the returned one
    line = next(md.value for md in at.markdown if md.value.startswith("**Node:"))
    assert line.startswith(f"**Node: step {step + 1}, hypothesis {index + 1}** · length-normalised score"), line


def test_the_what_if_table_says_its_log_p_is_the_plain_sum(en_de):
    out = en_de.translate(SECOND, top_k=10)
    at = opened(sentence=SECOND, view="Decoding steps", step_no="2")
    other = next(piece for piece, _ in out.steps[1].top_k if piece != out.steps[1].token)
    next(group for group in at.get("button_group") if group.key == "step_branch_pick").set_value(other).run()
    clean(at)
    [table] = [md.value for md in at.markdown if 'class="aa-branch"' in md.value]
    assert table.count("total log p = ") == 2 and table.count("not length-normalised") == 2, table


# ---- 8. embedding neighbours from the source side of the training data ---------------------------
def test_source_pieces_file_round_trips_and_limits_the_neighbours(en_de, tmp_path):
    from transformer.analysis.neighbours import nearest_pieces, source_ids, source_side_ids, write_source_pieces
    sentences = ["A horse runs.", "Two horses jump over a fence.", "A dog sits on a red blanket."]
    record = write_source_pieces(tmp_path, en_de, sentences, "three test sentences")
    seen = sorted({i for ids in en_de.engine.tokenizer.encode_batch(sentences) for i in ids})
    assert source_side_ids(tmp_path).tolist() == seen and record["pieces_seen"] == len(seen)
    assert (tmp_path / "source_pieces.json").stat().st_size < 4000, "small enough to ship beside a model"
    horse = source_ids(en_de, ["▁horse"])
    found = nearest_pieces(en_de, horse, 5, among=seen)
    assert found and {n.id for n in found} <= set(seen) - set(horse)
    assert source_side_ids(tmp_path / "elsewhere") is None, "no file: every piece, as before"
    (tmp_path / "source_pieces.json").write_text('{"vocab_size": 8000, "bitmap": "!!"}')
    with pytest.raises(ValueError, match="source pieces"):
        source_side_ids(tmp_path)


def test_compare_offers_english_neighbours_of_an_english_word(en_de):
    from transformer.analysis.neighbours import nearest_pieces, source_ids, source_side_ids
    everywhere = [n.piece for n in nearest_pieces(en_de, source_ids(en_de, ["▁horse"]), 12, word_start=True)]
    assert "▁zerrissene" in everywhere, "the joint vocabulary's German piece this guards against"
    at = opened(sentence="A brown horse runs in a field.", view="Compare", edited="")
    words = next(group for group in at.get("button_group") if group.key == "compare_word")
    index = words.options.index("horse")
    words.set_value(index).run()
    clean(at)
    shown = [option.rsplit(" (", 1)[0] for option in at.radio(key=f"compare_swap_{index}").options]
    english = set(source_side_ids(MODELS["en-de"]).tolist())
    assert len(shown) == 8 and "zerrissene" not in shown
    assert all(set(source_ids(en_de, ["▁" + piece])) <= english for piece in shown), shown


# ---- 9. the app says which languages the language check knows ------------------------------------
def test_a_model_reading_a_language_the_check_does_not_know_says_so(tmp_path, monkeypatch):
    import shutil
    folder = tmp_path / "models"
    shutil.copytree(MODELS["en-de"], folder / "es-de")
    config = json.loads((folder / "es-de" / "config.json").read_text())
    (folder / "es-de" / "config.json").write_text(json.dumps({**config, "source_lang": "es"}))
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(folder))
    at = opened(model="es-de", sentence="A man is riding a bike.", view="Heatmap")
    notes = [caption.value for caption in at.caption if caption.value.startswith("Language check:")]
    assert notes and "English, French and German" in notes[0] and "reads es" in notes[0], notes
    assert not [w for w in at.warning if "looks like" in w.value], "nothing is claimed about the text"
    monkeypatch.delenv("ATLAS_MODELS_DIR")
    known = opened(sentence="Ein Mann fährt Fahrrad auf der Straße.", view="Heatmap")       # en-de reads English
    assert not [c for c in known.caption if c.value.startswith("Language check:")]
    assert [w for w in known.warning if "looks like German" in w.value]


def test_the_source_pieces_command_reads_the_source_side_of_the_data_dir(en_de, tmp_path):
    import gzip
    import shutil

    from transformer.__main__ import main
    from transformer.analysis.neighbours import source_side_ids
    model = tmp_path / "en-de"
    shutil.copytree(MODELS["en-de"], model, ignore=shutil.ignore_patterns("source_pieces.json"))
    data = tmp_path / "data"
    data.mkdir()
    english, german = ["A horse runs.", "Two dogs play."], ["Ein zerrissenes Pferd rennt.", "Zwei Hunde spielen."]
    for lang, lines in (("en", english), ("de", german)):
        with gzip.open(data / f"train.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    assert main(["source-pieces", str(model), "--data-dir", str(data)]) == 0
    seen = sorted({i for ids in en_de.engine.tokenizer.encode_batch(english) for i in ids})
    assert source_side_ids(model).tolist() == seen, "the English side only, never the German"
    assert json.loads((model / "source_pieces.json").read_text())["data"] == "Multi30k train.en (2 sentences)"
