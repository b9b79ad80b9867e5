"""Put-backs (transformer/diagnosis/signals.py put_back, lexicon.insertions, fit's put-back expert):
a put-back grows into the whole word the model wants, candidates come from several word boundaries,
an output word covers one source word when counted, and the expert only ever raises a score."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from transformer.diagnosis import signals
from transformer.diagnosis.fit import Case, Fitted
from transformer.diagnosis.thresholds import choose_thresholds, put_back_column, put_back_expert
from transformer.diagnosis.lexicon import Lexicon
from transformer.diagnosis.scores import SOURCE_FEATURES, _predict
from transformer.diagnosis.signals import Item, boundaries, put_back

# A bigram "model": p(next | previous piece) from TABLE, whatever the source.
VOCAB = {0: "<pad>", 1: "<s>", 2: "</s>", 3: "▁einem", 4: "▁Stier", 5: "▁bunte", 6: "n", 7: "."}
TABLE = {1: {3: 0.9}, 3: {4: 0.3, 5: 0.6}, 5: {6: 0.9, 4: 0.01}, 6: {4: 0.9}, 4: {2: 0.9}}


def _bigram():
    rows = np.full((len(VOCAB), len(VOCAB)), 1e-4)
    for prev, nxt in TABLE.items():
        for i, p in nxt.items():
            rows[prev, i] = p
    return rows / rows.sum(1, keepdims=True)


BIGRAM = _bigram()


def _bigram_translator():
    logits = torch.tensor(np.log(BIGRAM), dtype=torch.float32)

    def batch(sources):
        width = max(map(len, sources))
        src = torch.zeros((len(sources), width), dtype=torch.long)
        for b, s in enumerate(sources):
            src[b, :len(s)] = torch.tensor(s)
        return src, src != 0

    engine = SimpleNamespace(special_ids={0, 1, 2}, pad_id=0, start_id=1, batch=batch,
                             teacher_forced=lambda src, keep, fed: logits[fed],             # (B, T, V)
                             tokenizer=SimpleNamespace(id_to_piece=VOCAB.get))
    return SimpleNamespace(engine=engine,
                           device=torch.device("cpu"), config=SimpleNamespace(max_target_len=16))


def _item(output):
    return Item([3, 2], [1] + output[:-1], output, ["▁a", "</s>"], [VOCAB[i] for i in output])


def _log_p(output):
    return np.log([BIGRAM[a, b] for a, b in zip([1] + output[:-1], output)])


def test_a_put_back_grows_into_the_whole_word_the_model_wants(monkeypatch):
    tr, output = _bigram_translator(), [3, 4, 2]                    # "▁einem ▁Stier </s>"
    found = put_back(tr, [_item(output)], [_log_p(output)], [{0: [(0.6, 1, 5)]}])
    gain, pull, step, pieces = found[0][0]
    # "▁bunte" alone before "▁Stier" costs (p .01 of "▁Stier" after it); "▁bunte" "n" gains
    assert pieces == (5, 6) and step == 1 and pull == 0.6
    assert gain == pytest.approx(np.log(BIGRAM[3, 5] * BIGRAM[5, 6] * BIGRAM[6, 4] / BIGRAM[3, 4]), abs=1e-4)
    # of several candidates the word keeps the one of largest gain
    both = put_back(tr, [_item(output)], [_log_p(output)], [{0: [(0.7, 2, 5), (0.6, 1, 5)]}])[0][0]
    assert both[2] == 1 and both[0] == pytest.approx(gain, abs=1e-6)
    # with no round to grow in, the half word is all there is, and it costs
    monkeypatch.setattr(signals, "PUT_BACK_ROUNDS", 0)
    alone = put_back(tr, [_item(output)], [_log_p(output)], [{0: [(0.6, 1, 5)]}])[0][0]
    assert alone[3] == (5,) and alone[0] == pytest.approx(np.log(BIGRAM[3, 5] * BIGRAM[5, 4] / BIGRAM[3, 4]), abs=1e-4)
    assert alone[0] < 0 < gain


def test_words_are_put_in_only_where_a_word_may_begin():
    assert boundaries([3, 5, 6, 7, 2], VOCAB.get, {0, 1, 2}).tolist() == [True, True, False, True, True]


def test_counted_an_output_word_covers_one_source_word_and_short_ones_any_number():
    lex = Lexicon("en", "de")
    for length in (4, 5):
        for source, target in (("red", "rotes"), ("car", "auto"), ("house", "haus"), ("a", "ein")):
            lex.add(length, source[:length], target[:length], 1.0)
    source = ["▁a", "▁red", "▁car", "▁a", "▁red", "▁house"]
    output = ["▁ein", "▁rotes", "▁auto", "▁ein", "▁haus"]
    content = [True] * len(source)
    assert list(lex._missing(source, content, output)) == []                      # presence: all covered
    missing = {w for _, w, _ in lex._missing(source, content, output, counted=True)}
    assert missing == {4}            # one "rotes" for two "red"; "ein" (3 letters) covers both "a"
    assert {w for _, w, _ in lex._missing(source, content, output + ["▁rotes"], counted=True)} == set()


def _case(kind, score, gains, labels):
    """A fitting case whose output word and first source word score `score`, one source word per gain
    (None: never put back)."""
    n, low = len(gains), -5.0
    src = np.zeros((n, len(SOURCE_FEATURES)))
    src[0, 0] = score
    for k, g in enumerate(gains):
        if g is not None:
            src[k, SOURCE_FEATURES.index("insertion_gain")] = np.clip(g, low, 10.0) - low
    f = {"source": src, "source_groups": [[k] for k in range(n)], "source_flaggable": np.ones(n, dtype=bool),
         "output": np.full((1, 6), score), "output_groups": [[0]], "output_flaggable": np.ones(1, dtype=bool),
         "raw": {"log_p": np.zeros(1), "deletion_drop": np.zeros(n)}}
    return Case(kind, 0, None, np.full(1, float(kind == "substitution")), np.array(labels, dtype=float)), f


def test_the_put_back_expert_takes_its_own_share_of_the_false_alarms():
    def ranks(width):
        return {"mean": [0.0] * width, "std": [1.0] * width, "coef": [0.1] + [0.0] * (width - 1), "bias": -5.0}
    models = {"output": ranks(6), "source": ranks(len(SOURCE_FEATURES))}
    gains = {50: 4.0, 51: 1.0}
    cases = [_case("correct", k, [gains.get(k, -3.0), None], [0, 0]) for k in range(100)]
    cases += [_case("omission", -1, [None, g], [0, 1]) for g in (6.0, 5.0, 3.5, -2.0)]
    cases += [_case("substitution", 1000, [None], [0]) for _ in range(2)]
    fitted = Fitted([c for c, _ in cases], [f for _, f in cases])
    assert put_back_column(cases[50][1]).tolist() == [4.0, -np.inf]
    # the word models flag 6 of 100 references (6.5% allowed); the expert may add one: the 4-nat put-back
    # (1 nat would add a second), so it flags from 1.5 nats and finds 3 of the 4 omissions
    a, b, chosen = choose_thresholds(fitted, models, 0.075, put_back_share=0.01)
    assert chosen["put_back_gain"] == 1.5
    assert sum(_predict(models["output"], f["output"])[0] >= a for _, f in cases[:100]) == 6
    # with no share of its own the word models take 7 and the expert may add none: from 4.5 nats
    assert choose_thresholds(fitted, models, 0.075, put_back_share=0.0)[2]["put_back_gain"] == 4.5
    # nothing ever put back (a model without a lexicon): no expert, and the word models take it all
    plain = [_case(c.kind, f["source"][0, 0], [None, None] if len(f["source"]) > 1 else [None], list(c.source_labels))
             for c, f in cases]
    assert choose_thresholds(Fitted([c for c, _ in plain], [f for _, f in plain]), models, 0.075)[2]["put_back_gain"] is None


def test_the_put_back_expert_only_ever_raises_a_score_and_flags_from_its_gain():
    model = {"mean": [0.0] * len(SOURCE_FEATURES), "std": [1.0] * len(SOURCE_FEATURES),
             "coef": [0.5] + [0.0] * (len(SOURCE_FEATURES) - 1), "bias": -3.0, "also": [put_back_expert(2.5)]}
    column = SOURCE_FEATURES.index("insertion_gain")
    previous = 0.0
    for gain in np.linspace(-5.0, 10.0, 31):
        x = np.zeros((1, len(SOURCE_FEATURES)))
        x[0, column] = gain + 5.0
        score = float(_predict(model, x)[0])
        without = float(_predict({k: v for k, v in model.items() if k != "also"}, x)[0])
        assert score >= previous and score >= without
        assert (score >= 0.5) == (gain >= 2.5)
        previous = score
