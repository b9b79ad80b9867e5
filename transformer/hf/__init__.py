"""Hugging Face encoder-decoders (Marian, M2M100/NLLB, mBART-50, BART, T5) as an engine for `Translator`.

`transformers` is imported only when such a model is opened (or the app starts: runtime.py), so
`import transformer` stays light. engine.py is the engine; arch.py what differs by family;
generation.py decoding as generate() does it; hooks.py capture and gates; load.py safe loading.
"""
from .arch import SUPPORTED, HFModelConfig
from ..engine import is_hf_source

__all__ = ["SUPPORTED", "HFModelConfig", "HFEngine", "HFTranslator", "HFTranslation", "is_hf_source"]


def __getattr__(name):
    # One Translator and one Translation serve every family; the old names stay as aliases.
    if name in ("HFTranslator", "HFTranslation"):
        from .. import translator
        return translator.Translator if name == "HFTranslator" else translator.Translation
    if name == "HFEngine":
        from .runtime import runtime
        runtime()                              # transformers, imported once under a lock, first
        from .engine import HFEngine
        return HFEngine
    raise AttributeError(name)
