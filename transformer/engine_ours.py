"""Our model as an engine (engine.py): `Transformer` + sentencepiece `Tokenizer` + decoding.py.

Attention and the residual stream reach the recorder, and a call's hooks and head gates reach the
model (interventions.py), through the HookPoints model.py installs at build time.
"""
from __future__ import annotations

import numpy as np
import torch

from .checkpoint import load_model_dir
from .decoding import beam_search, greedy_decode
from .engine import Engine, Plan, default_device, shared_sources
from .model import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Transformer
from .tokenizer import Tokenizer
from .view import Attention, FeedForward, ModelView


WORD_START = "\u2581"                      # sentencepiece's ▁: a piece that begins a word


class OursEngine(Engine):
    family = "ours"
    positional_kind = "sinusoidal"            # one table, added on both sides
    special_ids = frozenset({PAD_ID, UNK_ID, BOS_ID, EOS_ID})
    pad_id, unk_id, start_id = PAD_ID, UNK_ID, BOS_ID
    batch_size = 64

    def __init__(self, model: Transformer, tokenizer: Tokenizer, card: dict | None = None, device=None):
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.config = model.config
        self.card = card or {}
        self.source_lang, self.target_lang = self.config.source_lang, self.config.target_lang
        if len(tokenizer) != self.config.vocab_size:
            raise ValueError(f"tokenizer has {len(tokenizer)} pieces, config vocab_size={self.config.vocab_size}")

    # ---- ids -------------------------------------------------------------------------------
    def source_ids(self, text: str) -> tuple[list[int], bool]:
        ids = self.tokenizer.encode_ids(text)
        if not ids:
            return [], False
        limit = self.config.max_source_len - 1
        return ids[:limit] + [EOS_ID], len(ids) > limit

    def target_text_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode_ids(text)[: self.config.max_target_len - 1] + [EOS_ID]

    def prefix_text_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode_ids(text)

    # ---- decoding ----------------------------------------------------------------------------
    def plan(self, source, mask, beam_size: int, max_len: int | None, length_penalty: float | None,
             prompt: int = 1) -> Plan:
        """max_len None: each sentence gets min(max_target_len, 2 * its source length + 16), so a
        batch gives every sentence what a call of its own would."""
        if max_len is None:
            lengths = mask.sum(1).tolist() if mask is not None else [source.shape[1]] * source.shape[0]
            limits = [min(self.config.max_target_len, 2 * int(n) + 16) for n in lengths]
        else:
            limits = [int(max_len)] * source.shape[0]
        return Plan(BOS_ID, frozenset({EOS_ID}), limits, int(beam_size),
                    1.0 if length_penalty is None else float(length_penalty))

    def greedy(self, source, mask, plan: Plan, prefix=None, encoder_layer=None):
        return greedy_decode(self.model, source, mask, max(plan.limits), prefix, encoder_layer)

    def beam(self, source, mask, plan: Plan, record: bool = False, prefix=None, encoder_layer=None) -> list:
        return beam_search(self.model, source, mask, plan.beam_size, plan.limits, plan.length_penalty,
                           record=record, prefix=prefix, encoder_layer=encoder_layer)

    def teacher_forced(self, source, mask, fed, encoder_layer=None) -> torch.Tensor:
        shared = shared_sources(source)
        if shared is None:
            return self.model(source, mask, fed, encoder_layer=encoder_layer)                # (B, T, V)
        first, inverse = shared
        memory = self.model.encode(source[first], None if mask is None else mask[first],
                                   encoder_layer)[inverse]                                   # (B, S, D)
        return self.model.decode(fed, memory, mask, None)

    def read_out(self, hidden) -> torch.Tensor:
        return self.model.read_out(hidden)                                                   # (..., V)

    # ---- facts -----------------------------------------------------------------------------------
    def positional_table(self, side: str, n: int) -> np.ndarray:
        return self.model.positional_encoding[:n].float().cpu().numpy()                      # (n, D)

    @torch.no_grad()
    def source_embeddings(self, source) -> np.ndarray:
        return self.model.scaled_embedding(source, self.model.source_embedding)[0].float().cpu().numpy()

    # ---- the family's answers (engine.py) ------------------------------------------------------
    def model_view(self) -> ModelView:
        return our_view(self.model)

    def source_embedding_weight(self) -> torch.Tensor:
        return self.model.source_embedding.weight                                           # (V, D)

    def source_vocabulary(self, rows: int) -> tuple[list[str], set]:
        size = min(rows, len(self.tokenizer))
        return self.tokenizer.pieces(range(size)), self.source_special(range(size))

    def source_special(self, ids, pieces=None) -> set:
        sp = self.tokenizer.sp                                    # one joint sentencepiece vocabulary
        return {int(i) for i in ids
                if i in self.special_ids or sp.is_control(int(i)) or sp.is_unknown(int(i)) or sp.is_unused(int(i))}

    def source_piece_ids(self, pieces) -> list[int]:
        return self.tokenizer.piece_ids(pieces)

    def source_id_rows(self, texts) -> list[list[int]]:
        return self.tokenizer.encode_batch(list(texts))

    def join_pieces(self, pieces) -> str:
        return "".join(pieces).replace(WORD_START, " ").strip()


def our_view(model) -> ModelView:
    H, pe = model.config.n_heads, model.positional_encoding

    def att(a, norm) -> Attention:
        return Attention(a.kind, a.hook.layer, a.q_proj, a.k_proj, a.v_proj, a.out_proj, H, a.d_head ** -0.5, norm)

    encoder = [[att(l.self_attention, l.attention_block.norm),
                FeedForward(l.feed_forward, l.feed_forward_block.norm)] for l in model.encoder_layers]
    decoder = [[att(l.self_attention, l.self_attention_block.norm),
                att(l.cross_attention, l.cross_attention_block.norm),
                FeedForward(l.feed_forward, l.feed_forward_block.norm)] for l in model.decoder_layers]
    return ModelView(
        "ours", model.config.norm_first, encoder, decoder,
        source_embedding=lambda ids: model.scaled_embedding(ids, model.source_embedding),
        target_embedding=lambda ids: model.scaled_embedding(ids, model.target_embedding),
        encoder_input=lambda e: e + pe[: e.shape[1]],
        decoder_input=lambda e: e + pe[: e.shape[1]],
        encoder_final=model.encoder_norm,
        logits=lambda x: model.output_projection(model.decoder_norm(x)))


def open_ours(path, device=None, source_lang: str | None = None, target_lang: str | None = None) -> OursEngine:
    """A model directory of ours; languages, when given, must be the ones it translates."""
    config, model, tokenizer, card = load_model_dir(path)
    for asked, own in ((source_lang, config.source_lang), (target_lang, config.target_lang)):
        if asked is not None and asked != own:
            raise ValueError(f"{path}: translates {config.source_lang}->{config.target_lang}, "
                             f"not {source_lang}->{target_lang}")
    return OursEngine(model, tokenizer, card, device)
