"""Hugging Face encoder-decoders (Marian, M2M100/NLLB, mBART-50, BART, T5) as an engine for `Translator`.

`transformers` is imported only when such a model is opened (or the app starts: runtime.py), so
`import transformer` stays light. engine.py is the engine; arch.py what differs by family;
generation.py decoding as generate() does it; hooks.py capture and gates; load.py safe loading.
"""
from .arch import SUPPORTED, HFModelConfig
from ..sources import is_hf_source

__all__ = ["SUPPORTED", "HFModelConfig", "HFEngine", "is_hf_source"]


def __getattr__(name):
    if name == "HFEngine":
        from .runtime import runtime
        runtime()                              # transformers, imported once under a lock, first
        from .engine import HFEngine
        return HFEngine
    raise AttributeError(name)
