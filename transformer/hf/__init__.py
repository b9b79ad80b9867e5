"""Hugging Face encoder-decoders (Marian, M2M100/NLLB, mBART-50, BART, T5) behind the Translator API.

`transformers` is imported only when such a model is opened (or the app starts: runtime.py), so
`import transformer` stays light.
"""
from .arch import SUPPORTED, HFModelConfig
from .load import is_hf_source, load_hf

__all__ = ["SUPPORTED", "HFModelConfig", "HFTranslator", "HFTranslation", "is_hf_source", "load_hf"]


def __getattr__(name):
    if name in ("HFTranslator", "HFTranslation"):
        from .runtime import runtime
        runtime()                              # transformers, imported once under a lock, first
        from . import adapter
        return getattr(adapter, name)
    raise AttributeError(name)
