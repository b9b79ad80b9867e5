"""viz.explain: source share bars, ALTI+ contribution maps, method comparison, through the figure."""
import json

import numpy as np
import plotly.graph_objects as go
import pytest

import viz
from viz import contribution_figure, method_comparison_figure, method_table, source_share_figure

SOURCE = ["▁A", "▁man", "▁a", "▁a", "</s>"]
OUTPUT = ["▁Ein", "▁Mann", "</s>"]
TARGET = ["<s>", "▁Ein", "▁Mann"]


def contributions():
    rng = np.random.default_rng(0)
    source = rng.random((3, 5))
    prefix = np.tril(rng.random((3, 3)))
    total = source.sum(1, keepdims=True) + prefix.sum(1, keepdims=True)
    return (source / total).astype(np.float32), (prefix / total).astype(np.float32)


def scores():
    rng = np.random.default_rng(1)
    out = {}
    for name in ("attention", "norm", "alti+", "saliency"):
        a = rng.random((3, 5))
        out[name] = a / a.sum(1, keepdims=True)
    return out


def drop_empty(value):
    if isinstance(value, dict):
        return {k: drop_empty(v) for k, v in value.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [drop_empty(v) for v in value]
    return value


def test_source_share_bars_stack_to_one_on_integer_axis():
    share = np.array([0.7, 0.4, 0.0], dtype=np.float32)
    fig = source_share_figure(share, OUTPUT)
    source, prefix = fig.data
    assert fig.layout.barmode == "stack" and tuple(fig.layout.yaxis.range) == (0.0, 1.0)
    np.testing.assert_allclose(source.y, share, atol=1e-7)
    np.testing.assert_allclose(np.add(source.y, prefix.y), 1.0, atol=1e-7)
    assert list(source.x) == [0, 1, 2] and list(fig.layout.xaxis.tickvals) == [0, 1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["▁Ein", "▁Mann", "&lt;/s&gt;"]      # escaped
    with pytest.raises(ValueError):
        source_share_figure(share[:2], OUTPUT)
    with pytest.raises(ValueError):
        source_share_figure([0.5, 1.5, 0.0], OUTPUT)


def test_contribution_maps_side_by_side_share_one_fixed_scale():
    source, prefix = contributions()
    fig = contribution_figure(source, prefix, OUTPUT, SOURCE, TARGET)
    left, right = fig.data
    np.testing.assert_array_equal(np.asarray(left.z), source)
    np.testing.assert_array_equal(np.asarray(right.z), prefix)
    assert (left.zmin, left.zmax, right.zmin, right.zmax) == (0.0, 1.0, 0.0, 1.0)
    assert left.xaxis == "x" and right.xaxis == "x2" and left.yaxis == right.yaxis == "y"
    assert fig.layout.yaxis.autorange == "reversed"                                    # row 0 on top
    assert list(fig.layout.xaxis.ticktext) == ["▁A", "▁man", "▁a", "▁a", "&lt;/s&gt;"]  # repeated pieces kept
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4]
    assert list(fig.layout.xaxis2.ticktext)[0] == "&lt;s&gt;"
    assert list(fig.layout.yaxis.ticktext) == ["▁Ein", "▁Mann", "&lt;/s&gt;"]
    assert "&lt;s&gt;" in json.dumps(right.customdata.tolist() if hasattr(right.customdata, "tolist")
                                     else list(right.customdata))
    rebuilt = go.Figure(fig.to_dict())
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))
    with pytest.raises(ValueError):
        contribution_figure(source, prefix, OUTPUT, SOURCE[:-1], TARGET)
    with pytest.raises(ValueError):
        contribution_figure(source, prefix[:, :2], OUTPUT, SOURCE, TARGET)
    with pytest.raises(ValueError):
        contribution_figure(source * 5, prefix, OUTPUT, SOURCE, TARGET)


def test_method_comparison_rows_are_methods_for_one_step():
    s = scores()
    fig = method_comparison_figure(s, SOURCE, step=1)
    trace = fig.data[0]
    np.testing.assert_allclose(np.asarray(trace.z), np.stack([v[1] for v in s.values()]))
    assert list(fig.layout.yaxis.ticktext) == ["attention", "norm", "alti+", "saliency"]
    assert (trace.zmin, trace.zmax) == (0.0, 1.0) and fig.layout.yaxis.autorange == "reversed"
    one_step = method_comparison_figure({k: v[2] for k, v in s.items()}, SOURCE)       # (S,) arrays
    np.testing.assert_allclose(np.asarray(one_step.data[0].z)[0], s["attention"][2])
    rebuilt = go.Figure(fig.to_dict())
    assert drop_empty(json.loads(fig.to_json())) == drop_empty(json.loads(rebuilt.to_json()))
    with pytest.raises(ValueError):
        method_comparison_figure(s, SOURCE)                 # (T, S) needs a step
    with pytest.raises(ValueError):
        method_comparison_figure(s, SOURCE[:3], step=0)
    with pytest.raises(ValueError):
        method_comparison_figure({}, SOURCE)


def test_method_table_ranks_each_method():
    s = scores()
    table = method_table(s, SOURCE, step=0)
    assert list(table.piece) == SOURCE and len(table) == 5
    np.testing.assert_allclose(table["alti+"], s["alti+"][0])
    assert table.loc[int(np.argmax(s["norm"][0])), "norm rank"] == 1


def test_exported_and_free_of_torch():
    for name in ("source_share_figure", "contribution_figure", "method_comparison_figure", "method_table"):
        assert name in viz.__all__
    import viz.explain as module
    source = open(module.__file__, encoding="utf-8").read()
    assert "import torch" not in source and "streamlit" not in source
