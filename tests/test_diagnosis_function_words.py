"""Function words are never called left out, nor unsupported (transformer/diagnosis/function_words.py):
source ones are still deleted, so their support for output pieces still counts, but they get half their
omission score, no put-back, and the benchmark's flaggable-word rows leave them out; output ones get
half their hallucination score (the pipeline on a real model: tests/test_diagnosis_cases.py)."""
import numpy as np
import pytest

from transformer.diagnosis.function_words import FUNCTION_WORDS, function_word_mask, language_key
from transformer.diagnosis.scores import flaggable_pieces
from transformer.diagnosis.signals import Item


def test_language_codes_of_every_kind_find_their_list():
    assert [language_key(c) for c in ("en", "eng_Latn", "en_XX", "de-DE", "deu_Latn", "fra_Latn", None, "ja")] == \
        ["en", "en", "en", "de", "de", "fr", "", "ja"]
    assert function_word_mask(["\u2581A", "\u2581man", "\u2581is", "\u2581they", "\u2581not", "\u2581under"], "en") == \
        [True, False, True, False, False, False]          # pronouns, negation, spatial words stay flaggable
    assert function_word_mask(["\u2581Ein", "\u2581Mann", "\u2581sie"], "deu_Latn") == [True, False, False]
    assert function_word_mask(["\u2581A", "\u2581the"], "ja") == [False, False]        # no list: nothing masked
    assert not any(w in FUNCTION_WORDS["en"] for w in ("not", "no", "two", "three", "they", "under", "behind"))


def test_the_benchmarks_flaggable_rows_leave_function_words_out():
    item = Item([5, 6, 7, 8, 2], [0, 10, 11, 12, 13], [10, 11, 12, 13, 2],
                ["\u2581A", "\u2581bi", "ke", "\u2581.", "</s>"], ["\u2581Ein", "\u2581Fahr", "rad", ".", "</s>"])
    assert flaggable_pieces(item, {2}, "en")[1].tolist() == [False, True, True, False, False]
    assert flaggable_pieces(item, {2})[1].tolist() == [True, True, True, False, False]      # no language: as before
    assert flaggable_pieces(item, {2}, "en")[0].tolist() == [True, True, True, False, False]   # no output language
    assert flaggable_pieces(item, {2}, "en", "de")[0].tolist() == [False, True, True, False, False]   # "Ein"
    assert np.asarray(flaggable_pieces(item, {2}, "de")[1]).tolist() == [True, True, True, False, False]


def test_a_function_word_shows_half_its_score_and_never_counts_where_the_lines_are_drawn():
    from transformer.diagnosis.scores import SOURCE_FEATURES, word_scores
    from transformer.diagnosis.thresholds import choose_thresholds
    from transformer.diagnosis.fit import Case, Fitted
    width = len(SOURCE_FEATURES)
    model = {"mean": [0.0] * width, "std": [1.0] * width, "coef": [1.0] + [0.0] * (width - 1), "bias": 0.0}
    source = np.zeros((3, width))
    source[:, 0] = [4.0, 4.0, -4.0]                 # words 0 and 1 have strong evidence, word 2 little
    f = {"source": source, "source_groups": [[0], [1], [2]], "source_flaggable": np.array([True, False, True]),
         "source_function": np.array([False, True, False]), "raw": {"deletion_drop": np.zeros(3)}}
    full = 1 / (1 + np.exp(-4.0))
    assert word_scores({"source": model}, f, "source").tolist() == pytest.approx([full, full / 2, 1 - full])
    assert word_scores({"source": model}, f, "source", function_words=False)[1] == 0.0
    # where the lines are drawn a reference's strong function word counts for nothing: counted even at
    # half (0.49) it would outrank the omitted word (0.30), and no line could find it without flagging
    # every reference
    output = {"mean": [0.0] * 6, "std": [1.0] * 6, "coef": [1.0] + [0.0] * 5, "bias": 0.0}

    def case(kind, output_evidence, content_evidence):
        features = {"source": np.array([[4.0] + [0.0] * (width - 1), [content_evidence] + [0.0] * (width - 1)]),
                    "source_groups": [[0], [1]], "source_flaggable": np.array([False, True]),
                    "source_function": np.array([True, False]), "output": np.array([[output_evidence] + [0.0] * 5]),
                    "output_groups": [[0]], "output_flaggable": np.array([True]),
                    "raw": {"log_p": np.zeros(1), "deletion_drop": np.zeros(2)}}
        return Case(kind, 0, None, np.array([float(kind == "substitution")]),
                    np.array([0.0, float(kind == "omission")])), features
    built = [case("correct", -9.0 + 0.1 * k, -6.0 + 0.1 * k) for k in range(20)]     # one may be flagged (5%)
    built += [case("omission", -9.0, np.log(0.3 / 0.7)), case("substitution", 0.0, -6.0)]
    _, line, _ = choose_thresholds(Fitted([c for c, _ in built], [f for _, f in built]),
                                   {"output": output, "source": model}, 0.075)
    assert line <= 0.3 + 1e-9                      # the omitted word is found
    assert word_scores({"source": model}, built[0][1], "source")[0] > 0.3   # though a reference's "the" shows more


def test_an_output_function_word_never_counts_where_the_output_line_is_drawn():
    """The output side's twin of the test above: a reference's strong "a" (half of 0.98) would outrank
    the substituted word (0.30) if the lines counted it, and no line could find that word."""
    from transformer.diagnosis.scores import OUTPUT_FEATURES, SOURCE_FEATURES, word_scores
    from transformer.diagnosis.thresholds import choose_thresholds
    from transformer.diagnosis.fit import Case, Fitted
    width, source_width = len(OUTPUT_FEATURES), len(SOURCE_FEATURES)
    output = {"mean": [0.0] * width, "std": [1.0] * width, "coef": [1.0] + [0.0] * (width - 1), "bias": 0.0}
    source = {"mean": [0.0] * source_width, "std": [1.0] * source_width, "coef": [1.0] + [0.0] * (source_width - 1),
              "bias": 0.0}

    def case(kind, content_evidence, source_evidence):
        features = {"output": np.array([[4.0] + [0.0] * (width - 1), [content_evidence] + [0.0] * (width - 1)]),
                    "output_groups": [[0], [1]], "output_flaggable": np.array([False, True]),
                    "output_function": np.array([True, False]),
                    "source": np.array([[source_evidence] + [0.0] * (source_width - 1)]), "source_groups": [[0]],
                    "source_flaggable": np.array([True]), "raw": {"log_p": np.zeros(2), "deletion_drop": np.zeros(1)}}
        return Case(kind, 0, None, np.array([0.0, float(kind == "substitution")]),
                    np.array([float(kind == "omission")])), features
    built = [case("correct", -6.0 + 0.1 * k, -9.0 + 0.1 * k) for k in range(20)]   # one may be flagged (5%)
    built += [case("substitution", np.log(0.3 / 0.7), -9.0), case("omission", -9.0, -9.0)]
    fitted = Fitted([c for c, _ in built], [f for _, f in built])
    line, _, _ = choose_thresholds(fitted, {"output": output, "source": source}, 0.075)
    assert line <= 0.3 + 1e-9                      # the substituted word is found
    assert word_scores({"output": output}, built[0][1], "output")[0] > 0.3   # though a reference's "a" shows more


def test_an_output_function_word_is_never_called_unsupported_but_shows_half_its_score(de_en):
    """Through the real pipeline: the output's "a" and "the" are never flaggable, whatever their
    evidence; content words, pronouns and negation stay flaggable."""
    from transformer.diagnosis.scores import OUTPUT_FEATURES, features, word_scores
    from transformer.diagnosis.signals import compute_signals, make_item, output_words, word_texts
    special = frozenset(de_en.engine.special_ids)
    item = make_item(de_en, "Ein Mann fährt kein Fahrrad.", "The man is not riding a horse on the moon.")
    sig = compute_signals(de_en, [item])[0]
    groups, flaggable = output_words(item, len(item.output_ids), special)
    words = word_texts(item.output_pieces, groups)
    f = features(sig, item, special)
    function = dict(zip(words, f["output_function"]))
    may = dict(zip(words, f["output_flaggable"]))
    assert [w for w in words if function[w]] == ["\u2581The", "\u2581is", "\u2581a", "\u2581on", "\u2581the"]
    assert all(may[w] for w in ("\u2581man", "\u2581not", "\u2581riding", "\u2581horse", "\u2581moon"))
    assert not any(may[w] for w in words if function[w]) and not may["."]
    width = len(OUTPUT_FEATURES)
    sure = {"output": {"mean": [0.0] * width, "std": [1.0] * width, "coef": [0.0] * width, "bias": 3.0}}
    scores = word_scores(sure, f, "output")           # every word's model score is sigmoid(3)
    full = 1 / (1 + np.exp(-3.0))
    by_word = {w: scores[g[0]] for w, g in zip(words, groups)}
    assert by_word["\u2581horse"] == pytest.approx(full) and by_word["\u2581a"] == pytest.approx(full / 2)
    assert by_word["\u2581a"] < 0.5                   # under the flag line, whatever the evidence
    assert word_scores(sure, f, "output", function_words=False)[groups[words.index("\u2581a")][0]] == 0.0
    # a Signals made by hand (no output language known) keeps every flaggable word flaggable, as before
    sig.may_be_unsupported = None
    assert features(sig, item, special)["output_flaggable"].tolist() == flaggable.tolist()
