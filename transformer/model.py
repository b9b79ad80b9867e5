"""Encoder-decoder Transformer from "Attention Is All You Need", with hook points.

Attention is written out by hand (no nn.MultiheadAttention) so its weights can be seen:
the fused `F.scaled_dot_product_attention` runs by default, and an explicit softmax path,
which feeds the HookPoints, runs while a capture is active (and in training on a CPU, where
it is faster). The residual stream passes
identity HookPoints named as capture.py's docstring says, and each attention module's heads pass
a "z" HookPoint before the output projection (interventions.py); a named HookPoint is called only
while this call records it or has hooks, so the fused path stays as it was.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .capture import FINAL_NORM, HookPoint, install_hook_points, is_capturing, observe, residual_name
from .config import ModelConfig
from .interventions import z_name

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model): sin on even dims, cos on odd dims, wavelengths 10000^(2i/d)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]                 # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                         * (-math.log(10000.0) / d_model))                         # (d/2,)
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float, kind: str, layer: int):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.kind = kind
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.hook = HookPoint(kind, layer)      # sees the post-softmax weights (B, H, Tq, Tk)
        self.hook_z = HookPoint(name=z_name(kind, layer))   # heads' outputs (B, Tq, H, dh); head_mask writes here

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)   # (B, H, T, dh)

    def forward(self, query, key_value, mask=None, cache=None):
        """query (B, Tq, D); key_value (B, Tk, D); mask bool broadcastable to (B, H, Tq, Tk).

        cache: dict for incremental decoding. Self-attention appends this step's keys and
        values; cross-attention computes them once from the encoder output and reuses them.
        """
        q = self._split(self.q_proj(query))                                 # (B, H, Tq, dh)
        if cache is not None and self.kind == "cross" and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k = self._split(self.k_proj(key_value))                         # (B, H, Tk, dh)
            v = self._split(self.v_proj(key_value))
            if cache is not None:
                if self.kind != "cross" and "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        dropout_p = self.dropout if self.training else 0.0
        capturing = is_capturing()
        # Training on a CPU takes the explicit path too: its matmuls forward and backward beat the
        # fused CPU kernel's (benchmarks/bench_core.py, training row); a GPU keeps the fused kernel.
        if capturing or (self.training and q.device.type == "cpu"):
            scores = (q * self.d_head ** -0.5) @ k.transpose(-2, -1)         # (B, H, Tq, Tk)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if capturing:
                weights = self.hook(weights)
            if dropout_p:
                weights = F.dropout(weights, dropout_p)
            context = weights @ v                                           # (B, H, Tq, dh)
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        B, _, Tq, _ = context.shape
        # head ablation (head_mask) and every other write reach z here, as hooks (interventions.py)
        z = observe(self.hook_z, context.transpose(1, 2))                  # (B, Tq, H, dh)
        return self.out_proj(z.reshape(B, Tq, -1))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class Sublayer(nn.Module):
    """Residual + LayerNorm around one sublayer: pre-LN x + f(LN(x)), or post-LN LN(x + f(x)).
    name: the residual capture point of its output (None: not observed)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool, name: str | None = None):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first
        self.hook = HookPoint(name=name) if name else None

    def forward(self, x, fn):
        if self.norm_first:
            return observe(self.hook, x + self.dropout(fn(self.norm(x))))
        return observe(self.hook, self.norm(x + self.dropout(fn(x))))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.self_attention = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, "encoder_self", layer)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        point = lambda p: residual_name("encoder", layer, p)                       # noqa: E731
        self.hook_resid_pre = HookPoint(name=point("resid_pre"))
        self.attention_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first, point("resid_mid_self"))
        self.feed_forward_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first, point("resid_post"))

    def forward(self, x, source_mask):
        x = observe(self.hook_resid_pre, x)
        x = self.attention_block(x, lambda h: self.self_attention(h, h, source_mask))
        return self.feed_forward_block(x, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.self_attention = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, "decoder_self", layer)
        self.cross_attention = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, "cross", layer)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        point = lambda p: residual_name("decoder", layer, p)                       # noqa: E731
        self.hook_resid_pre = HookPoint(name=point("resid_pre"))
        self.self_attention_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first, point("resid_mid_self"))
        self.cross_attention_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first, point("resid_mid_cross"))
        self.feed_forward_block = Sublayer(cfg.d_model, cfg.dropout, cfg.norm_first, point("resid_post"))

    def forward(self, x, memory, target_mask, memory_mask, cache=None):
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        x = observe(self.hook_resid_pre, x)
        x = self.self_attention_block(
            x, lambda h: self.self_attention(h, h, target_mask, self_cache))
        x = self.cross_attention_block(
            x, lambda h: self.cross_attention(h, memory, memory_mask, cross_cache))
        return self.feed_forward_block(x, self.feed_forward)


def _key_mask(keep):
    """bool (B, 1, 1, S) over keys, or None when no key is padding (one sentence): both
    attention paths then skip masking work."""
    return None if keep is None else keep[:, None, None, :]


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.source_embedding = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.target_embedding = (self.source_embedding if cfg.tie_embeddings
                                 else nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID))
        # +1: the decoder is fed max_target_len pieces at most, but keep one spare position.
        self.register_buffer("positional_encoding",
                             sinusoidal_table(max(cfg.max_source_len, cfg.max_target_len) + 1, cfg.d_model),
                             persistent=False)
        self.embedding_dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_decoder_layers))
        # Pre-LN leaves the residual stream unnormalised, so it needs a final norm.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.hook_encoder_final = HookPoint(name=f"encoder.{FINAL_NORM}")         # after the norm (or Identity)
        self.hook_decoder_final = HookPoint(name=f"decoder.{FINAL_NORM}")
        self.output_projection = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            self.output_projection.weight = self.source_embedding.weight
        install_hook_points(self)

    def _init_weights(self):
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embedding" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        for emb in {self.source_embedding, self.target_embedding}:
            # N(0, d^-1/2) then scaled by sqrt(d): unit-variance inputs, well-scaled tied logits.
            nn.init.normal_(emb.weight, std=self.config.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[PAD_ID].zero_()

    # ---- pieces the app also shows -------------------------------------------------
    def scaled_embedding(self, tokens, embedding):
        return embedding(tokens) * math.sqrt(self.config.d_model)           # (B, T, D)

    def _embed(self, tokens, embedding, offset: int = 0):
        T = tokens.shape[1]
        x = self.scaled_embedding(tokens, embedding) + self.positional_encoding[offset:offset + T]
        return self.embedding_dropout(x)

    # ---- forward passes -----------------------------------------------------------
    def encode(self, source, source_keep, layer: int | None = None):
        """source (B, S) ids; source_keep bool (B, S), or None when nothing is padding.

        Returns memory (B, S, D). layer (DecoderLens): encoder layer `layer`'s output through the
        final encoder norm instead; every layer still runs, so a capture sees the whole encoder."""
        mask = _key_mask(source_keep)                                       # (B, 1, 1, S)
        x = self._embed(source, self.source_embedding)
        kept = None
        for i, encoder_layer in enumerate(self.encoder_layers):
            x = encoder_layer(x, mask)
            if i == layer:
                kept = x
        memory = observe(self.hook_encoder_final, self.encoder_norm(x))
        return memory if kept is None or layer == len(self.encoder_layers) - 1 else self.encoder_norm(kept)

    def read_out(self, hidden):
        """(..., D) decoder residual stream -> (..., V) logits: the final norm and output projection."""
        return self.output_projection(self.decoder_norm(hidden))

    def decode(self, target, memory, source_keep, target_keep=None):
        """Teacher-forced: target (B, T) fed ids. Returns logits (B, T, V)."""
        T = target.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=target.device).tril()
        target_mask = causal[None, None]                                    # (1, 1, T, T)
        if target_keep is not None:
            target_mask = target_mask & target_keep[:, None, None, :]       # (B, 1, T, T)
        memory_mask = _key_mask(source_keep)
        x = self._embed(target, self.target_embedding)
        for i, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, target_mask, memory_mask)
        return self.output_projection(observe(self.hook_decoder_final, self.decoder_norm(x)))

    def new_cache(self):
        return [{"self": {}, "cross": {}} for _ in self.decoder_layers]

    def decode_step(self, last_token, position: int, memory, source_keep, cache):
        """One incremental step: last_token (B,) fed at `position`. Returns logits (B, V)."""
        memory_mask = _key_mask(source_keep)
        x = self._embed(last_token[:, None], self.target_embedding, offset=position)   # (B, 1, D)
        for i, layer in enumerate(self.decoder_layers):
            # The newest query may see every cached key, so no self-attention mask is needed.
            x = layer(x, memory, None, memory_mask, cache[i])
        return self.output_projection(observe(self.hook_decoder_final, self.decoder_norm(x)))[:, 0]

    def forward(self, source, source_keep, target, target_keep=None, encoder_layer: int | None = None):
        memory = self.encode(source, source_keep, encoder_layer)
        return self.decode(target, memory, source_keep, target_keep)

    @staticmethod
    def reorder_cache(cache, index):
        for layer_cache in cache:
            for part in layer_cache.values():
                for key in list(part):
                    part[key] = part[key].index_select(0, index)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
