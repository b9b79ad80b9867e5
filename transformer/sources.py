"""What a model source is, before anything is opened: a directory of ours, a Hugging Face
`save_pretrained` directory (its config.json names a model_type), or a hub id. Cheap and free of
imports of either engine, so the engines, their loaders and the app's model list can all ask it
(Translator.load opens the engine it names: translator.open_engine)."""
from __future__ import annotations

import json
import re
from pathlib import Path

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def config_model_type(directory: Path) -> str | None:
    try:
        data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("model_type") if isinstance(data, dict) else None


def is_hf_source(path) -> bool:
    """A directory whose config.json names a model_type, or a hub-like id that is not a local path.
    Cheap: transformers is imported only when this says yes."""
    p = Path(path).expanduser()
    if p.is_dir():
        return config_model_type(p) is not None
    return not p.exists() and bool(HUB_ID.match(str(path)))
