"""Model configuration: a dataclass saved as config.json and rebuilt from it."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ModelConfig:
    vocab_size: int = 8000          # joint source/target sentencepiece vocabulary
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1            # residual, FFN and embedding dropout
    attention_dropout: float = 0.0  # on the attention weights; 0 keeps CPU training on the fused kernel
    max_source_len: int = 128       # pieces, </s> included
    max_target_len: int = 128       # output pieces, </s> included
    norm_first: bool = True         # pre-LN trains stably on small data; False is the paper's post-LN
    tie_embeddings: bool = True     # share source/target embeddings and the output projection
    source_lang: str = "en"
    target_lang: str = "de"
    extra: dict = field(default_factory=dict)   # free-form notes that travel with the model

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name in ("vocab_size", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers",
                     "d_ff", "max_source_len", "max_target_len"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"config field {name} must be positive, got {getattr(self, name)!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{source}: unknown config fields {unknown}")
        try:
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source}: {exc}") from exc

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        return cls.from_dict(read_json_object(path, "config file"), source=str(path))


def read_json_object(path: Path, what: str) -> dict:
    """A JSON object from `path`; FileNotFoundError / ValueError name the file."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {what} not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data
