"""Model directories: config.json, model.safetensors, spm.model, card.json. No pickle anywhere."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .config import ModelConfig, read_json_object
from .model import Transformer
from .tokenizer import Tokenizer

CONFIG, WEIGHTS, SPM, CARD = "config.json", "model.safetensors", "spm.model", "card.json"


def _tied_keys(model: Transformer) -> set[str]:
    """State-dict keys that alias source_embedding.weight (safetensors stores a tensor once)."""
    return {"target_embedding.weight", "output_projection.weight"} if model.config.tie_embeddings else set()


def weights_state(model: Transformer, dtype: torch.dtype = torch.float16) -> dict[str, torch.Tensor]:
    tied = _tied_keys(model)
    return {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items() if k not in tied}


def save_model_dir(out: str | Path, model: Transformer, tokenizer: Tokenizer, card: dict | None = None,
                   dtype: torch.dtype = torch.float16) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.config.save(out / CONFIG)
    save_file(weights_state(model, dtype), str(out / WEIGHTS), metadata={"format": "pt"})
    tokenizer.save(out / SPM)
    if card is not None:
        write_card(out, card)
    return out


def write_card(out: str | Path, card: dict) -> None:
    Path(out, CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_weights_into(model: Transformer, path: Path) -> None:
    """Load safetensors weights as float32, checking names and shapes; errors name the file."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: weights file not found")
    try:
        state = load_file(str(path), device="cpu")
    except Exception as exc:   # safetensors raises its own error type for corrupt headers/data
        raise ValueError(f"{path}: corrupt or unreadable safetensors file ({exc})") from exc
    expected = {k: v for k, v in model.state_dict().items() if k not in _tied_keys(model)}
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{path}: tensor names do not match the config (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(f"{path}: {name} has shape {tuple(tensor.shape)}, config expects "
                             f"{tuple(expected[name].shape)} (vocabulary or size mismatch)")
        if not tensor.is_floating_point():
            raise ValueError(f"{path}: {name} is not a floating-point tensor")
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)


def load_model_dir(path: str | Path):
    """Returns (config, model on cpu in eval mode, tokenizer, card) after validating every file."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: model directory not found")
    config = ModelConfig.load(path / CONFIG)
    tokenizer = Tokenizer.load(path / SPM)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f"{path / SPM}: vocabulary has {len(tokenizer)} pieces but {path / CONFIG} "
                         f"says vocab_size={config.vocab_size}")
    card = read_json_object(path / CARD, "model card")
    model = Transformer(config)
    load_weights_into(model, path / WEIGHTS)
    model.eval()
    return config, model, tokenizer, card
