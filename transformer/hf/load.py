"""Open a Hugging Face encoder-decoder: a `save_pretrained` directory, or a hub id when online.

Never runs remote code and never unpickles: weights load only from safetensors, whose
headers are checked first so a corrupt file is a ValueError naming it. A hub id while
offline fails at once (the cache is tried first, then the hub with short timeouts).
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import torch

from ..sources import HUB_ID, config_model_type
from . import arch
from .runtime import runtime

HUB_TIMEOUT = 5.0                                  # seconds per hub request
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.spm", "*.txt"]    # never *.bin, *.h5, *.msgpack
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")


def _offline() -> bool:
    flags = (os.environ.get(name, "").strip().lower() for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return runtime().hub_constants.HF_HUB_OFFLINE or any(flag in ("1", "true", "yes", "on") for flag in flags)


def resolve(source) -> tuple[Path, str | None]:
    """(local directory, hub id or None). Downloads a hub snapshot (config, tokenizer, safetensors)."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p, None
    if p.exists():
        raise ValueError(f"{p}: not a model directory")
    repo_id = str(source)
    if not HUB_ID.match(repo_id):
        raise FileNotFoundError(f"{p}: model directory not found")
    hf = runtime()
    try:
        return Path(hf.hub.snapshot_download(repo_id, local_files_only=True, allow_patterns=HUB_FILES)), repo_id
    except Exception:   # not cached: go online below
        pass
    if _offline():
        raise FileNotFoundError(f"{repo_id}: no such local directory, and as a Hugging Face hub id it is not "
                                "in the local cache while offline (HF_HUB_OFFLINE is set)")
    try:
        hf.hub.HfApi().model_info(repo_id, timeout=HUB_TIMEOUT)
        return Path(hf.hub.snapshot_download(repo_id, allow_patterns=HUB_FILES, etag_timeout=HUB_TIMEOUT)), repo_id
    except hf.RepositoryNotFoundError:
        raise FileNotFoundError(f"{repo_id}: no such local directory or Hugging Face hub model") from None
    except Exception as exc:
        raise FileNotFoundError(f"{repo_id}: no such local directory, and the Hugging Face hub could not be "
                                f"reached ({type(exc).__name__}: {str(exc)[:200]})") from None


def read_config(path: Path):
    """The transformers config, after checking it is a supported encoder-decoder."""
    with FROM_PRETRAINED_LOCK:
        return _read_config(path)


def _read_config(path: Path):
    hf = runtime()
    file = path / "config.json"
    if not file.is_file():
        raise FileNotFoundError(f"{file}: config not found")
    model_type = config_model_type(path)
    supported = ", ".join(arch.SUPPORTED)
    if model_type is None:
        raise ValueError(f"{file}: not a valid Hugging Face config (no model_type)")
    if model_type not in hf.CONFIG_MAPPING:
        raise ValueError(f"{file}: model_type {model_type!r} is unknown to transformers; supported: {supported}")
    try:
        config = hf.AutoConfig.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    except Exception as exc:
        raise ValueError(f"{file}: could not be read ({type(exc).__name__}: {exc})") from exc
    if not getattr(config, "is_encoder_decoder", False):
        raise ValueError(f"{file}: {model_type!r} is not an encoder-decoder model, so it does not translate "
                         f"with cross-attention; supported: {supported}")
    if model_type not in arch.FAMILIES:
        raise ValueError(f"{file}: the encoder-decoder architecture {model_type!r} is not supported; "
                         f"supported: {supported}")
    return config


def check_weights(path: Path) -> Path:
    """The safetensors file (or shard index) to load, with every header checked."""
    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{index}: not a valid safetensors index ({exc})") from exc
        files, main = [path / s for s in shards], index
    elif single.is_file():
        files, main = [single], single
    else:
        pickled = [path / name for name in PICKLES if (path / name).exists()]
        if pickled:
            raise ValueError(f"{pickled[0]}: only safetensors weights are loaded (pickle-based files are never "
                             f"opened); save the model with save_pretrained(safe_serialization=True)")
        raise FileNotFoundError(f"{single}: weights file not found")
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"{file}: weights shard not found")
        try:
            with runtime().safe_open(str(file), framework="pt") as handle:
                handle.keys()
        except Exception as exc:   # safetensors raises its own error type for corrupt headers/data
            raise ValueError(f"{file}: corrupt or unreadable safetensors file ({exc})") from exc
    return main


# transformers' from_pretrained is not thread-safe: three threads loading a Marian, an NLLB and a
# T5 model at once failed two runs in three (the T5 found its tied embeddings missing). Loads take
# turns: open_hf (hf/engine.py) as a whole, and the config, tokenizer and model reads for callers
# that use them alone (the app's language list). Importing transformers is runtime()'s job (runtime.py).
FROM_PRETRAINED_LOCK = threading.RLock()


def load_tokenizer(path: Path, config):
    with FROM_PRETRAINED_LOCK:
        return _load_tokenizer(path, config)


def _load_tokenizer(path: Path, config):
    if not any((path / name).is_file() for name in ("tokenizer_config.json", "tokenizer.json")):
        raise FileNotFoundError(f"{path / 'tokenizer_config.json'}: no tokenizer in {path} "
                                "(save it there too: tokenizer.save_pretrained)")
    try:
        tokenizer = runtime().AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        raise ValueError(f"{path}: the tokenizer could not be loaded ({type(exc).__name__}: {exc})") from exc
    if isinstance(tokenizer, bool) or not hasattr(tokenizer, "convert_ids_to_tokens"):
        raise ValueError(f"{path}: no usable tokenizer found")
    top = max(tokenizer.get_vocab().values())
    if top >= config.vocab_size:
        raise ValueError(f"{path}: the tokenizer has ids up to {top}, but config.json says "
                         f"vocab_size={config.vocab_size} (vocabulary mismatch)")
    return tokenizer


def load_model(path: Path, config):
    with FROM_PRETRAINED_LOCK:
        return _load_model(path, config)


def _load_model(path: Path, config):
    weights = check_weights(path)
    try:
        model, info = runtime().AutoModelForSeq2SeqLM.from_pretrained(
            path, config=config, use_safetensors=True, trust_remote_code=False, local_files_only=True,
            attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    except Exception as exc:
        raise ValueError(f"{weights}: could not be loaded ({type(exc).__name__}: {exc})") from exc
    missing, mismatched = sorted(info.get("missing_keys", ())), sorted(info.get("mismatched_keys", ()))
    if missing or mismatched:
        raise ValueError(f"{weights}: tensors do not match config.json (missing {missing[:5]}, "
                         f"shape mismatch {[str(m) for m in mismatched[:5]]})")
    return model.eval()


def load_parts(source) -> tuple:
    """(model, tokenizer, card) of a save_pretrained directory or a hub id, every file checked;
    hf/engine.py's open_hf makes the engine of them."""
    with FROM_PRETRAINED_LOCK:
        path, hub_id = resolve(source)
        config = read_config(path)
        tokenizer = load_tokenizer(path, config)
        model = load_model(path, config)
    card = {"name": hub_id or path.name, "family": config.model_type, "model_type": config.model_type,
            "architecture": (config.architectures or [type(model).__name__])[0], "path": str(path),
            "hub_id": hub_id, "parameters": sum(p.numel() for p in model.parameters()),
            "source": "huggingface"}
    return model, tokenizer, card
