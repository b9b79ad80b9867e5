"""Constants and environment-driven settings of the app (no Streamlit state here)."""
from __future__ import annotations

import os
from pathlib import Path

from viz.diagnosis import LOW_CONFIDENCE  # noqa: F401 - mean piece probability of the "outside" note (one value, viz's)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODELS_DIR = ROOT / "pretrained"
DEFAULT_MODEL = "en-de"
EXAMPLES_FILE = "examples.tsv"
MAX_CHARS = 1000            # longest input the app accepts, in characters
TOP_K = 10                  # candidates kept per decoding step
MAX_BEAM = 8
MAX_COMPARE_HEADS = 4
RESCAN_SECONDS = 2.0              # how often model folders and example files are looked at
MAX_LOADED_MODELS = 3       # models kept in memory per process (least recently used goes)
FIGURE_CACHE_ENTRIES = 64   # figures shared between sessions, per process (least recently used goes)
REAL_MODEL_HINT = "Helsinki-NLP/opus-mt-en-de"     # when a model's languages are unknown (see real_model_hint)

FALLBACK_EXAMPLES = (
    {"en": "A man is riding a bike.", "de": "Ein Mann fährt Fahrrad.", "shows": "built-in example"},
    {"en": "Two dogs play in the snow.", "de": "Zwei Hunde spielen im Schnee.", "shows": "built-in example"},
    {"en": "A little girl in a red dress is climbing the stairs.",
     "de": "Ein kleines Mädchen in einem roten Kleid klettert die Treppe hinauf.", "shows": "built-in example"},
)

KINDS = ("encoder_self", "decoder_self", "cross")
KIND_LABELS = {"encoder_self": "Encoder self-attention", "decoder_self": "Decoder self-attention",
               "cross": "Cross-attention"}
IMPORTANT_HEADS = 3         # heads per kind marked as important (largest loss change in head_importance.json)


def real_model_hint(source_lang, target_lang) -> str:
    """A hub model that translates the same way round as ours (the note on the de-en model used to
    suggest opus-mt-en-de): Helsinki-NLP's opus-mt-SRC-TGT for two-letter language codes."""
    codes = [str(code or "").lower() for code in (source_lang, target_lang)]
    if all(len(code) == 2 and code.isalpha() for code in codes) and codes[0] != codes[1]:
        return f"Helsinki-NLP/opus-mt-{codes[0]}-{codes[1]}"
    return REAL_MODEL_HINT


def models_dir(environ=os.environ) -> Path:
    """The folder holding model directories: $ATLAS_MODELS_DIR, else <repo>/pretrained."""
    value = environ.get("ATLAS_MODELS_DIR", "").strip()
    return Path(value).expanduser() if value else DEFAULT_MODELS_DIR


def _positive_int(environ, name: str, default: int) -> int:
    try:
        value = int(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def torch_threads(environ=os.environ) -> int:
    """Torch threads per process: $ATLAS_TORCH_THREADS, else what is left per translation when
    max_concurrent() run at once beside the server's own thread: 1 on 2-4 cores, at most 4.
    A second thread bought 3 ms on an idle 2-core machine and cost 0.2 s per click on a busy
    one (benchmarks/bench_first_paint.py --env ATLAS_TORCH_THREADS=...)."""
    spare = (os.cpu_count() or 1) // (max_concurrent(environ) + 1)
    return _positive_int(environ, "ATLAS_TORCH_THREADS", min(4, max(1, spare)))


def max_concurrent(environ=os.environ) -> int:
    """Translations allowed to run at once in this process: $ATLAS_MAX_CONCURRENT, else 2."""
    return _positive_int(environ, "ATLAS_MAX_CONCURRENT", 2)


def follower_runs(environ=os.environ) -> int:
    """A room's follower runs allowed at once in this process: $ATLAS_ROOM_RUNS, else 1."""
    return _positive_int(environ, "ATLAS_ROOM_RUNS", 1)


def extra_models(environ=os.environ) -> dict:
    """name -> path or hub id of the models named on the command line (`attention-atlas MODEL ...`
    passes them in $ATLAS_MODELS, separated by os.pathsep)."""
    models = {}
    for item in environ.get("ATLAS_MODELS", "").split(os.pathsep):
        item = item.strip()
        if item:
            path = Path(item).expanduser()
            models[path.name if path.is_dir() else item] = str(path) if path.is_dir() else item
    return models
