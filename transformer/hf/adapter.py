"""`HFTranslator`: a Hugging Face encoder-decoder behind the same API as our `Translator`.

Same `Translation` fields, shapes and meanings (api.md). Per-call state lives in
ContextVars (capture recorder, head gates) and locals; the only shared mutable thing, the
tokenizer (Marian and M2M100 switch modes for targets), is used under a lock.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

from ..capture import Masks, no_capture
from ..decoding import Hypothesis
from ..masks import causal_mask
from ..translator import Translation, Translator, _capture_cm, _diagnosed, _explain, default_device
from . import arch
from .generation import beam_search, forced_logits, greedy, make_plan
from .hooks import gating, install_hooks


@dataclass
class HFTranslation(Translation):
    """Translation plus what differs by family. `positional_encoding` is what the encoder added.

    Beam hypotheses score as generate() does: sum log p / len ** length_penalty, with log p after
    the model's logits processors; `finished` also marks hypotheses stopped by max_len."""
    positional_kind: str = "sinusoidal"     # "sinusoidal" | "learned" | "relative_bias" (T5: PE is zeros)
    decoder_positional_encoding: np.ndarray | None = None   # (T, d_model) what the decoder added
    position_bias: np.ndarray | None = None          # T5: (H, S, S) relative bias added to encoder scores
    decoder_position_bias: np.ndarray | None = None  # T5: (H, T, T) relative bias of decoder self-attention


class HFPieces:
    """The piece methods Translator's helpers call (id_to_piece, pieces, ...), over a HF tokenizer."""

    def __init__(self, tokenizer, lock: threading.Lock):
        self.hf, self.lock = tokenizer, lock
        # Marian with separate vocabularies names ids by the target vocabulary; sources need their own
        separate = getattr(tokenizer, "separate_vocabs", False)
        self._source = {i: p for p, i in tokenizer.encoder.items()} if separate else None

    def source_pieces(self, ids) -> list[str]:
        if self._source is None:
            return self.pieces(ids)
        return [self._source.get(int(i), self.hf.unk_token) for i in ids]

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


class HFTranslator(Translator):
    def __init__(self, model, tokenizer, card: dict, device=None, source_lang: str | None = None,
                 target_lang: str | None = None):
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.family = model.config.model_type
        name = card.get("path", self.family)
        self._lock = threading.Lock()
        self.tokenizer = HFPieces(tokenizer, self._lock)
        self.langs = arch.languages(self.family, model.config, tokenizer, source_lang, target_lang, name)
        self.source_lang, self.target_lang = self.langs.source, self.langs.target
        self.config = arch.hf_config(model.config, getattr(tokenizer, "model_max_length", None))
        self.config.source_lang, self.config.target_lang = self.source_lang, self.target_lang
        self.card = dict(card, source_lang=self.source_lang, target_lang=self.target_lang,
                         positional_kind=self.config.positional_kind)
        self.sites = arch.attention_sites(self.model)
        install_hooks(self.model, self.sites)   # once; per-call state comes through ContextVars

    # ---- input handling --------------------------------------------------------------------
    def encode_source(self, text: str) -> tuple[list[int], bool]:
        """The encoder's input ids, with the model's specials and language codes; cut to max_source_len."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ValueError("text is empty: type a sentence to translate")
        hf, limit = self.tokenizer.hf, self.config.max_source_len
        with self._lock:
            content = [i for i in hf(text, add_special_tokens=False).input_ids if i not in hf.all_special_ids]
            ids = hf(self.langs.prefix + text).input_ids
            truncated = len(ids) > limit
            if truncated:
                ids = hf(self.langs.prefix + text, truncation=True, max_length=limit).input_ids
        if not content:
            raise ValueError("text yields no pieces after normalisation: type a sentence to translate")
        return ids, truncated

    def _target_ids(self, target) -> list[int]:
        """A reference text (tokenized as a target: language code, pieces, </s>), or pieces fed exactly."""
        if isinstance(target, str):
            if not target.strip():
                raise ValueError("target is empty: give a reference translation or leave it out")
            with self._lock:
                ids = self.tokenizer.hf(text_target=target).input_ids
            return ids[: self.config.max_target_len]
        if not isinstance(target, (list, tuple)) or not target:
            raise ValueError("target must be a reference text or a non-empty list of pieces")
        if len(target) > self.config.max_target_len:
            raise ValueError(f"target has {len(target)} pieces; the model takes at most "
                             f"{self.config.max_target_len}")
        return self.tokenizer.piece_ids(target)

    def _max_len(self, max_len) -> int | None:
        """None: the model's generation config decides (as generate() would)."""
        if max_len is None:
            return None
        if not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
        if max_len > self.config.max_target_len:
            raise ValueError(f"max_len={max_len} exceeds the model's max_target_len={self.config.max_target_len}")
        return int(max_len)

    def _plan(self, source, mask, beam_size, max_len, length_penalty, prompt: int = 1):
        return make_plan(self.model, source, mask, beam_size, max_len, length_penalty, self.langs.overrides,
                         prompt)

    def _prefix_text_ids(self, text: str) -> list[int]:
        """A text prefix tokenized as a target (language code, pieces), without the final </s>."""
        with self._lock:
            ids = self.tokenizer.hf(text_target=text).input_ids
        eos = self.tokenizer.hf.eos_token_id
        return ids[:-1] if ids and ids[-1] == eos else ids

    def _encode(self, source, mask) -> BaseModelOutput:
        out = self.model.get_encoder()(input_ids=source, attention_mask=mask, return_dict=True)
        return BaseModelOutput(last_hidden_state=out.last_hidden_state)

    # ---- one sentence, everything captured ----------------------------------------------------
    @torch.inference_mode()
    def translate(self, text: str, beam_size: int = 1, max_len: int | None = None, capture: bool = True,
                  top_k: int = 5, length_penalty: float | None = None, target: str | list[str] | None = None,
                  head_mask=None, explain: bool = False, diagnose: bool = False,
                  prefix: str | list[str] | None = None) -> HFTranslation:
        """As Translator.translate. length_penalty None: the model's generation config. Step
        probabilities are the softmax of the raw logits (before generate's logits processors:
        a forced language code may be improbable under the model itself). A prefix decodes as
        generate(decoder_input_ids=[start] + prefix ids) with the same length budget (the prefix
        counts within max_len or the generation config's max_length)."""
        started = time.perf_counter()
        if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
        source_ids, truncated = self.encode_source(text)
        max_len = self._max_len(max_len)
        gates = self._gates(head_mask)
        source = torch.tensor([source_ids], dtype=torch.long, device=self.device)           # (1, S)
        mask = torch.ones_like(source)
        beam_history, beam_final = None, None
        prefix_ids = self._prefix_ids(prefix, target)
        with gating(gates), _capture_cm(capture) as recorder:
            memory = self._encode(source, mask)
            plan = self._plan(source, mask, int(beam_size), max_len, length_penalty, 1 + len(prefix_ids))
            ends = set(plan.eos.tolist()) if plan.eos is not None else set()
            self._check_prefix(prefix_ids, plan.max_length - 1, ends)     # the outputs' budget
            if target is not None:
                output_ids = self._target_ids(target)
                logits = forced_logits(self.model, memory, mask, [plan.start] + output_ids[:-1])  # (T, V)
            elif beam_size == 1:
                tokens, step_logits = greedy(self.model, memory, mask, plan, prefix_ids)
                output_ids = tokens[0].tolist()
                logits = torch.cat(step_logits, dim=0)                                             # (T, V)
            else:
                with no_capture():
                    result = beam_search(self.model, memory, mask, plan, record=True, prefix=prefix_ids)[0]
                output_ids, beam_final = result.output_ids, result.final
                beam_history = [[Hypothesis(self.tokenizer.pieces(h.pieces), h.score, h.parent, h.finished,
                                            h.log_prob) for h in step] for step in result.history]
                logits = forced_logits(self.model, memory, mask, [plan.start] + output_ids[:-1])
        probs = torch.softmax(logits.float(), dim=-1)                                              # (T, V)
        T, S = len(output_ids), len(source_ids)
        attention = self._trace(recorder, S, T) if capture else None
        steps = self._steps(output_ids, probs, top_k, attention)
        fed_ids = [plan.start] + output_ids[:-1]
        explanation = _explain(self, source_ids, fed_ids, output_ids, gates, logits) if explain else None
        out = HFTranslation(
            text=self.tokenizer.decode(output_ids), source_tokens=self.tokenizer.source_pieces(source_ids),
            target_tokens=self.tokenizer.pieces(fed_ids), output_tokens=self.tokenizer.pieces(output_ids),
            truncated=truncated, attention=attention,
            masks=Masks(source_padding=np.ones(S, dtype=bool), target_causal=causal_mask(T)),
            positional_encoding=self._positions("encoder", max(S, T)),
            source_embeddings=self._embeddings(source), steps=steps, beam=beam_history, beam_final=beam_final,
            source_ids=source_ids, output_ids=output_ids, forced=target is not None, prefix_length=len(prefix_ids),
            seconds=time.perf_counter() - started, explanation=explanation, positional_kind=self.config.positional_kind,
            decoder_positional_encoding=self._positions("decoder", T),
            position_bias=self._bias("encoder", S), decoder_position_bias=self._bias("decoder", T))
        return _diagnosed(self, out, head_mask) if diagnose else out

    def _embeddings(self, source) -> np.ndarray:
        return arch.token_embeddings(self.model.get_encoder(), source)[0].float().cpu().numpy()   # (S, D)

    def positional_table(self, positions: int) -> np.ndarray:
        """(positions, d_model): what the encoder adds at each position (zeros for T5)."""
        with torch.no_grad():                        # learned tables (BART, mBART) are parameters
            return self._positions("encoder", self._table_length(positions))

    def _positions(self, side: str, n: int) -> np.ndarray:
        stack = self.model.get_encoder() if side == "encoder" else self.model.get_decoder()
        table = arch.position_table(stack, self.family, n, self.config.d_model)
        return table.float().cpu().numpy()                                                     # (n, D)

    def _bias(self, side: str, n: int) -> np.ndarray | None:
        if self.family != "t5":
            return None
        stack = self.model.get_encoder() if side == "encoder" else self.model.get_decoder()
        return arch.relative_bias(stack, n).float().cpu().numpy()                               # (H, n, n)

    # ---- many sentences, no capture -------------------------------------------------------------
    @torch.inference_mode()
    def translate_batch(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None,
                        length_penalty: float | None = None, head_mask=None, batch_size: int = 32) -> list[str]:
        encoded = [self.encode_source(s)[0] for s in sentences]
        max_len = self._max_len(max_len)
        gates = self._gates(head_mask)
        pad = self.tokenizer.hf.pad_token_id
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))     # similar lengths together
        results: list[str] = [""] * len(encoded)
        with gating(gates), no_capture():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                S = max(len(encoded[i]) for i in chunk)
                source = torch.full((len(chunk), S), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), S), dtype=torch.long)
                for row, i in enumerate(chunk):
                    source[row, : len(encoded[i])] = torch.tensor(encoded[i])
                    mask[row, : len(encoded[i])] = 1
                source, mask = source.to(self.device), mask.to(self.device)
                memory = self._encode(source, mask)
                plan = self._plan(source, mask, int(beam_size), max_len, length_penalty)
                if beam_size == 1:
                    tokens, _ = greedy(self.model, memory, mask, plan)
                    outputs = [self._cut(tokens[row].tolist(), plan) for row in range(len(chunk))]
                else:
                    outputs = [r.output_ids for r in beam_search(self.model, memory, mask, plan)]
                for row, i in enumerate(chunk):
                    results[i] = self.tokenizer.decode(outputs[row])
        return results

    @staticmethod
    def _cut(ids: list[int], plan) -> list[int]:
        """A batch row up to and including its first end token."""
        ends = set(plan.eos.tolist()) if plan.eos is not None else set()
        for t, token in enumerate(ids):
            if token in ends:
                return ids[: t + 1]
        return ids
