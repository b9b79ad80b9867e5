"""The training loop learns; the CLI trains, resumes, evaluates and translates."""
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import random_sentences, reverse, train_tiny
from transformer.training.data import collate, token_batches
from transformer.tokenizer import SPECIALS, Tokenizer
from transformer.training.train import learning_rate

REPO = Path(__file__).resolve().parents[1]


def test_training_loop_learns_to_reverse(tiny):
    losses = tiny.train_losses
    start, end = sum(losses[:10]) / 10, sum(losses[-20:]) / 20
    assert end < 0.1 * start, (start, end)
    seen = set(random_sentences(3000, 0))
    unseen = [s for s in random_sentences(40, seed=12345, min_len=4, max_len=8) if s not in seen][:10]
    assert len(unseen) >= 8
    correct = sum(tiny.translate(s, capture=False).text == reverse(s) for s in unseen)
    assert correct >= 0.8 * len(unseen), correct


def test_post_ln_model_trains_too():
    _, losses = train_tiny(norm_first=False, steps=150, seed=3)
    assert sum(losses[-10:]) / 10 < 0.6 * sum(losses[:10]) / 10


def test_learning_rate_warmup_then_inverse_sqrt():
    assert learning_rate(1, 1e-3, 100) == 1e-5
    assert abs(learning_rate(100, 1e-3, 100) - 1e-3) < 1e-12
    assert abs(learning_rate(400, 1e-3, 100) - 5e-4) < 1e-12
    assert learning_rate(50, 1e-3, 100) < learning_rate(100, 1e-3, 100) > learning_rate(200, 1e-3, 100)


def test_token_batches_cover_everything_once_and_respect_the_budget():
    generator = torch.Generator().manual_seed(0)
    source = [[5] * (1 + i % 13) for i in range(500)]
    target = [[6] * (1 + i % 7) for i in range(500)]
    batches = token_batches(source, target, 120, generator)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    for b in batches:
        src, fed, gold = collate(b, source, target)
        assert src.numel() <= 120 and fed.numel() <= 120 or len(b) == 1
        assert (fed[:, 0] == 2).all()
        lengths = (gold != 0).sum(1)
        assert all(gold[r, lengths[r] - 1] == 3 for r in range(len(b)))
    again = token_batches(source, target, 120, torch.Generator().manual_seed(0))
    assert again == batches                                    # deterministic with a seed


def test_tokenizer_specials_and_round_trip():
    sentences = random_sentences(500, 1)
    tok = Tokenizer.train(sentences, vocab_size=30, seed_sentencepiece_size=1000)
    assert len(tok) == 30
    for piece, idx in SPECIALS.items():
        assert tok.id_to_piece(idx) == piece
    text = "red dog runs"
    ids = tok.encode_ids(text)
    assert tok.decode(ids) == text
    assert tok.decode([2] + ids + [3, 0, 0]) == text
    assert tok.pieces(ids) == tok.encode_pieces(text)
    # the pieces' texts are read once at load: the same as sentencepiece's, and the same error out of range
    assert [tok.id_to_piece(i) for i in range(len(tok))] == [tok.sp.id_to_piece(i) for i in range(len(tok))]
    for bad in (len(tok), -1):
        with pytest.raises(IndexError):
            tok.id_to_piece(bad)


def write_split(folder: Path, split: str, lang: str, lines):
    with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def run_cli(*args, cwd=REPO):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "transformer", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_cli_train_resume_evaluate_translate(tmp_path, capsys):
    """`python -m transformer train` twice (a fresh start, then a resume), in processes of their own;
    evaluate and translate through the same main() in this one: each process spent ~2.3 s of its
    ~2.5-4.5 s importing, and the two trainings already run the module as a command."""
    from transformer.__main__ import main
    data = tmp_path / "data"
    data.mkdir()
    for split, n, seed in (("train", 1500, 0), ("val", 60, 1), ("test_2016_flickr", 60, 2)):
        sentences = random_sentences(n, seed)
        write_split(data, split, "xx", sentences)
        write_split(data, split, "yy", [reverse(s) for s in sentences])
    out, run_dir = tmp_path / "model", tmp_path / "run"
    common = ["train", "--data-dir", str(data), "--src", "xx", "--tgt", "yy", "--out", str(out),
              "--run-dir", str(run_dir), "--vocab-size", "40", "--d-model", "32", "--heads", "4",
              "--encoder-layers", "1", "--decoder-layers", "1", "--d-ff", "64", "--max-tokens", "600",
              "--warmup", "50", "--lr", "3e-3", "--threads", "1", "--average", "2", "--no-jemalloc"]
    first = run_cli(*common, "--epochs", "1")
    assert first.returncode == 0, first.stderr[-2000:]
    assert (run_dir / "last.pt").is_file()
    second = run_cli(*common, "--epochs", "3")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resumed from" in second.stderr + second.stdout
    card = json.loads((out / "card.json").read_text())
    assert card["training"]["epochs"] == 3
    assert [h["epoch"] for h in card["training"]["history"]] == [1, 2, 3]
    for split in ("val", "test_2016_flickr"):
        for decoding in ("greedy", "beam4"):
            assert 0 <= card["scores"][split][decoding]["bleu"] <= 100
            assert "chrf" in card["scores"][split][decoding]
    assert "bleu" in card["scores"]["test_2016_flickr_first200"]["greedy"]
    assert card["parameters"] > 0 and "command" in card and "BLEU" not in card["sacrebleu_signature"]["bleu"]
    assert "nrefs:1" in card["sacrebleu_signature"]["bleu"]
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out), "--data-dir", str(data), "--split", "val"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("BLEU = ") and lines[1].startswith("chrF2 = ")
    assert float(lines[0].split()[2]) == card["scores"]["val"]["greedy"]["bleu"]
    assert main(["translate", "--model", str(out), "red dog"]) == 0 and capsys.readouterr().out.strip()
    assert main(["translate", "--model", str(out), "   "]) == 2 and "empty" in capsys.readouterr().err
