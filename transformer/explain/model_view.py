"""The layer description explain/ decomposes (transformer/view.py), as the translator's engine builds
it: `Engine.model_view()` (ours in engine_ours.py, Hugging Face families in hf/view.py)."""
from __future__ import annotations

from ..view import Attention, FeedForward, ModelView

__all__ = ["Attention", "FeedForward", "ModelView", "model_view"]


def model_view(translator) -> ModelView:
    """ValueError, from the engine, for a model whose layers it cannot describe."""
    return translator.engine.model_view()
