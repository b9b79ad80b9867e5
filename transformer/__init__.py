"""Attention Atlas model package: a from-scratch encoder-decoder Transformer with capture."""
from .capture import AttentionTrace, Masks, capture
from .config import ModelConfig
from .explain.contrastive import contrastive_saliency
from .explain.explanation import Explanation
from .language import LanguageCheck
from .model import Transformer
from .analysis.neighbours import Neighbour, nearest_pieces
from .translator import Step, Translation, Translator

__all__ = ["Translator", "Translation", "Step", "AttentionTrace", "Masks", "ModelConfig", "Transformer",
           "capture", "contrastive_saliency", "Explanation", "LanguageCheck", "Neighbour", "nearest_pieces"]
