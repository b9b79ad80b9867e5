"""Opening Hugging Face models: every bad input fails fast, with FileNotFoundError or
ValueError naming what is wrong; no remote code runs and nothing is unpickled."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO
from transformer import Translator


@pytest.fixture
def marian_copy(hf_dirs, tmp_path):
    """The session's tiny Marian (conftest's hf_dirs, shared and read-only) copied to change."""
    return hf_dirs.copy("marian", tmp_path / "opus-mt-copy")


def test_a_missing_directory_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        Translator.load(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="README.md"):
        Translator.load(REPO / "README.md")


def test_a_hub_id_offline_fails_at_once(monkeypatch):
    from transformer.hf.runtime import runtime
    runtime()           # transformers' one-time import (seconds; done by earlier tests in a full run) is not timed
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(FileNotFoundError, match="Helsinki-NLP/opus-mt-en-de.*offline"):
        Translator.load("Helsinki-NLP/opus-mt-en-de")
    assert time.perf_counter() - started < 3.0


def test_an_unreachable_hub_fails_fast():
    """Online mode, but the hub endpoint refuses connections: a clear error within seconds."""
    code = ("import time\nfrom transformer import Translator\nfrom transformer.hf.runtime import runtime\n"
            "runtime()\nt = time.perf_counter()\n"                  # the one-time import is not timed
            "try:\n    Translator.load('someone/no-such-model')\nexcept FileNotFoundError as e:\n"
            "    print('ERR', time.perf_counter() - t, e)\n")
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", PYTHONPATH=str(REPO))
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    line = next(line for line in result.stdout.splitlines() if line.startswith("ERR"))
    assert "someone/no-such-model" in line and float(line.split()[1]) < 10.0, result.stdout + result.stderr


def test_not_an_encoder_decoder(tmp_path):
    from transformers import BertConfig, BertModel
    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         vocab_size=50)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match=r"bert.*not an encoder-decoder"):
        Translator.load(tmp_path / "bert")


@pytest.mark.parametrize("model_type, message", [("pegasus", "'pegasus' is not supported; supported: marian"),
                                                 ("no-such-architecture", "unknown to transformers")])
def test_unsupported_architectures_list_the_supported(tmp_path, model_type, message):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    with pytest.raises(ValueError, match=message) as error:
        Translator.load(tmp_path)
    assert "config.json" in str(error.value) and "t5" in str(error.value)


def test_remote_code_never_runs(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass EvilConfig: pass\n")
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "evil", "auto_map": {"AutoConfig": "evil.EvilConfig"}}))
    with pytest.raises(ValueError, match="evil"):
        Translator.load(tmp_path)
    assert not marker.exists()


def test_corrupt_weights_name_the_file(marian_copy):
    weights = marian_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ValueError, match="model.safetensors"):
        Translator.load(marian_copy)


def test_a_missing_tensor_is_not_silently_initialised(marian_copy):
    from safetensors.torch import load_file, save_file
    weights = marian_copy / "model.safetensors"
    state = load_file(str(weights))
    del state[next(k for k in state if k.endswith("fc1.weight"))]
    save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model.safetensors.*missing"):
        Translator.load(marian_copy)


def test_pickled_weights_are_never_opened(marian_copy):
    (marian_copy / "model.safetensors").unlink()
    (marian_copy / "pytorch_model.bin").write_bytes(b"\x80\x04 not a real pickle; must not be read")
    with pytest.raises(ValueError, match=r"pytorch_model.bin.*never"):
        Translator.load(marian_copy)
    (marian_copy / "pytorch_model.bin").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        Translator.load(marian_copy)


def test_a_missing_tokenizer_names_it(marian_copy):
    (marian_copy / "source.spm").unlink()
    with pytest.raises((ValueError, FileNotFoundError), match="opus-mt-copy"):
        Translator.load(marian_copy)
    for name in ("tokenizer_config.json", "vocab.json", "target.spm"):
        (marian_copy / name).unlink()
    with pytest.raises(FileNotFoundError, match=r"tokenizer_config.json.*no tokenizer"):
        Translator.load(marian_copy)


def test_language_codes_are_checked(hf_dirs, tmp_path):
    assert Translator.load(hf_dirs["m2m100"]).target_lang == "de"      # the tokenizer's saved pair
    m2m = shutil.copytree(hf_dirs["m2m100"], tmp_path / "m2m")
    settings = json.loads((m2m / "tokenizer_config.json").read_text())
    settings.pop("tgt_lang", None)
    (m2m / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=r"m2m: a multilingual model needs source_lang= and target_lang=, e.g. \["):
        Translator.load(m2m)
    with pytest.raises(ValueError, match="target_lang='xx' is not a language code"):
        Translator.load(hf_dirs["m2m100"], source_lang="en", target_lang="xx")
    tr = Translator.load(hf_dirs["m2m100"], source_lang="de", target_lang="fr")
    out = tr.translate("Ein Hund.", max_len=3)
    assert out.source_tokens[0] == "__de__" and out.output_tokens[0] == "__fr__"
    with pytest.raises(ValueError, match=r"config\.json: no T5 task for .en. -> .xx."):
        Translator.load(hf_dirs["t5"], source_lang="en", target_lang="xx")
    t5 = Translator.load(hf_dirs["t5"], source_lang="en", target_lang="fr")      # built-in prefix
    assert t5.translate("A dog.", max_len=2).source_tokens[0] == t5.engine.tokenizer.hf.tokenize("translate")[0]
