"""tr.language_check(text): is the text in the language the model reads? (transformer/language.py)

Unit tests need no data; the goals (flagged >= 95% on wrong-language val sentences, false alarms
<= 1% on right ones) and the profile build run on Multi30k when ../shared/data/multi30k exists."""
from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from conftest import REPO
from hf_tiny import DATA_DIR
from transformer import LanguageCheck, Translator
from transformer import language

FAKETIANS = "The faketians are intentively dressed up dance."
GERMAN = "Ein Mann fährt mit dem Fahrrad die Straße hinunter."
FRENCH = "Deux enfants jouent au ballon dans le parc."


@pytest.fixture(scope="module")
def ours():
    return {name: Translator.load(REPO / "pretrained" / name, device="cpu") for name in ("en-de", "de-en")}


# ---- the contract ----------------------------------------------------------------------------
def test_dataclass_fields_and_ranges():
    assert [f.name for f in dataclasses.fields(LanguageCheck)][:3] == ["matches", "detected", "score"]
    for text in (FAKETIANS, GERMAN, FRENCH, "Hund", "12345", "Angela Merkel", "?!"):
        for source in ("en", "de", "eng_Latn", "", None, "es"):
            chk = language.check(text, source)
            assert isinstance(chk.matches, bool) and isinstance(chk.checked, bool)
            assert chk.detected in (None, "en", "de", "fr")
            assert isinstance(chk.score, float) and 0.0 <= chk.score <= 1.0


def test_faketians_flagged_for_de_en_and_accepted_for_en_de(ours):
    de_en = ours["de-en"].language_check(FAKETIANS)
    assert (de_en.matches, de_en.detected, de_en.checked) == (False, "en", True)
    assert de_en.score < language.FLAG_BELOW
    en_de = ours["en-de"].language_check(FAKETIANS)
    assert (en_de.matches, en_de.detected) == (True, "en") and en_de.score > 0.99


def test_other_languages_are_named(ours):
    assert ours["en-de"].language_check(GERMAN) == LanguageCheck(False, "de", pytest.approx(0, abs=1e-6))
    for tr in ours.values():
        chk = tr.language_check(FRENCH)
        assert not chk.matches and chk.detected == "fr"
    assert ours["de-en"].language_check(GERMAN).matches


def test_empty_text_raises_like_translate(ours):
    for text in ("", "   \n\t"):
        with pytest.raises(ValueError, match="empty"):
            ours["en-de"].language_check(text)
        with pytest.raises(ValueError, match="empty"):
            ours["en-de"].translate(text)
    with pytest.raises(ValueError, match="string"):
        ours["en-de"].language_check(None)


@pytest.mark.parametrize("text", ["Hund", "Schwarzenegger", "Angela Merkel", "Jean-Paul Sartre", "12345 678",
                                  "!!! ... ???", "Ein Hund.", "3 × 4 = 12"])
def test_short_texts_numbers_names_punctuation_never_alarm(text):
    for source in ("en", "de"):
        chk = language.check(text, source)
        assert chk.matches and not chk.checked and chk.score == 0.5


def test_nothing_to_judge_gives_no_language():
    assert language.check("12345 !!!", "en") == LanguageCheck(True, None, 0.5, checked=False)


@pytest.mark.parametrize("source", ["", None, "es", "mul", "xx_YY"])
def test_unknown_source_language_never_alarms_but_guesses(source):
    chk = language.check(GERMAN, source)
    assert chk == LanguageCheck(True, "de", 0.5, checked=False)


def test_mixed_text_goes_by_the_majority():
    mostly_german = "Der Mann fährt mit seinem alten Fahrrad durch die Stadt, nice."
    mostly_english = "A man rides his old bicycle through the busy town, danke."
    assert not language.check(mostly_german, "en").matches and language.check(mostly_german, "de").matches
    assert not language.check(mostly_english, "de").matches and language.check(mostly_english, "en").matches


@pytest.mark.parametrize("code, iso", [("en", "en"), ("eng_Latn", "en"), ("en_XX", "en"), ("__en__", "en"),
                                       ("de_DE", "de"), ("deu_Latn", "de"), ("ger", "de"), ("fra_Latn", "fr"),
                                       ("fr-FR", "fr"), ("German", "de"), ("ro_RO", "ro"), ("", None),
                                       (None, None), ("mul", None)])
def test_language_codes_normalise_to_iso_639_1(code, iso):
    assert language.normalize_code(code) == iso


def test_codes_of_every_family_are_checked():
    for code in ("en", "eng_Latn", "en_XX", "__en__", "eng"):
        assert language.check(GERMAN, code).matches is False
        assert language.check(FAKETIANS, code).matches is True


def test_shipped_profile_is_small_and_holds_the_profiled_languages():
    path = language.PROFILE_PATH
    assert path.stat().st_size < 1_000_000
    data = json.loads(path.read_text(encoding="utf-8"))
    assert tuple(data["languages"]) == language.PROFILED
    assert len(data["counts"]) == len(language.PROFILED)
    assert all(len(c) == len(data["grams"]) for c in data["counts"])


def test_threads_give_identical_results():
    texts = [FAKETIANS, GERMAN, FRENCH, "Angela Merkel", "Zwei Hunde spielen im Schnee.",
             "A girl in a red dress."]
    expected = [language.check(t, s) for t in texts for s in ("en", "de", "eng_Latn")]
    language._cache.clear()                  # every thread races for the first load too
    language._check.cache_clear()            # (the per-sentence memo would answer before it)
    barrier, results, errors = threading.Barrier(8), [], []

    def work():
        try:
            barrier.wait()
            results.append([language.check(t, s) for _ in range(20) for t in texts
                            for s in ("en", "de", "eng_Latn")])
        except Exception as exc:             # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 8
    assert all(r == expected * 20 for r in results)
    assert len(language._cache) == 1
    assert language._check.cache_info().hits > 0          # reruns of the same sentence are answered once


# ---- Hugging Face models: the base-class method reads their source_lang -----------------------
@pytest.fixture(scope="module")
def hf(hf_dirs):
    return {name: hf_dirs.load(name) for name in ("marian", "nllb", "t5", "bart")}


@pytest.mark.parametrize("name", ["marian", "nllb", "t5"])
def test_hf_english_source_models_flag_german(hf, name):
    tr = hf[name]
    assert language.normalize_code(tr.source_lang) == "en"
    assert tr.language_check(FAKETIANS).matches
    chk = tr.language_check(GERMAN)
    assert (chk.matches, chk.detected) == (False, "de") and chk.score < language.FLAG_BELOW


def test_hf_model_without_a_source_language_never_alarms(hf):
    tr = hf["bart"]
    assert tr.source_lang == ""
    assert tr.language_check(GERMAN) == LanguageCheck(True, "de", 0.5, checked=False)


# ---- on Multi30k: the goals on val, and the shipped profile rebuilt from train ------------------
needs_data = pytest.mark.skipif(not (DATA_DIR / "val.en.gz").is_file(), reason=f"no Multi30k data at {DATA_DIR}")


@needs_data
def test_goals_on_val(ours):
    sentences = {lang: language.read_lines(DATA_DIR, "val", lang)[:200] for lang in ("en", "de", "fr")}
    for tr in ours.values():
        for lang, lines in sentences.items():
            flagged = sum(not tr.language_check(s).matches for s in lines) / len(lines)
            if lang == tr.source_lang:
                assert flagged <= 0.01, (tr.source_lang, lang, flagged)
            else:
                assert flagged >= 0.95, (tr.source_lang, lang, flagged)


@needs_data
def test_shipped_profile_is_what_the_build_writes(tmp_path):
    out = tmp_path / "profiles.json"
    language.build(DATA_DIR, out)
    shipped = json.loads(language.PROFILE_PATH.read_text(encoding="utf-8"))
    assert json.loads(out.read_text(encoding="utf-8")) == shipped
