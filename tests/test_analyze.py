"""`python -m transformer analyze`: batched ablation means translate(head_mask=...), Michel importance
is the gradient it claims to be, resuming changes nothing, and the result file has its documented shape."""
from __future__ import annotations

import copy
import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer import Translator
from transformer.analysis import head_importance as an
from transformer.__main__ import main
from transformer.training.data import resolve_data_dir
from transformer.model import PAD_ID
from transformer.interventions import gate_hooks, intervening

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "pretrained" / "en-de"
DATA_DIR = resolve_data_dir(os.environ.get("ATLAS_DATA_DIR"))
N_PAIRS = 12
# the CLI's end-to-end runs (finished, resume) read the first CLI_PAIRS of those pairs: every phase,
# interruption and resume is the same, and 72 ablations of 12 sentences took ~9 s of CPU a run
# (the module does two) against ~3 s for 4
CLI_PAIRS = 4
FALLBACK = [("A man is riding a bike.", "Ein Mann fährt Fahrrad."),
            ("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."),
            ("A girl in a red dress is jumping over a small puddle on the street.",
             "Ein Mädchen in einem roten Kleid springt über eine kleine Pfütze auf der Straße."),
            ("People are walking.", "Leute gehen spazieren.")] * 3
VOLATILE = {"date", "command", "wall_seconds", "phase_seconds"}


@pytest.fixture(scope="module")
def tr():
    return Translator.load(MODEL, device="cpu")


def write_data_dir(path: Path, n: int) -> Path:
    """A tiny Multi30k folder: the first n pairs of the real val split (or of a few fallback pairs)."""
    if (DATA_DIR / "val.en.gz").is_file():
        pairs = {lang: [line.rstrip("\n") for line in gzip.open(DATA_DIR / f"val.{lang}.gz", "rt",
                                                                 encoding="utf-8")][:n] for lang in ("en", "de")}
    else:
        pairs = {"en": [p[0] for p in FALLBACK[:n]], "de": [p[1] for p in FALLBACK[:n]]}
    for lang, lines in pairs.items():
        with gzip.open(path / f"val.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """N_PAIRS pairs (write_data_dir)."""
    return write_data_dir(tmp_path_factory.mktemp("multi30k"), N_PAIRS)


@pytest.fixture(scope="module")
def cli_data_dir(tmp_path_factory):
    """CLI_PAIRS pairs, sentences of different lengths (one padded batch), for the CLI's end-to-end runs."""
    return write_data_dir(tmp_path_factory.mktemp("multi30k-cli"), CLI_PAIRS)


def run_cli(data_dir, out, resume, *extra):
    return main(["analyze", "--model", str(MODEL), "--data-dir", str(data_dir), "--split", "val",
                 "--out", str(out), "--resume-file", str(resume), "--prune-step", "0.25", *extra])


@pytest.fixture(scope="module")
def finished(cli_data_dir, tmp_path_factory):
    """One uninterrupted end-to-end CLI run: (result dict, output path)."""
    tmp = tmp_path_factory.mktemp("analyze")
    assert run_cli(cli_data_dir, tmp / "head_importance.json", tmp / "resume.json") == 0
    return json.loads((tmp / "head_importance.json").read_text(encoding="utf-8")), tmp / "head_importance.json"


def test_batched_ablation_loss_equals_per_sentence_translate(tr, data_dir):
    # several batches, with padding, from either data set: 12 real val pairs make 5 batches of at most 60 tokens,
    # the short FALLBACK pairs 3 (at 150 tokens they fit in 2: the batches count tokens, whatever the device)
    corpus = an.Corpus(tr, data_dir, "val", max_tokens=60)
    assert len(corpus.batches) > 2
    memories = an.encoder_memories(tr.engine.model, corpus)
    for head in (None, ("encoder_self", 1, 2), ("decoder_self", 0, 5), ("cross", 2, 3)):
        batched = (an.corpus_loss(tr.engine.model, corpus, None, memories) if head is None
                   else an.ablated_loss(tr.engine.model, corpus, head, memories))
        nll = []
        for source, reference in zip(corpus.sources, corpus.references):
            out = tr.translate(source, target=reference, capture=False, head_mask={head} if head else None)
            nll += [-math.log(step.prob) for step in out.steps]
        assert len(nll) == corpus.tokens
        assert abs(batched - float(np.mean(nll))) < 1e-4, (head, batched, np.mean(nll))


def _sentence_tensors(corpus, b, row):
    src, fed, gold = corpus.batches[b]
    s, t = int((src[row] != PAD_ID).sum()), int((fed[row] != PAD_ID).sum())
    return src[row:row + 1, :s], fed[row:row + 1, :t], gold[row:row + 1, :t]


def test_michel_importance_is_the_mean_absolute_per_sentence_gradient(tr, data_dir):
    corpus = an.Corpus(tr, data_dir, "val", max_tokens=150)
    raw = an.michel_importance(tr.engine.model, corpus)
    cfg = tr.config
    assert {k: v.shape for k, v in raw.items()} == {k: (n, cfg.n_heads) for k, n in an.layer_counts(cfg).items()}
    checks = [("encoder_self", 0, 1), ("decoder_self", 2, 6), ("cross", 1, 0)]
    explicit = {h: 0.0 for h in checks}
    for b, batch in enumerate(corpus.batches):            # one sentence at a time, a plain (layers, heads) gate
        for row in range(batch[0].shape[0]):
            src, fed, gold = _sentence_tensors(corpus, b, row)
            gates = {k: torch.ones(n, cfg.n_heads, requires_grad=True) for k, n in an.layer_counts(cfg).items()}
            with intervening(gate_hooks(gates, every_module=True)):        # z * gate, as analyze gates
                loss = F.cross_entropy(tr.engine.model(src, None, fed, None)[0], gold[0], reduction="sum")
            grads = dict(zip(gates, torch.autograd.grad(loss, list(gates.values()))))
            for kind, layer, head in checks:
                explicit[(kind, layer, head)] += abs(float(grads[kind][layer, head]))
    for kind, layer, head in checks:
        expected = explicit[(kind, layer, head)] / len(corpus)
        assert raw[kind][layer, head] == pytest.approx(expected, rel=1e-4)
    normalised = an.normalise_per_layer(raw)
    for v in normalised.values():
        assert np.allclose(np.linalg.norm(v, axis=-1), 1.0)


def test_michel_importance_matches_a_finite_difference(tr, data_dir):
    corpus = an.Corpus(tr, data_dir, "val", limit=1)
    kind, layer, head = "cross", 0, 3
    raw = an.michel_importance(tr.engine.model, corpus)[kind][layer, head]
    model = copy.deepcopy(tr.engine.model).double()
    src, fed, gold = corpus.batches[0]
    counts, eps = an.layer_counts(tr.config), 1e-4
    losses = []
    for sign in (1, -1):
        gates = {k: torch.ones(n, tr.config.n_heads, dtype=torch.float64) for k, n in counts.items()}
        gates[kind][layer, head] += sign * eps
        with torch.no_grad(), intervening(None, gates):                     # head_mask's own channel
            losses.append(float(F.cross_entropy(model(src, None, fed, None)[0], gold[0], reduction="sum")))
    assert raw == pytest.approx(abs(losses[0] - losses[1]) / (2 * eps), rel=1e-3)


def test_output_has_the_documented_keys_and_shapes(tr, finished):
    result, path = finished
    assert an.load_head_importance(path.parent) == result
    assert {"model", "split", "sentences", "date", "command", "wall_seconds", "base_loss", "heads",
            "pruning_curve", "definitions"} <= set(result)
    assert result["model"] == "en-de" and result["split"] == "val" and result["sentences"] == CLI_PAIRS
    assert result["command"].startswith("python -m transformer analyze --model")
    cfg = tr.config
    assert set(result["heads"]) == {"encoder_self", "decoder_self", "cross"}
    for kind, n_layers in an.layer_counts(cfg).items():
        table = result["heads"][kind]
        for matrix in (table["loss_change"], table["michel_importance"]["raw"],
                       table["michel_importance"]["normalised"]):
            assert np.asarray(matrix).shape == (n_layers, cfg.n_heads)
    curve = result["pruning_curve"]
    counts = [p["heads_removed"] for p in curve]
    assert counts == an.pruning_counts(72, 0.25) == [0, 18, 36, 54, 72] and curve[0]["removed"] == []
    removed = [tuple(h) for p in curve for h in p["removed"]]
    assert [len(p["removed"]) for p in curve[1:]] == list(np.diff(counts))
    assert sorted(removed) == sorted(an.all_heads(cfg))               # incremental lists, every head once
    normalised = {k: np.asarray(v["michel_importance"]["normalised"]) for k, v in result["heads"].items()}
    scores = [normalised[k][l, h] for k, l, h in removed]
    assert scores == sorted(scores)                                    # least important first
    assert all(0 <= p["bleu"] <= 100 for p in curve)


def test_resume_after_interruptions_gives_the_same_file(cli_data_dir, finished, tmp_path, monkeypatch):
    reference, _ = finished
    out, resume = tmp_path / "head_importance.json", tmp_path / "resume.json"
    real_ablated, real_score = an.ablated_loss, an.score_texts
    calls = {"ablated": 0, "score": 0}

    def flaky_ablated(*args, **kwargs):
        calls["ablated"] += 1
        if calls["ablated"] == 31:
            raise KeyboardInterrupt
        return real_ablated(*args, **kwargs)

    def flaky_score(*args, **kwargs):
        calls["score"] += 1
        if calls["score"] == 3:
            raise KeyboardInterrupt
        return real_score(*args, **kwargs)

    monkeypatch.setattr(an, "ablated_loss", flaky_ablated)
    monkeypatch.setattr(an, "score_texts", flaky_score)
    with pytest.raises(KeyboardInterrupt):
        run_cli(cli_data_dir, out, resume)
    state = json.loads(resume.read_text())
    assert len(state["loss"]) == 30 and not out.exists()
    with pytest.raises(KeyboardInterrupt):
        run_cli(cli_data_dir, out, resume)
    assert calls["ablated"] == 31 + 42 and len(json.loads(resume.read_text())["bleu"]) == 2
    assert run_cli(cli_data_dir, out, resume) == 0
    assert calls["ablated"] == 73 and calls["score"] == 3 + 3       # nothing done twice
    result = json.loads(out.read_text(encoding="utf-8"))
    strip = lambda d: {k: v for k, v in d.items() if k not in VOLATILE}
    assert strip(result) == strip(reference)


def test_load_head_importance(tmp_path):
    assert an.load_head_importance(tmp_path) is None
    assert an.load_head_importance("Helsinki-NLP/opus-mt-en-de") is None
    (tmp_path / an.RESULT_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=an.RESULT_FILE):
        an.load_head_importance(tmp_path)
