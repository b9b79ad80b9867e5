"""The result types of a translation: `Translation` (one run, whatever the family) and its `Step`s.
Analyses computed over a translation (analyses.py) live in its `analyses` dict, under their names."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .capture import AttentionTrace, Masks


@dataclass
class Step:
    token: str                       # the piece produced at this step
    prob: float                      # p(token | prefix), plain softmax of the logits
    top_k: list                      # [(piece, prob)], best first
    token_id: int = -1
    cross_attention: np.ndarray | None = None          # (n_decoder_layers, n_heads, S)
    decoder_self_attention: np.ndarray | None = None   # (n_decoder_layers, n_heads, t + 1)


@dataclass
class Translation:
    """One run, whatever the family. `positional_encoding` is what the encoder added (zeros for T5,
    whose positions live in `position_bias`). Beam scores follow the engine: ours
    sum log p / ((5 + len) / 6) ** length_penalty; Hugging Face generate()'s sum log p / len ** lp."""
    text: str
    source_tokens: list
    target_tokens: list
    output_tokens: list
    truncated: bool
    attention: AttentionTrace | None
    masks: Masks
    positional_encoding: np.ndarray
    source_embeddings: np.ndarray
    steps: list
    beam: list | None = None
    beam_final: tuple | None = None      # (step, index) of the returned hypothesis in `beam`
    source_ids: list = field(default_factory=list)
    output_ids: list = field(default_factory=list)
    forced: bool = False
    prefix_length: int = 0               # output pieces forced by prefix= (0 without a prefix)
    seconds: float = 0.0
    positional_kind: str = "sinusoidal"        # "sinusoidal" | "learned" | "relative_bias" (T5)
    decoder_positional_encoding: np.ndarray | None = None   # (T, d_model) what the decoder added
    position_bias: np.ndarray | None = None          # T5: (H, S, S) relative bias added to encoder scores
    decoder_position_bias: np.ndarray | None = None  # T5: (H, T, T) relative bias of decoder self-attention
    encoder_layer: int | None = None     # DecoderLens: the encoder layer the decoder read (None: plain)
    source_text: str = ""                # the text translated
    head_mask: frozenset | None = None   # {(kind, layer, head)} switched off for this run, None: all on
    hooks: tuple = ()                    # the points hooks= hooked in this run (their names)
    analyses: dict = field(default_factory=dict)   # analysis name -> result (analyses.py)

    # The analyses api.md names, under their own names (None unless asked for)
    explanation = property(lambda self: self.analyses.get("explain"),               # explain/explanation.py
                           lambda self, value: self.analyses.__setitem__("explain", value))
    diagnosis = property(lambda self: self.analyses.get("diagnose"),                # diagnosis/scores.py
                         lambda self, value: self.analyses.__setitem__("diagnose", value))
    lens = property(lambda self: self.analyses.get("lens"),                         # lens.py
                    lambda self, value: self.analyses.__setitem__("lens", value))
    alignment = property(lambda self: self.analyses.get("align"),                   # analysis/aligner.py
                         lambda self, value: self.analyses.__setitem__("align", value))
