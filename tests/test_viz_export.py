"""Trace export (JSON, NPZ), key-only word merging, averaged head statistics, presenter fonts."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from viz import (TRACE_SCHEMA, attention_heatmap, average_statistics, head_statistics, merge_attention, merge_keys,
                 presenter_figure, trace_json, trace_npz, trace_payload)

SOURCE = ["▁Ein", "▁Hund", "<b>", "</s>"]
FED = ["<s>", "▁A", "▁dog"]
OUTPUT = ["▁A", "▁dog", "</s>"]


def softmax_rows(shape, seed=0):
    x = np.random.default_rng(seed).normal(size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def payload(**changes):
    S, T = len(SOURCE), len(OUTPUT)
    decoder = softmax_rows((2, 4, T, T), 1) * np.tril(np.ones((T, T), dtype=np.float32))
    decoder /= decoder.sum(-1, keepdims=True)
    fields = dict(source_tokens=SOURCE, target_tokens=FED, output_tokens=OUTPUT,
                  attention={"encoder_self": softmax_rows((2, 4, S, S)), "decoder_self": decoder,
                             "cross": softmax_rows((2, 4, T, S), 2)},
                  step_probs=[0.9, 0.5, 0.99], source_padding=np.ones(S, bool),
                  target_causal=np.tril(np.ones((T, T), bool)),
                  positional_encoding=np.random.default_rng(3).normal(size=(max(S, T), 8)),
                  source_embeddings=np.random.default_rng(4).normal(size=(S, 8)),
                  meta={"model": "en-de", "beam_size": 1, "text": "A <b> dog"})
    fields.update(changes)
    return trace_payload(**fields)


def test_trace_json_round_trip_keeps_every_array_and_token():
    data = payload()
    doc = json.loads(trace_json(data).decode("utf-8"))
    assert doc["schema"] == TRACE_SCHEMA and "rows = queries" in doc["schema"]
    assert doc["source_tokens"] == SOURCE and doc["output_tokens"] == OUTPUT and doc["target_tokens"] == FED
    assert doc["meta"]["text"] == "A <b> dog"
    for name in ("encoder_self", "decoder_self", "cross", "step_probs", "positional_encoding"):
        np.testing.assert_array_equal(np.array(doc[name], dtype=np.float32), data[name])
    assert np.array(doc["cross"]).shape == (2, 4, len(OUTPUT), len(SOURCE))
    assert doc["target_causal"][0] == [True, False, False]


def test_trace_npz_loads_without_pickle():
    data = payload()
    with np.load(io.BytesIO(trace_npz(data)), allow_pickle=False) as npz:
        assert list(npz["source_tokens"]) == SOURCE and list(npz["output_tokens"]) == OUTPUT
        np.testing.assert_array_equal(npz["decoder_self"], data["decoder_self"])
        np.testing.assert_array_equal(npz["source_padding"], np.ones(len(SOURCE), bool))
        assert str(npz["schema"]) == TRACE_SCHEMA
        assert json.loads(str(npz["meta_json"]))["model"] == "en-de"
        assert npz["encoder_self"].dtype == np.float32


@pytest.mark.parametrize("change", [
    {"output_tokens": OUTPUT[:-1]},                       # fed and produced pieces disagree
    {"source_tokens": SOURCE[:-1]},                       # attention wider than the source
    {"step_probs": [0.5, 0.5]},                           # one probability per step
    {"target_causal": np.ones((2, 2), bool)},
])
def test_trace_payload_rejects_mismatched_shapes(change):
    with pytest.raises(ValueError):
        payload(**change)


def test_merge_keys_sums_each_words_pieces_and_keeps_rows():
    pieces = ["▁Fahr", "rad", "▁fährt", "</s>"]
    weights = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    merged, words = merge_keys(weights, pieces)
    assert words == ["▁Fahrrad", "▁fährt", "</s>"]
    np.testing.assert_allclose(merged, [[0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
    # agrees with the full merge for the keys of a piece-aligned matrix
    square = softmax_rows((4, 4), 5)
    full, _, keys = merge_attention(square, pieces, pieces)
    by_keys, _ = merge_keys(square, pieces)
    np.testing.assert_allclose(by_keys[:2].mean(0), full[0], rtol=1e-6)     # query word 0 = pieces 0, 1
    np.testing.assert_allclose(by_keys[2:], full[1:], rtol=1e-6)
    assert keys == words and by_keys.shape == (4, 3)
    np.testing.assert_allclose(by_keys.sum(-1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError):
        merge_keys(weights, pieces[:-1])


def test_average_statistics_is_the_mean_per_head():
    a = head_statistics(softmax_rows((2, 3, 5, 5), 6), list("abcde"), list("abcde"))
    b = head_statistics(softmax_rows((2, 3, 4, 4), 7), list("abcd"), list("abcd"))
    mean = average_statistics([a, b])
    assert len(mean) == 6 and (mean["sentences"] == 2).all()
    row = mean[(mean["layer"] == 1) & (mean["head"] == 2)].iloc[0]
    expected = (a.query("layer == 1 and head == 2")["entropy"].iloc[0]
                + b.query("layer == 1 and head == 2")["entropy"].iloc[0]) / 2
    assert row["entropy"] == pytest.approx(expected)
    with pytest.raises(ValueError):
        average_statistics([])
    assert isinstance(mean, pd.DataFrame)


def test_presenter_figure_enlarges_fonts_without_touching_the_original():
    fig = attention_heatmap(softmax_rows((3, 4)), ["▁a", "▁b", "</s>"], ["▁x", "▁y", "▁z", "</s>"], "t")
    big = presenter_figure(fig, font_size=20)
    assert big.layout.font.size == 20 and big.layout.xaxis.tickfont.size == 18
    assert big.layout.yaxis.title.font.size == 20
    assert fig.layout.font.size is None, "the original figure is left as it was"
    np.testing.assert_array_equal(np.asarray(big.data[0].z), np.asarray(fig.data[0].z))
    assert isinstance(big, go.Figure)
    from viz import statistic_figure
    frame = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "entropy": [0.1, 0.2, 0.3, 0.4]})
    cells = presenter_figure(statistic_figure(frame, "entropy"), font_size=20)
    assert cells.data[0].textfont.size == 16, "cell numbers grow with the rest on a projector"


def test_sessions_copying_one_figure_at_once_all_get_it():
    """Presenter and phone copies of one shared figure, made by many sessions' threads at once:
    go.Figure(fig) pops and restores each source trace's "type" as it copies, and 12 of 16 such
    threads failed ("Scatter: 'colorbar'"). The copies only read the figure now, and equal a
    copy made alone."""
    import threading

    from viz import phone_figure
    tokens = [f"▁w{i}" for i in range(12)]
    fig = attention_heatmap(softmax_rows((12, 12)), tokens, tokens, "t", height=400)
    before = fig.to_plotly_json()
    alone = {"slide": presenter_figure(fig, max_height=480).to_json(), "phone": phone_figure(fig).to_json()}
    failures, copies = [], []
    start = threading.Barrier(16)

    def copy_many(index: int) -> None:
        start.wait()
        try:
            for _ in range(4):
                copies.append(("slide", presenter_figure(fig, max_height=480).to_json()) if index % 2 else
                              ("phone", phone_figure(fig).to_json()))
        except Exception as exc:          # noqa: BLE001 - counted and shown below
            failures.append(f"{type(exc).__name__}: {str(exc)[:120]}")

    threads = [threading.Thread(target=copy_many, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and len(copies) == 64
    assert all(text == alone[kind] for kind, text in copies)
    assert fig.to_plotly_json() == before, "the source figure is unchanged"


def test_position_bias_figure_shows_the_bias_and_checks_tokens():
    from viz import position_bias_figure
    bias = np.arange(9, dtype=np.float32).reshape(3, 3) - 4.0
    fig = position_bias_figure(bias, ["▁a", "▁b", "</s>"], "Relative position bias · head 0")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.array_equal(z, bias)
    assert fig.data[0].zmin == -4.0 and fig.data[0].zmax == 4.0     # zero at the scale's middle
    assert "&lt;/s&gt;" in list(fig.layout.xaxis.ticktext)
    with pytest.raises(ValueError):
        position_bias_figure(bias, ["▁a", "▁b"])
