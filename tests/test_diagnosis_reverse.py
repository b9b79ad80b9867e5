"""Reverse-model support (transformer/diagnosis/reverse.py): the model of the other direction, forced
to write the source from the translation, tells a word the source needs from one it does not."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from transformer import Translator
from transformer.diagnosis import reverse as R
from transformer.diagnosis.scores import (OUTPUT_FEATURES, REVERSE_CLIP, diagnosis_weights, features,
                                          reverse_column, word_scores)
from transformer.diagnosis.signals import compute_signals, make_item, output_words

REPO = Path(__file__).resolve().parents[1]
BIKE = "A man is riding a bike."


def _log_p(tr, source: str, target: str) -> tuple[float, list]:
    """log p(target | source) through the public API: the lens's last site is the model's own
    distribution (api.md), forced decoding gives p of each forced piece."""
    out = tr.translate(source, target=target, lens=True)
    return float(np.log(out.lens.chosen_prob[:, -1].astype(np.float64)).sum()), list(out.source_tokens)


def test_the_reverse_model_is_the_other_direction_beside_the_folder(en_de, de_en, tmp_path):
    found = R.reverse_for(en_de)
    assert found is not None
    assert (found.source_lang, found.target_lang) == ("de", "en")
    assert Path(found.path).resolve() == (REPO / "pretrained" / "de-en").resolve()
    assert R.reverse_for(en_de) is found                       # loaded once per folder
    # a folder copied alone has none; a neighbour with another vocabulary is not taken
    alone = tmp_path / "alone" / "en-de"
    shutil.copytree(REPO / "pretrained" / "en-de", alone)
    assert R.reverse_for(Translator.load(alone, device="cpu")) is None
    fake = tmp_path / "alone" / "de-en"
    fake.mkdir()
    (fake / "config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    (fake / "spm.model").write_bytes((alone / "spm.model").read_bytes() + b"\0")
    R._reverse_folder.cache_clear()
    assert R.reverse_for(Translator.load(alone, device="cpu")) is None


def test_reverse_support_is_the_fall_of_log_p_source_when_the_word_is_deleted(en_de, de_en):
    target = "Ein Mann fährt einen Hund."
    item = make_item(en_de, BIKE, target)
    special = frozenset(en_de.engine.special_ids)
    groups, flaggable = output_words(item, len(item.output_ids), special)
    tested = np.array(flaggable, dtype=bool)                   # every word, to check the arithmetic
    drop = R.reverse_support(de_en, [item], [groups], [tested])[0]
    full, pieces = _log_p(de_en, target, BIKE)
    assert pieces == [str(p) for p in item.output_pieces]        # the ids line up: one vocabulary
    words = [("".join(str(item.output_pieces[j]) for j in g)).replace("\u2581", "") for g in groups]
    for w, (g, on) in enumerate(zip(groups, flaggable)):
        if not on:
            assert np.isnan(drop[w])
            continue
        kept = [str(p) for j, p in enumerate(item.output_pieces[:-1]) if j not in g]
        text = "".join(kept).replace("\u2581", " ").strip()
        without, kept_pieces = _log_p(de_en, text, BIKE)
        assert kept_pieces[:-1] == kept, (text, kept_pieces)
        assert drop[w] == pytest.approx(full - without, abs=2e-3), words[w]
    by_word = dict(zip(words, drop))
    assert by_word["Hund"] < 1.0 < by_word["Mann"]           # the wrong word serves no source word


def test_only_uncertain_words_are_tested_and_untested_ones_count_as_supported(en_de):
    item = make_item(en_de, BIKE, "Ein Mann fährt einen Hund.")
    sig = compute_signals(en_de, [item])
    R.add_reverse(R.reverse_for(en_de), [item], sig, frozenset(en_de.engine.special_ids))
    groups, flaggable = output_words(item, len(item.output_ids), frozenset(en_de.engine.special_ids))
    tested = ~np.isnan(sig[0].reverse_drop)
    for g, on, t in zip(groups, flaggable, tested):
        assert t == (bool(on) and bool((sig[0].log_p[g] < np.log(R.REVERSE_GATE)).any()))
    assert tested.any() and not tested.all()
    column = features(sig[0], item, frozenset(en_de.engine.special_ids))["output"][:, OUTPUT_FEATURES.index(R.FEATURE)]
    assert (column[~tested] == 0).all()
    assert ((column[tested] >= 0) & (column[tested] <= 2 * REVERSE_CLIP)).all()


def test_less_reverse_support_never_lowers_the_hallucination_score(en_de):
    drops = np.linspace(-30, 30, 121)
    column = reverse_column(drops, len(drops))
    assert (np.diff(column) <= 0).all() and column[0] > column[-1]   # less support, higher column
    weights = diagnosis_weights(en_de)
    assert R.FEATURE in weights["output"]["features"]
    assert weights["output"]["coef"][weights["output"]["features"].index(R.FEATURE)] > 0
    item = make_item(en_de, BIKE, "Ein Mann fährt einen Hund.")
    sig = compute_signals(en_de, [item])[0]
    special = frozenset(en_de.engine.special_ids)
    groups, _ = output_words(item, len(item.output_ids), special)
    hund = [w for w, g in enumerate(groups) if "Hund" in "".join(str(item.output_pieces[j]) for j in g)][0]
    previous = -1.0
    for d in drops[::-1]:                                      # from strong support to none
        sig.reverse_drop = np.full(len(groups), np.nan)
        sig.reverse_drop[hund] = d
        score = float(word_scores(weights, features(sig, item, special), "output")[groups[hund][0]])
        assert score >= previous - 1e-12
        previous = score
    assert previous > 0.5


def test_a_wrong_word_is_flagged_with_its_reverse_evidence_and_a_correct_one_is_not(en_de):
    out = en_de.translate(BIKE, target="Ein Mann fährt einen Hund.", diagnose=True)
    flags = [f for f in out.diagnosis.flags if f.kind == "hallucination"]
    assert ["".join(out.output_tokens[f.start:f.end]).replace("\u2581", "") for f in flags] == ["Hund"]
    assert flags[0].evidence["reverse_support"] < 1.0
    assert "other direction" in flags[0].evidence["explains"]
    assert "reverse_support" not in out.diagnosis.missing
    own = en_de.translate(BIKE, diagnose=True)                 # the model's own words: sure of each
    assert not [f for f in own.diagnosis.flags if f.kind == "hallucination"]


def test_weights_without_the_column_never_load_the_other_direction(de_en):
    weights = diagnosis_weights(de_en)
    assert R.FEATURE not in weights["output"]["features"]
    out = de_en.translate("Ein Mann fährt Fahrrad.", target="A man rides a dog.", diagnose=True)
    assert "reverse_support" not in out.diagnosis.signals


def test_a_copy_without_its_other_direction_says_the_evidence_is_missing(tmp_path):
    alone = tmp_path / "en-de"
    shutil.copytree(REPO / "pretrained" / "en-de", alone)
    tr = Translator.load(alone, device="cpu")
    out = tr.translate(BIKE, target="Ein Mann fährt einen Hund.", diagnose=True)
    assert "reverse_support" in out.diagnosis.missing
    assert "reverse_support" not in out.diagnosis.signals
