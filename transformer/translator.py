"""`Translator`: the public API (see shared/docs/api.md). One call, one trace; no shared state."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from .capture import AttentionTrace, Masks, capture, no_capture, normalize_head_mask
from .checkpoint import load_model_dir
from .config import ModelConfig
from .decoding import Hypothesis, beam_search, forced_logits, greedy_decode
from .language import check as check_language
from .masks import causal_mask
from .model import BOS_ID, EOS_ID, PAD_ID, Transformer
from .tokenizer import Tokenizer

if TYPE_CHECKING:                     # the annotation only: explain.py imports torch-heavy helpers lazily
    from .explain import Explanation


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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
    explanation: "Explanation | None" = None   # explain=True only (transformer/explain.py)
    diagnosis: object | None = None            # diagnose=True only (transformer/diagnosis.py)


class Translator:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, card: dict | None = None, device=None):
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.config: ModelConfig = model.config
        self.card = card or {}
        self.source_lang, self.target_lang = self.config.source_lang, self.config.target_lang
        if len(tokenizer) != self.config.vocab_size:
            raise ValueError(f"tokenizer has {len(tokenizer)} pieces, config vocab_size={self.config.vocab_size}")

    @classmethod
    def load(cls, path: str | Path, device=None, source_lang: str | None = None,
             target_lang: str | None = None) -> "Translator":
        """A model directory of ours, or a Hugging Face encoder-decoder (a save_pretrained
        directory or a hub id; see transformer/hf). Languages choose a multilingual model's pair."""
        from .hf.load import is_hf_source
        if is_hf_source(path):
            from .hf.load import load_hf
            return load_hf(path, device=device, source_lang=source_lang, target_lang=target_lang)
        config, model, tokenizer, card = load_model_dir(path)
        for asked, own in ((source_lang, config.source_lang), (target_lang, config.target_lang)):
            if asked is not None and asked != own:
                raise ValueError(f"{path}: translates {config.source_lang}->{config.target_lang}, "
                                 f"not {source_lang}->{target_lang}")
        return cls(model, tokenizer, card, device)

    def language_check(self, text: str):
        """Is `text` in the language this model reads (self.source_lang)? A LanguageCheck
        (matches, detected, score, checked) from transformer/language.py; no model call.
        Empty text raises ValueError like translate; an unknown source language never alarms."""
        return check_language(text, self.source_lang)

    def positional_table(self, positions: int) -> np.ndarray:
        """(positions, d_model) float32: what the encoder adds at positions 0..positions-1 (the
        classic picture spans more positions than one sentence); at most max_source_len."""
        return self.model.positional_encoding[: self._table_length(positions)].float().cpu().numpy()

    def _table_length(self, positions: int) -> int:
        if not isinstance(positions, int) or positions < 1:
            raise ValueError(f"positions must be a positive int, got {positions!r}")
        return min(positions, self.config.max_source_len)

    # ---- input handling --------------------------------------------------------------
    def encode_source(self, text: str) -> tuple[list[int], bool]:
        """Source ids ending in </s>, cut to max_source_len; raises ValueError if there is nothing."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ValueError("text is empty: type a sentence to translate")
        ids = self.tokenizer.encode_ids(text)
        if not ids:
            raise ValueError("text yields no pieces after normalisation: type a sentence to translate")
        limit = self.config.max_source_len - 1
        truncated = len(ids) > limit
        return ids[:limit] + [EOS_ID], truncated

    def _check_max_len(self, max_len, source_len: int) -> int:
        if max_len is None:
            return min(self.config.max_target_len, 2 * source_len + 16)
        if not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
        if max_len > self.config.max_target_len:
            raise ValueError(f"max_len={max_len} exceeds the model's max_target_len={self.config.max_target_len}")
        return int(max_len)

    def _gates(self, head_mask):
        c = self.config
        return normalize_head_mask(head_mask, c.n_encoder_layers, c.n_decoder_layers, c.n_heads, self.device)

    # ---- one sentence, everything captured ----------------------------------------------
    @torch.inference_mode()
    def translate(self, text: str, beam_size: int = 1, max_len: int | None = None, capture: bool = True,
                  top_k: int = 5, length_penalty: float = 1.0, target: str | list[str] | None = None,
                  head_mask=None, explain: bool = False, diagnose: bool = False,
                  prefix: str | list[str] | None = None) -> Translation:
        """Decode (greedy or beam) or, with `target`, force a reference: a text, or a list of
        pieces fed exactly (e.g. another run's output_tokens, so two runs align step by step).
        `prefix` (pieces, or a text segmented without </s>) forces the first output pieces, then
        decoding goes on from there; beam hypotheses all start with it (see beam_search).
        explain=True adds `out.explanation` (norm-based attention, ALTI+, saliency) for this run."""
        started = time.perf_counter()
        if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
        source_ids, truncated = self.encode_source(text)
        max_len = self._check_max_len(max_len, len(source_ids))
        prefix_ids = self._check_prefix(self._prefix_ids(prefix, target), max_len, {EOS_ID})
        gates = self._gates(head_mask)
        source = torch.tensor([source_ids], dtype=torch.long, device=self.device)   # (1, S)
        keep = None                      # one sentence: no padding, so no key mask
        beam_history, beam_final = None, None
        recorder_cm = _capture_cm(capture)
        with recorder_cm as recorder:
            if target is not None:
                output_ids = self._target_ids(target)
                logits = forced_logits(self.model, source, keep, output_ids, gates)          # (T, V)
            elif beam_size == 1:
                tokens, step_logits = greedy_decode(self.model, source, keep, max_len, gates, prefix_ids)
                output_ids = tokens[0].tolist()
                logits = torch.cat(step_logits, dim=0)                                        # (T, V)
            else:
                with no_capture():
                    result = beam_search(self.model, source, keep, beam_size, max_len, length_penalty,
                                         gates, record=True, prefix=prefix_ids)[0]
                output_ids = result.output_ids
                beam_history, beam_final = self._name_beam(result.history), result.final
                # Steps and attention describe the returned hypothesis; a teacher-forced pass
                # over it equals cached decoding (tested), and gives every row at once.
                logits = forced_logits(self.model, source, keep, output_ids, gates)
        probs = torch.softmax(logits.float(), dim=-1)                                         # (T, V)
        T, S = len(output_ids), len(source_ids)
        attention = self._trace(recorder, S, T) if capture else None
        steps = self._steps(output_ids, probs, top_k, attention)
        fed_ids = [BOS_ID] + output_ids[:-1]
        explanation = _explain(self, source_ids, fed_ids, output_ids, gates, logits) if explain else None
        pe = self.model.positional_encoding[: max(S, T)].float().cpu().numpy()
        embeddings = self.model.scaled_embedding(source, self.model.source_embedding)[0].float().cpu().numpy()
        out = Translation(
            text=self.tokenizer.decode(output_ids),
            source_tokens=self.tokenizer.pieces(source_ids),
            target_tokens=self.tokenizer.pieces(fed_ids),
            output_tokens=self.tokenizer.pieces(output_ids),
            truncated=truncated, attention=attention,
            masks=Masks(source_padding=np.ones(S, dtype=bool), target_causal=causal_mask(T)),
            positional_encoding=pe, source_embeddings=embeddings, steps=steps,
            beam=beam_history, beam_final=beam_final, source_ids=source_ids, output_ids=output_ids,
            forced=target is not None, seconds=time.perf_counter() - started, explanation=explanation,
            prefix_length=len(prefix_ids))
        return _diagnosed(self, out, head_mask) if diagnose else out

    def _target_ids(self, target) -> list[int]:
        """A reference text (segmented, then </s>), or a list of pieces fed exactly as given."""
        if isinstance(target, str):
            if not target.strip():
                raise ValueError("target is empty: give a reference translation or leave it out")
            return self.tokenizer.encode_ids(target)[: self.config.max_target_len - 1] + [EOS_ID]
        if not isinstance(target, (list, tuple)) or not target:
            raise ValueError("target must be a reference text or a non-empty list of pieces")
        if len(target) > self.config.max_target_len:
            raise ValueError(f"target has {len(target)} pieces; the model takes at most "
                             f"{self.config.max_target_len}")
        return self.tokenizer.piece_ids(target)

    def _prefix_ids(self, prefix, target) -> list[int]:
        """prefix= as output ids: pieces exactly, or a text segmented like a target without </s>.
        Empty is no prefix. ValueError: not a text or pieces, an unknown piece, or with target=."""
        if prefix is None:
            return []
        if isinstance(prefix, str):
            ids = self._prefix_text_ids(prefix) if prefix.strip() else []
        elif isinstance(prefix, (list, tuple)) and all(isinstance(p, str) for p in prefix):
            ids = self.tokenizer.piece_ids(list(prefix)) if prefix else []
        else:
            raise ValueError("prefix must be a text or a list of pieces (str)")
        if not ids:
            return []
        if target is not None:
            raise ValueError("give either target= (force a whole translation) or prefix= (force its "
                             "start, then decode), not both")
        return ids

    def _check_prefix(self, ids: list[int], limit: int, ends: set) -> list[int]:
        """ValueError: an end piece before the prefix's end, or more pieces than `limit` (max_len)."""
        for t, i in enumerate(ids[:-1]):
            if i in ends:
                raise ValueError(f"prefix has the end piece {self.tokenizer.id_to_piece(i)!r} at position {t}, "
                                 f"before its end: nothing can follow the end of a sentence")
        if len(ids) > limit:
            raise ValueError(f"prefix has {len(ids)} pieces, more than max_len={limit}: "
                             f"give a larger max_len or a shorter prefix")
        return ids

    def _prefix_text_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode_ids(text)

    def _name_beam(self, history):
        return [[Hypothesis(self.tokenizer.pieces(h.pieces), h.score, h.parent, h.finished, h.log_prob)
                 for h in step] for step in history]

    def _steps(self, output_ids, probs, top_k, attention):
        k = max(0, min(int(top_k), probs.shape[-1]))
        top_p, top_i = probs.topk(k, dim=-1) if k else (None, None)
        steps = []
        for t, token_id in enumerate(output_ids):
            alternatives = ([(self.tokenizer.id_to_piece(i), float(p))
                             for p, i in zip(top_p[t].tolist(), top_i[t].tolist())] if k else [])
            step = Step(self.tokenizer.id_to_piece(token_id), float(probs[t, token_id]), alternatives, token_id)
            if attention is not None:
                step.cross_attention = attention.cross[:, :, t, :]
                step.decoder_self_attention = attention.decoder_self[:, :, t, : t + 1]
            steps.append(step)
        return steps

    def _trace(self, recorder, S: int, T: int) -> AttentionTrace:
        """Stack recorded weights into (layers, heads, Tq, Tk) arrays; decode steps become rows."""
        c = self.config

        def stack(kind: str, layers: int, width: int) -> np.ndarray:
            per_layer = []
            for layer in range(layers):
                rows = recorder.records[(kind, layer)]
                full = torch.zeros(c.n_heads, sum(r.shape[2] for r in rows), width)
                position = 0
                for r in rows:                                   # (1, H, q, k), k <= width
                    full[:, position:position + r.shape[2], : r.shape[3]] = r[0].float().cpu()
                    position += r.shape[2]
                per_layer.append(full)
            return torch.stack(per_layer).numpy()

        trace = AttentionTrace(encoder_self=stack("encoder_self", c.n_encoder_layers, S),
                               decoder_self=stack("decoder_self", c.n_decoder_layers, T),
                               cross=stack("cross", c.n_decoder_layers, S))
        assert trace.decoder_self.shape[2] == T and trace.cross.shape[2] == T, "trace rows != output steps"
        return trace

    # ---- many sentences, no capture ------------------------------------------------------
    @torch.inference_mode()
    def translate_batch(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None,
                        length_penalty: float = 1.0, head_mask=None, batch_size: int = 64) -> list[str]:
        encoded = [self.encode_source(s)[0] for s in sentences]
        gates = self._gates(head_mask)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))   # similar lengths together
        results: list[str] = [""] * len(encoded)
        with no_capture():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                S = max(len(encoded[i]) for i in chunk)
                source = torch.full((len(chunk), S), PAD_ID, dtype=torch.long)
                for row, i in enumerate(chunk):
                    source[row, : len(encoded[i])] = torch.tensor(encoded[i])
                source = source.to(self.device)
                keep = source != PAD_ID
                # one max_len per chunk would change results, so it is per sentence below
                limits = [self._check_max_len(max_len, len(encoded[i])) for i in chunk]
                if beam_size == 1:
                    tokens, _ = greedy_decode(self.model, source, keep, max(limits), gates)
                    outputs = [tokens[row, :limits[row]].tolist() for row in range(len(chunk))]
                else:
                    outputs = [r.output_ids for r in beam_search(
                        self.model, source, keep, beam_size, limits, length_penalty, gates)]
                for row, i in enumerate(chunk):
                    ids = outputs[row]
                    if EOS_ID in ids:
                        ids = ids[: ids.index(EOS_ID) + 1]
                    results[i] = self.tokenizer.decode(ids)
        return results


def _explain(translator, source_ids, fed_ids, output_ids, gates, logits):
    from .explain import explain_run          # only when asked: the default path imports nothing more
    return explain_run(translator, source_ids, fed_ids, output_ids, gates, reference_logits=logits)


def _diagnosed(translator, out, head_mask):
    from .diagnosis import diagnose           # only when asked
    out.diagnosis = diagnose(translator, out, head_mask)
    return out


def _capture_cm(enabled: bool):
    return capture() if enabled else _null_recorder()


@contextlib.contextmanager
def _null_recorder():
    with no_capture():
        yield None
