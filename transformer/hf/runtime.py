"""The one place that imports `transformers` (and `huggingface_hub`): the package and every
submodule the engine (hf/engine.py) uses, once, under a lock.

`transformers` resolves its names lazily (`from transformers import AutoConfig` imports a
submodule on first access), and that lazy import is not thread-safe: two sessions' threads
reaching it at once raised `ImportError: cannot import name 'AutoConfig'` on a busy machine.
So nothing in `transformer/` imports `transformers` anywhere but through `runtime()`. Its first
call imports, while holding a lock, the auto classes, generation and cache helpers, and the
configuration, modeling and tokenization modules of every supported family, with each public
name resolved; later calls return at once and no later path imports a transformers module
(tests/test_hf_runtime.py checks both). The app calls it at server start (atlas_ui/server/asgi.py).
"""
from __future__ import annotations

import importlib
import pkgutil
import threading
from types import SimpleNamespace

from .families import FAMILIES

# what the engine, decoding and the loaders use beyond the families' own modules
HELPERS = ("transformers.models.auto.configuration_auto", "transformers.models.auto.tokenization_auto",
           "transformers.models.auto.modeling_auto", "transformers.cache_utils", "transformers.modeling_outputs",
           "transformers.generation", "transformers.generation.utils", "transformers.generation.logits_process",
           "transformers.generation.configuration_utils")
# tokenizer classes are found by name through the auto mapping, which imports their module and
# registers its pre-v5 `_fast` alias in sys.modules: resolved here, once (BART's is RoBERTa's)
TOKENIZER_KEYS = tuple(key for record in FAMILIES.values() for key in record.tokenizer_keys)
OTHER_PACKAGES = ("sacremoses",)             # Marian's tokenizer imports it when built
SUBMODULE_PREFIXES = ("configuration_", "modeling_", "tokenization_")
OTHER_FRAMEWORKS = ("modeling_tf_", "modeling_flax_")

_LOCK = threading.Lock()
_RUNTIME: SimpleNamespace | None = None


def runtime() -> SimpleNamespace:
    """The transformers names the engine uses, all imported (the first call does it, under a lock)."""
    global _RUNTIME
    if _RUNTIME is None:
        with _LOCK:
            if _RUNTIME is None:
                _RUNTIME = _import_everything()
    return _RUNTIME


def _import_everything() -> SimpleNamespace:
    import transformers

    for name in HELPERS:
        importlib.import_module(name)
    for record in FAMILIES.values():
        for package in record.packages:
            _import_package(f"transformers.models.{package}")
    import huggingface_hub
    from huggingface_hub import constants as hub_constants
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.utils import filter_repo_objects
    from safetensors import safe_open
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES, tokenizer_class_from_name

    for key in TOKENIZER_KEYS:
        tokenizer_class_from_name(TOKENIZER_MAPPING_NAMES[key])
    for name in OTHER_PACKAGES:
        importlib.import_module(name)

    names = SimpleNamespace(
        transformers=transformers, AutoConfig=transformers.AutoConfig, AutoTokenizer=transformers.AutoTokenizer,
        AutoModelForSeq2SeqLM=transformers.AutoModelForSeq2SeqLM, CONFIG_MAPPING=CONFIG_MAPPING,
        hub=huggingface_hub, hub_constants=hub_constants, RepositoryNotFoundError=RepositoryNotFoundError,
        RevisionNotFoundError=RevisionNotFoundError, filter_repo_objects=filter_repo_objects, safe_open=safe_open)
    for model_type in FAMILIES:
        CONFIG_MAPPING[model_type]          # the mapping resolves each config class lazily too
    return names


def _import_package(package_name: str) -> None:
    """Import a family package's pytorch submodules and resolve every public name of the package
    (its lazy module otherwise imports them on first attribute access, from whichever thread)."""
    package = importlib.import_module(package_name)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith(SUBMODULE_PREFIXES) and not info.name.startswith(OTHER_FRAMEWORKS):
            importlib.import_module(f"{package_name}.{info.name}")
    for name in getattr(package, "__all__", None) or dir(package):
        if not name.startswith("_"):
            getattr(package, name)
