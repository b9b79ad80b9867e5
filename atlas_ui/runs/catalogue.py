"""Which models there are and what they translate, and the example sentences: read from disk,
cached per file version, never loading a model."""
from __future__ import annotations

import csv
import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from transformer.hf.arch import language_codes, t5_tasks
from transformer.hf.families import chooses_languages, config_tasks
from transformer.hf.load import load_tokenizer, read_config

from ..server.settings import RESCAN_SECONDS


@dataclass(frozen=True)
class ModelRef:
    """Names one loaded model: its path (or hub id) and the language pair asked for (None: the
    model's default). Hashable, so it keys the model and translation caches."""
    path: str
    source_lang: str | None = None
    target_lang: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "path", str(self.path))
        object.__setattr__(self, "source_lang", self.source_lang or None)     # "" means the default
        object.__setattr__(self, "target_lang", self.target_lang or None)


def rescan_tick() -> int:
    """Changes every RESCAN_SECONDS: the disk is looked at that often, not on every run (with a
    whole audience, stat calls were a tenth of each run)."""
    return int(time.monotonic() // RESCAN_SECONDS)


def find_models(folder: str) -> dict:
    """name -> path of every model directory (one holding config.json) in `folder`."""
    return dict(_find_models(folder, rescan_tick()))


@functools.lru_cache(maxsize=32)
def _find_models(folder: str, tick: int) -> dict:
    root = Path(folder)
    if not root.is_dir():
        return {}
    return {p.name: str(p) for p in sorted(root.iterdir()) if (p / "config.json").is_file()}


@dataclass(frozen=True)
class ModelInfo:
    """What the picker needs to know of a model directory before loading it."""
    hf: bool                  # a Hugging Face directory (config.json has a model_type)
    model_type: str           # "atlas" for ours
    source_lang: str
    target_lang: str
    tasks: tuple = ()         # T5: the (source, target) translation tasks its config names, in order


def _read_config(path: str) -> dict:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


@functools.lru_cache(maxsize=64)
def model_info(path: str, stamp=None) -> ModelInfo:
    """Read once per config.json version (`stamp`), not on every run."""
    config = _read_config(path)
    if "model_type" in config:
        named = SimpleNamespace(task_specific_params=config_tasks(config))      # T5's; None for the others
        tasks = tuple((t.source, t.target) for t in t5_tasks(named))
        source, target = tasks[0] if tasks else ("", "")      # what Translator.load picks without languages
        return ModelInfo(True, str(config["model_type"]), source, target, tasks)
    return ModelInfo(False, "atlas", str(config.get("source_lang", "src")), str(config.get("target_lang", "tgt")))


def label_for(name: str, info: ModelInfo) -> str:
    """'en-de (en → de)' for ours, 'opus-mt-en-de (Hugging Face marian)' for theirs."""
    if info.hf:
        return f"{name} (Hugging Face {info.model_type})"
    return f"{name} ({info.source_lang or 'src'} → {info.target_lang or 'tgt'})"


@functools.lru_cache(maxsize=16)
def _model_labels(items: tuple, stamps: tuple) -> dict:
    return {name: label_for(name, model_info(path, stamp)) for (name, path), stamp in zip(items, stamps)}


def model_labels(models: dict) -> dict:
    """name -> picker label for every model, one cache lookup per run (keyed on config.json times)."""
    items = tuple(models.items())
    return _model_labels(items, file_stamps(tuple(str(Path(path) / "config.json") for _, path in items)))


def model_languages(path: str) -> tuple[str, str]:
    info = model_info(path, file_stamps((str(Path(path) / "config.json"),)))
    return info.source_lang or "src", info.target_lang or "tgt"


def translation_tasks(path: str) -> tuple:
    """A T5's translation tasks, (source, target) pairs in its config's order; () for other models."""
    return model_info(path, file_stamps((str(Path(path) / "config.json"),))).tasks


@functools.lru_cache(maxsize=16)
def language_options(path: str) -> tuple[tuple, str, str]:
    """(language codes, default source, default target) of a multilingual Hugging Face model;
    ([], "", "") for a model with one language pair. Reads the tokenizer only."""
    if not model_info(path).hf or not chooses_languages(model_info(path).model_type):
        return (), "", ""
    tokenizer = load_tokenizer(Path(path), read_config(Path(path)))
    codes = tuple(language_codes(tokenizer))
    return codes, str(getattr(tokenizer, "src_lang", "") or ""), str(getattr(tokenizer, "tgt_lang", "") or "")


def file_stamps(paths: tuple) -> tuple:
    """Modification times, so that a cache keyed on them sees an edited file (within RESCAN_SECONDS)."""
    return _file_stamps(tuple(paths), rescan_tick())


@functools.lru_cache(maxsize=256)
def _file_stamps(paths: tuple, tick: int) -> tuple:
    return tuple(Path(p).stat().st_mtime_ns if Path(p).is_file() else None for p in paths)


def load_examples(paths: tuple, fallback: tuple, stamps: tuple = ()) -> list:
    """Rows of the first readable examples.tsv among `paths` (dicts by column), else `fallback`.
    Fresh dicts each call: the file is read once per `stamps`."""
    rows = _read_examples(tuple(paths), tuple(stamps))
    return [dict(row) for row in (rows or fallback)]


# The lookups below run on every script run of every session: functools caches (keyed on file
# times where a file is read) cost microseconds, st.cache_data hashes its arguments and unpickles
# its value on each call (issue 14). What they return is never changed by the callers.
@functools.lru_cache(maxsize=8)
def _read_examples(paths: tuple, stamps: tuple) -> tuple:
    for path in paths:
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                rows = [{k: (v or "").strip() for k, v in row.items() if k}
                        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
        rows = tuple(row for row in rows if any(row.values()))
        if rows:
            return rows
    return ()
