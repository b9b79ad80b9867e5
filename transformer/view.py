"""One description of a model's layers, whatever built the model: what explain/ decomposes.

`alti.forward` re-runs a translation from the weights, block by block, so it can split each
block's output into per-token vectors. It needs, per layer, the attention modules (q/k/v/out
projections), the norms and where they sit (pre-LN or post-LN), and the feed-forward function;
per side, how scaled token embeddings become the first layer's input. Each engine builds its own
(`Engine.model_view()`: engine_ours.py for our `Transformer`, hf/view.py for the Hugging Face
families), so the decompositions never ask which family they read. T5 differs only where the
description has room for it: RMSNorm (pre-LN, so it sits before attention and needs no
linearising), no biases (None), a relative position bias added to the scores (it changes α only,
which the decomposition takes as computed), no 1/sqrt(d) on the scores (scale 1), a token-wise
(gated or not) feed-forward, and decoder outputs scaled by d_model^-0.5 before a tied lm_head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn


@dataclass(frozen=True)
class Attention:
    kind: str                    # "encoder_self" | "decoder_self" | "cross"
    layer: int
    q: nn.Linear
    k: nn.Linear
    v: nn.Linear
    out: nn.Linear               # its input is head-major: head h owns columns h*dh:(h+1)*dh
    n_heads: int
    scale: float                 # multiplies q·k
    norm: nn.Module              # the block's norm (LayerNorm or T5's RMSNorm): before (pre-LN) or after
    position_bias: Callable | None = None   # (Tq, Tk, device) -> (H, Tq, Tk) added to the scores (T5)


@dataclass(frozen=True)
class FeedForward:
    fn: Callable                 # (..., D) -> (..., D), token-wise
    norm: nn.Module


@dataclass
class ModelView:
    family: str
    norm_first: bool
    encoder: list                # per layer: [Attention, FeedForward]
    decoder: list                # per layer: [Attention (self), Attention (cross), FeedForward]
    source_embedding: Callable   # ids (B, S) -> scaled token embeddings (B, S, D), before positions
    target_embedding: Callable
    encoder_input: Callable      # (B, S, D) scaled embeddings -> first layer's input
    decoder_input: Callable
    encoder_final: Callable      # the encoder stack's final token-wise map (norm or identity)
    logits: Callable             # decoder's last hidden state (B, T, D) -> logits (B, T, V)
