"""A T5 as the hub ships it: told its task in words through the prefixes of its config's
`task_specific_params` (t5-small's: a summary task, then en->de, en->fr, en->ro). Opened without
languages it takes its first translation task, in the API and in the app, whose pickers offer its
tasks; one with no translation task gets a message naming its config. Also: a failing explain=True
is tried once per translation, not on every run."""
from __future__ import annotations

import json

import pytest

import hf_tiny
from test_app import check_clean, new_app
from test_app_hf import opened
from transformer import Translator

SENTENCE = "A man is riding a bike."


@pytest.fixture(scope="module")
def t5_models(hf_dirs, tmp_path_factory):
    """A models folder with the tiny T5 (t5-small's tasks) and a copy that names no translation task."""
    models = tmp_path_factory.mktemp("t5-models")
    hf_dirs.copy("t5", models / "t5")
    hf_dirs.copy("t5", models / "t5-summary")
    config_file = models / "t5-summary" / "config.json"
    config = json.loads(config_file.read_text())
    config["task_specific_params"] = {"summarization": hf_tiny.T5_TASKS["summarization"]}
    config_file.write_text(json.dumps(config))
    return models


def test_t5_opened_without_languages_takes_its_first_translation_task(t5_models):
    tr = Translator.load(t5_models / "t5", device="cpu")
    assert (tr.source_lang, tr.target_lang) == ("en", "de")           # not the summary task listed first
    out = tr.translate(SENTENCE)
    prefix = tr.engine.tokenizer.hf("translate English to German: " + SENTENCE).input_ids
    assert out.source_ids == prefix, "the encoder reads the task's prefix, then the sentence"
    assert out.source_tokens[:3] == tr.engine.tokenizer.pieces(prefix[:3])
    assert out.text.strip()
    assert tr.card["source_lang"] == "en" and tr.card["target_lang"] == "de"


def test_t5_with_one_language_takes_the_task_that_agrees(t5_models):
    tr = Translator.load(t5_models / "t5", device="cpu", target_lang="ro")
    assert (tr.source_lang, tr.target_lang) == ("en", "ro")
    out = tr.translate(SENTENCE)
    assert out.source_ids == tr.engine.tokenizer.hf("translate English to Romanian: " + SENTENCE).input_ids


def test_t5_without_a_translation_task_is_a_value_error_naming_its_config(t5_models):
    with pytest.raises(ValueError, match=r"t5-summary/config\.json: .*no translation task in task_specific_params"):
        Translator.load(t5_models / "t5-summary", device="cpu")
    with pytest.raises(ValueError, match=r"config\.json: no T5 task for 'en' -> 'xx'"):
        Translator.load(t5_models / "t5", device="cpu", source_lang="en", target_lang="xx")


def translation_title(at) -> str:
    return next(m.value for m in at.main.markdown if m.value.startswith("**Translation")).replace("\\", "")


def test_the_app_offers_a_t5_its_translation_tasks(t5_models, monkeypatch):
    at = opened(monkeypatch, t5_models, model="t5", sentence=SENTENCE)
    check_clean(at, "t5")
    source, target = at.selectbox(key="source_lang"), at.selectbox(key="target_lang")
    assert source.options == ["en"] and target.options == ["de", "fr", "ro"]
    assert (source.value, target.value) == ("en", "de")
    assert translation_title(at) == "**Translation (de)**" and at.main.text[0].value.strip()
    target.set_value("fr").run()
    check_clean(at, "t5 en->fr")
    assert translation_title(at) == "**Translation (fr)**"


def test_the_app_says_a_t5_has_no_translation_task(t5_models, monkeypatch):
    at = opened(monkeypatch, t5_models, model="t5-summary", sentence=SENTENCE)
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]          # as shown, without Markdown escapes
    assert len(errors) == 1 and "config.json" in errors[0] and "no translation task" in errors[0], errors


def test_a_failing_explanation_is_tried_once_per_translation(monkeypatch):
    """explain=True failing (here: made to fail) falls back to raw weights, and later runs of the
    same translation use the remembered failure instead of trying again."""
    import atlas_ui.runs.translation as backend

    real, explained_calls = backend.translate, []

    def failing_explain(run, slots):
        if run.explain:
            explained_calls.append(run)
            raise ValueError("no explanation for this one")
        return real(run, slots)

    monkeypatch.setattr(backend, "translate", failing_explain)
    at = new_app()
    at.query_params.update(sentence="A dog runs after a red ball in the park.", norm="1")
    at.run()
    check_clean(at, "explain failed")
    assert at.main.text[0].value.strip(), "the raw translation is shown"
    assert any("could not be computed" in i.value for i in at.info), [i.value for i in at.info]
    for view in ("Layer grid", "Heatmap"):
        at.radio(key="view").set_value(view).run()
        check_clean(at, view)
    assert len(explained_calls) == 1, explained_calls
