"""A Hugging Face encoder-decoder as an engine (transformer/engine.py), for `Translator`.

Family facts come from arch.py, decoding from generation.py (generate()'s own settings and
processors), capture and interventions (head gates among them) from hooks.py (installed once at load; per-call state in
ContextVars). The one shared mutable thing, the tokenizer (Marian and M2M100 switch modes for
targets), is used under `lock`. Import this module only after runtime() (translator.open_engine does).
"""
from __future__ import annotations

import threading
from functools import cached_property

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

from ..engine import Engine, Plan, default_device, shared_sources
from ..view import ModelView
from . import arch, load, view
from .families import FAMILIES
from .generation import beam_search, greedy, make_plan
from .hooks import install_module_hooks


class HFPieces:
    """The piece methods Translator calls (pieces, id_to_piece, piece_ids, decode, source_pieces)
    over a Hugging Face tokenizer. `hf` is the tokenizer itself, `lock` guards it."""

    def __init__(self, tokenizer, lock: threading.Lock):
        self.hf, self.lock = tokenizer, lock
        # Marian with separate vocabularies names ids by the target vocabulary; sources need their own
        separate = getattr(tokenizer, "separate_vocabs", False)
        self.source_vocab: dict | None = {i: p for p, i in tokenizer.encoder.items()} if separate else None

    def source_pieces(self, ids) -> list[str]:
        if self.source_vocab is None:
            return self.pieces(ids)
        return [self.source_vocab.get(int(i), self.hf.unk_token) for i in ids]

    def __len__(self) -> int:
        return len(self.hf.get_vocab())

    def id_to_piece(self, idx: int) -> str:
        piece = self.hf.convert_ids_to_tokens(int(idx))
        return piece if piece is not None else f"<id {int(idx)}>"

    def pieces(self, ids) -> list[str]:
        return [self.id_to_piece(i) for i in ids]

    def piece_ids(self, pieces) -> list[int]:
        """Pieces to ids exactly; a piece the vocabulary lacks is a ValueError."""
        ids = self.hf.convert_tokens_to_ids([str(p) for p in pieces])
        for piece, idx in zip(pieces, ids):
            if idx is None or (idx == self.hf.unk_token_id and str(piece) != self.hf.unk_token):
                raise ValueError(f"{piece!r} is not a piece of this vocabulary")
        return [int(i) for i in ids]

    def decode(self, ids) -> str:
        with self.lock:
            return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)


class HFEngine(Engine):
    """Beam hypotheses score as generate() does: sum log p / len ** length_penalty, with log p after
    the model's logits processors; `finished` also marks hypotheses stopped by max_len. Step
    probabilities (Translator) are the softmax of the raw logits, before the processors."""
    batch_size = 32

    def __init__(self, model, tokenizer, card: dict, device=None, source_lang: str | None = None,
                 target_lang: str | None = None):
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.family = model.config.model_type
        self.lock = threading.Lock()
        self.tokenizer = HFPieces(tokenizer, self.lock)
        self.langs = arch.languages(self.family, model.config, tokenizer, source_lang, target_lang,
                                    card.get("path", self.family))
        self.source_lang, self.target_lang = self.langs.source, self.langs.target
        self.config = arch.hf_config(model.config, getattr(tokenizer, "model_max_length", None))
        self.config.source_lang, self.config.target_lang = self.source_lang, self.target_lang
        self.positional_kind = self.config.positional_kind
        self.card = dict(card, source_lang=self.source_lang, target_lang=self.target_lang,
                         positional_kind=self.positional_kind)
        self.explainable = FAMILIES[self.family].layout in view.LAYOUTS
        self.special_ids = frozenset(tokenizer.all_special_ids)
        self.unk_id = int(tokenizer.unk_token_id)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.sites = arch.attention_sites(self.model)
        self.residual = arch.residual_sites(self.model)
        install_module_hooks(self.model, self.sites, self.residual)   # once; per-call state comes through ContextVars

    # ---- ids -------------------------------------------------------------------------------
    def source_ids(self, text: str) -> tuple[list[int], bool]:
        """The encoder's input ids, with the model's specials and language codes; cut to max_source_len."""
        hf, limit = self.tokenizer.hf, self.config.max_source_len
        with self.lock:
            content = [i for i in hf(text, add_special_tokens=False).input_ids if i not in hf.all_special_ids]
            if not content:
                return [], False
            ids = hf(self.langs.prefix + text).input_ids
            truncated = len(ids) > limit
            if truncated:
                ids = hf(self.langs.prefix + text, truncation=True, max_length=limit).input_ids
        return ids, truncated

    def target_text_ids(self, text: str) -> list[int]:
        """Tokenized as a target: language code, pieces, </s>."""
        with self.lock:
            ids = self.tokenizer.hf(text_target=text).input_ids
        return ids[: self.config.max_target_len]

    def prefix_text_ids(self, text: str) -> list[int]:
        """Tokenized as a target (language code, pieces), without the final </s>."""
        with self.lock:
            ids = self.tokenizer.hf(text_target=text).input_ids
        eos = self.tokenizer.hf.eos_token_id
        return ids[:-1] if ids and ids[-1] == eos else ids

    # ---- decoding ----------------------------------------------------------------------------
    @staticmethod
    def _mask(source, mask) -> torch.Tensor:
        return torch.ones_like(source) if mask is None else mask.long()                       # (B, S)

    def plan(self, source, mask, beam_size: int, max_len: int | None, length_penalty: float | None,
             prompt: int = 1) -> Plan:
        """max_len None: the model's generation config decides, as generate() would. A prefix counts
        within the budget (generate(decoder_input_ids=[start] + prefix) with the same max_length)."""
        native = make_plan(self.model, source, self._mask(source, mask), int(beam_size), max_len, length_penalty,
                           self.langs.overrides, prompt)
        ends = frozenset(native.eos.tolist()) if native.eos is not None else frozenset()
        return Plan(native.start, ends, [native.max_length - 1] * source.shape[0], native.num_beams,
                    native.length_penalty, native)

    def encode(self, source, mask, layer: int | None = None) -> BaseModelOutput:
        """The encoder's output (B, S, D), as generate() hands it to the decoder. layer (DecoderLens):
        that layer's output through the encoder's final norm instead (every layer still runs)."""
        encoder = self.model.get_encoder()
        last = layer is None or layer == self.config.n_encoder_layers - 1
        out = encoder(input_ids=source, attention_mask=mask, return_dict=True, output_hidden_states=not last)
        if last:
            return BaseModelOutput(last_hidden_state=out.last_hidden_state)
        return BaseModelOutput(last_hidden_state=arch.normed(encoder, out.hidden_states[layer + 1]))

    def greedy(self, source, mask, plan: Plan, prefix=None, encoder_layer=None):
        mask = self._mask(source, mask)
        return greedy(self.model, self.encode(source, mask, encoder_layer), mask, plan.native, prefix)

    def beam(self, source, mask, plan: Plan, record: bool = False, prefix=None, encoder_layer=None) -> list:
        mask = self._mask(source, mask)
        return beam_search(self.model, self.encode(source, mask, encoder_layer), mask, plan.native,
                           record=record, prefix=prefix)

    def teacher_forced(self, source, mask, fed, encoder_layer=None) -> torch.Tensor:
        mask = self._mask(source, mask)
        shared = shared_sources(source)
        if shared is not None:
            first, inverse = shared
            memory = self.encode(source[first], mask[first], encoder_layer)
            memory = BaseModelOutput(last_hidden_state=memory.last_hidden_state[inverse])       # (B, S, D)
        else:
            memory = None if encoder_layer is None else self.encode(source, mask, encoder_layer)
        out = self.model(input_ids=source, attention_mask=mask, decoder_input_ids=fed, encoder_outputs=memory,
                         use_cache=False, return_dict=True)
        return out.logits                                                                     # (B, T, V)

    def read_out(self, hidden) -> torch.Tensor:
        return arch.read_out(self.model, hidden)                                              # (..., V)

    # ---- facts -----------------------------------------------------------------------------------
    @cached_property
    def start_id(self) -> int:
        """The decoder's start piece, resolved as generate() resolves it (= every plan's start)."""
        one = torch.tensor([[self.tokenizer.hf.eos_token_id or 0]], device=self.device)
        return self.plan(one, None, 1, None, None).start

    def _stack(self, side: str):
        return self.model.get_encoder() if side == "encoder" else self.model.get_decoder()

    @torch.no_grad()                      # learned tables (BART, mBART) are parameters
    def positional_table(self, side: str, n: int) -> np.ndarray:
        """Zeros for T5: its positions live in the relative bias."""
        return arch.position_table(self._stack(side), self.family, n, self.config.d_model).float().cpu().numpy()

    @torch.no_grad()
    def position_bias(self, side: str, n: int) -> np.ndarray | None:
        if self.family != "t5":
            return None
        return arch.relative_bias(self._stack(side), n).float().cpu().numpy()                # (H, n, n)

    @torch.no_grad()
    def source_embeddings(self, source) -> np.ndarray:
        return arch.token_embeddings(self.model.get_encoder(), source)[0].float().cpu().numpy()  # (S, D)

    # ---- the family's answers (engine.py) ------------------------------------------------------
    def model_view(self) -> ModelView:
        return view.model_view(self.model)

    def source_embedding_weight(self) -> torch.Tensor:
        return self.model.get_encoder().embed_tokens.weight                                 # (V, D)

    def _source_pieces(self, ids) -> list[str]:
        """Source pieces of `ids` ("" for an id without one)."""
        source = self.tokenizer.source_vocab                  # Marian with separate vocabularies
        if source is not None:
            return [source.get(int(i), "") for i in ids]
        pieces = self.tokenizer.hf.convert_ids_to_tokens([int(i) for i in ids])
        return [str(p) if p is not None else "" for p in pieces]

    def source_vocabulary(self, rows: int) -> tuple[list[str], set]:
        source = self.tokenizer.source_vocab
        size = min(rows, max(source) + 1 if source is not None else len(self.tokenizer))
        pieces = self._source_pieces(range(size))
        return pieces, self.source_special(range(size), pieces)

    def source_special(self, ids, pieces=None) -> set:
        hf, ids = self.tokenizer.hf, [int(i) for i in ids]
        special = {int(i) for i in hf.all_special_ids if i is not None}
        special |= {int(i) for i in getattr(hf, "lang_code_to_id", {}).values()}
        pieces = self._source_pieces(ids) if pieces is None else pieces
        return {i for i, piece in zip(ids, pieces) if i in special or not piece}

    def source_piece_ids(self, pieces) -> list[int]:
        source = self.tokenizer.source_vocab
        if source is None:
            return self.tokenizer.piece_ids(pieces)
        by_piece = {piece: i for i, piece in source.items()}
        missing = [p for p in pieces if p not in by_piece]
        if missing:
            raise ValueError(f"{missing[0]!r} is not a piece of this source vocabulary")
        return [by_piece[p] for p in pieces]

    def source_id_rows(self, texts) -> list[list[int]]:
        with self.lock:
            return [list(ids) for ids in self.tokenizer.hf(list(texts), add_special_tokens=False).input_ids]

    def join_pieces(self, pieces) -> str:
        with self.lock:
            return self.tokenizer.hf.convert_tokens_to_string([str(p) for p in pieces]).strip()


def open_hf(source, device=None, source_lang: str | None = None, target_lang: str | None = None) -> HFEngine:
    """A save_pretrained directory or a hub id (load.py checks every file and never runs remote code)."""
    with load.FROM_PRETRAINED_LOCK:
        model, tokenizer, card = load.load_parts(source)
        return HFEngine(model, tokenizer, card, device, source_lang, target_lang)
