"""Bad input, Unicode, truncation, model directories and safe loading."""
import json
import re
from pathlib import Path

import pytest
import torch

from transformer import Translator
from transformer.checkpoint import CARD, CONFIG, SPM, WEIGHTS

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b"])
def test_empty_text_raises_clear_value_error(tiny, text):
    with pytest.raises(ValueError, match="empty|no pieces"):
        tiny.translate(text)
    with pytest.raises(ValueError):
        tiny.translate_batch(["red", text])


def test_long_text_is_truncated_and_flagged(tiny):
    text = " ".join(["red blue"] * 200)
    out = tiny.translate(text, max_len=5)
    assert out.truncated
    assert len(out.source_tokens) == tiny.config.max_source_len and out.source_tokens[-1] == "</s>"
    assert out.attention.encoder_self.shape[-1] == tiny.config.max_source_len
    assert not tiny.translate("red blue").truncated


@pytest.mark.parametrize("text", [
    "red dog 😀🐕 runs", "red 漢字 dog 日本語", "مرحبا red שלום", "red\x00dog\x07\x1b[31m runs",
    "<s> </s> <pad> <unk> red", "<script>alert(1)</script> **bold** [x](http://e)", "e\u0301 ﬁ Ｆｕｌｌ"])
def test_any_unicode_translates(tiny, text):
    out = tiny.translate(text, max_len=12)
    assert out.source_tokens[-1] == "</s>"
    assert isinstance(out.text, str)
    assert out.attention.encoder_self.shape[-1] == len(out.source_tokens)


def test_unknown_characters_become_unk_pieces(tiny):
    out = tiny.translate("red 😀 dog", max_len=5)
    assert "<unk>" in out.source_tokens
    # user text that looks like special tokens stays ordinary pieces, not control ids
    out = tiny.translate("<s> red", max_len=5)
    assert out.source_ids.count(2) == 0 and out.source_ids.count(3) == 1


def test_model_directory_round_trip(tiny, tiny_dir):
    for name in (CONFIG, WEIGHTS, SPM, CARD):
        assert (tiny_dir / name).is_file()
    loaded = Translator.load(tiny_dir, device="cpu")
    assert loaded.device == torch.device("cpu")
    assert loaded.config == tiny.config
    assert loaded.source_lang == "xx" and loaded.target_lang == "yy"
    assert loaded.card["name"] == "tiny reverse"
    a, b = tiny.translate("red dog runs"), loaded.translate("red dog runs")
    assert a.output_tokens == b.output_tokens
    assert (abs(a.attention.cross - b.attention.cross)).max() <= 1e-6


def test_default_device_is_cuda_when_available(tiny_dir):
    loaded = Translator.load(tiny_dir)
    assert loaded.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert next(loaded.engine.model.parameters()).device.type == loaded.device.type


def copy_dir(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("missing", [CONFIG, WEIGHTS, SPM, CARD])
def test_missing_file_names_the_file(tiny_dir, tmp_path, missing):
    broken = copy_dir(tiny_dir, tmp_path / "m")
    (broken / missing).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        Translator.load(broken)


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        Translator.load(tmp_path / "nowhere")


def test_corrupt_weights_raise_value_error(tiny_dir, tmp_path):
    broken = copy_dir(tiny_dir, tmp_path / "m")
    data = (broken / WEIGHTS).read_bytes()
    (broken / WEIGHTS).write_bytes(b"\x00garbage" + data[50:200])
    with pytest.raises(ValueError, match=WEIGHTS):
        Translator.load(broken)
    (broken / WEIGHTS).write_bytes(data[: len(data) // 2])      # truncated file
    with pytest.raises(ValueError, match=WEIGHTS):
        Translator.load(broken)


def test_corrupt_config_and_tokenizer(tiny_dir, tmp_path):
    broken = copy_dir(tiny_dir, tmp_path / "a")
    (broken / CONFIG).write_text("{not json")
    with pytest.raises(ValueError, match=CONFIG):
        Translator.load(broken)
    broken = copy_dir(tiny_dir, tmp_path / "b")
    (broken / SPM).write_bytes(b"not a sentencepiece model")
    with pytest.raises(ValueError, match=SPM):
        Translator.load(broken)


def test_vocabulary_and_shape_mismatches(tiny_dir, tmp_path):
    broken = copy_dir(tiny_dir, tmp_path / "vocab")
    cfg = json.loads((broken / CONFIG).read_text())
    cfg["vocab_size"] += 7
    (broken / CONFIG).write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="vocab"):
        Translator.load(broken)
    broken = copy_dir(tiny_dir, tmp_path / "shape")
    cfg = json.loads((broken / CONFIG).read_text())
    cfg["d_ff"] *= 2
    (broken / CONFIG).write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=WEIGHTS):
        Translator.load(broken)


def test_no_pickle_anywhere_in_the_code():
    sources = list((REPO / "transformer").glob("*.py")) + [REPO / "app.py"] + list((REPO / "viz").glob("*.py"))
    for path in sources:
        if not path.exists():
            continue
        text = path.read_text()
        assert "import pickle" not in text and "pickle.load" not in text, path
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path, call)
