"""`Translator`: the public API (see docs/api.md), one class for every model family.

It checks input, plans decoding, runs greedy, beam and forced decoding and assembles a
`Translation`, calling only the engine interface (engine.py): `engine_ours.OursEngine` for our
model, `hf.engine.HFEngine` for Hugging Face encoder-decoders. One call, one trace; no shared state.
What is computed over a translation afterwards (explain, diagnose, lens, align, ...) is an analysis
of analyses.py, which translate() runs by name and never imports itself.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
import numpy as np
import torch

from . import analyses as registry
from .capture import Masks, no_capture, recording, trace_from
from .config import ModelConfig
from .decoding import Hypothesis
from .engine import Engine, Plan, default_device
from .engine_ours import OursEngine, open_ours
from .interventions import check_hooks, intervening
from .language import check as check_language
from .lens import check_encoder_layer
from .masks import causal_mask
from .patching import PatchResult
from .patching import patch as patch_pair
from .sources import is_hf_source
from .translation import Step, Translation

__all__ = ["Step", "Translation", "Translator", "default_device"]


def open_engine(path, device=None, source_lang: str | None = None, target_lang: str | None = None) -> Engine:
    """The engine for a model directory of ours, or a Hugging Face encoder-decoder (a save_pretrained
    directory or a hub id): the one place engines are chosen. Hugging Face code is imported only
    here, and only for such a source; no engine imports this module back."""
    if is_hf_source(path):
        from .hf.runtime import runtime
        runtime()                                   # transformers, once, under a lock, before hf.engine
        from .hf.engine import open_hf
        return open_hf(path, device, source_lang, target_lang)
    return open_ours(path, device, source_lang, target_lang)


class Translator:
    """Translator(engine), or Translator(model, tokenizer, card, device) for a `Transformer` of ours
    (training builds one so). `Translator.load` picks the engine for a path (open_engine)."""

    def __init__(self, model, tokenizer=None, card: dict | None = None, device=None):
        engine = model if isinstance(model, Engine) else OursEngine(model, tokenizer, card, device)
        self.engine = engine                 # what differs between families is asked of it, nowhere else
        self.device = engine.device
        self.config: ModelConfig = engine.config
        self.card = engine.card
        self.source_lang, self.target_lang = engine.source_lang, engine.target_lang
        self.path: Path | None = None        # the model directory load() opened (head_roles.json sits there)
        self._roles_lock = threading.Lock()
        self._roles: tuple | None = None     # (head_roles dict or None,), read once

    @classmethod
    def load(cls, path: str | Path, device=None, source_lang: str | None = None,
             target_lang: str | None = None) -> "Translator":
        """A model directory of ours, or a Hugging Face encoder-decoder (a save_pretrained
        directory or a hub id; see transformer/hf). Languages choose a multilingual model's pair."""
        translator = cls(open_engine(path, device, source_lang, target_lang))
        translator.path = Path(path).expanduser() if Path(path).expanduser().is_dir() else None
        return translator

    @property
    def head_roles(self) -> dict | None:
        """The model directory's head_roles.json (`python -m transformer heads`), parsed once per
        Translator (under a lock: sessions share one), or None when the model has none."""
        with self._roles_lock:
            if self._roles is None:
                file = self.path / "head_roles.json" if self.path is not None else None
                self._roles = (json.loads(file.read_text(encoding="utf-8")) if file and file.is_file() else None,)
            return self._roles[0]

    def language_check(self, text: str):
        """Is `text` in the language this model reads (self.source_lang)? A LanguageCheck
        (matches, detected, score, checked) from transformer/language.py; no model call.
        Empty text raises ValueError like translate; an unknown source language never alarms."""
        return check_language(text, self.source_lang)

    def positional_table(self, positions: int) -> np.ndarray:
        """(positions, d_model) float32: what the encoder adds at positions 0..positions-1 (the
        classic picture spans more positions than one sentence); at most max_source_len."""
        if not isinstance(positions, int) or positions < 1:
            raise ValueError(f"positions must be a positive int, got {positions!r}")
        return self.engine.positional_table("encoder", min(positions, self.config.max_source_len))

    # ---- input handling --------------------------------------------------------------------
    def encode_source(self, text: str) -> tuple[list[int], bool]:
        """The encoder's input ids (the model's specials included), cut to max_source_len, and
        whether they were cut; ValueError if there is nothing to translate."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ValueError("text is empty: type a sentence to translate")
        ids, truncated = self.engine.source_ids(text)
        if not ids:
            raise ValueError("text yields no pieces after normalisation: type a sentence to translate")
        return ids, truncated

    def target_ids(self, target) -> list[int]:
        """A reference text (tokenized as a target, then the end piece), or pieces fed exactly."""
        if isinstance(target, str):
            if not target.strip():
                raise ValueError("target is empty: give a reference translation or leave it out")
            return self.engine.target_text_ids(target)
        if not isinstance(target, (list, tuple)) or not target:
            raise ValueError("target must be a reference text or a non-empty list of pieces")
        if len(target) > self.config.max_target_len:
            raise ValueError(f"target has {len(target)} pieces; the model takes at most "
                             f"{self.config.max_target_len}")
        return self.engine.tokenizer.piece_ids(target)

    def gates(self, head_mask):
        """head_mask {(kind, layer, head)} -> {kind: (layers, heads)} gates, None: all on; what a call
        hands interventions.intervening (hooks on z), and what the decompositions read."""
        return self.engine.gates(head_mask)

    def _check_max_len(self, max_len) -> int | None:
        """None: the engine's default budget (ours: 2 * source + 16; HF: its generation config)."""
        if max_len is None:
            return None
        if not isinstance(max_len, (int, np.integer)) or max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
        if max_len > self.config.max_target_len:
            raise ValueError(f"max_len={max_len} exceeds the model's max_target_len={self.config.max_target_len}")
        return int(max_len)

    def _prefix_ids(self, prefix, target) -> list[int]:
        """prefix= as output ids: pieces exactly, or a text segmented like a target without </s>.
        Empty is no prefix. ValueError: not a text or pieces, an unknown piece, or with target=."""
        if prefix is None:
            return []
        if isinstance(prefix, str):
            ids = self.engine.prefix_text_ids(prefix) if prefix.strip() else []
        elif isinstance(prefix, (list, tuple)) and all(isinstance(p, str) for p in prefix):
            ids = self.engine.tokenizer.piece_ids(list(prefix)) if prefix else []
        else:
            raise ValueError("prefix must be a text or a list of pieces (str)")
        if not ids:
            return []
        if target is not None:
            raise ValueError("give either target= (force a whole translation) or prefix= (force its "
                             "start, then decode), not both")
        return ids

    def _check_prefix(self, ids: list[int], limit: int, ends) -> list[int]:
        """ValueError: an end piece before the prefix's end, or more pieces than `limit` (the budget)."""
        for t, i in enumerate(ids[:-1]):
            if i in ends:
                raise ValueError(f"prefix has the end piece {self.engine.tokenizer.id_to_piece(i)!r} at position {t}, "
                                 f"before its end: nothing can follow the end of a sentence")
        if len(ids) > limit:
            raise ValueError(f"prefix has {len(ids)} pieces, more than max_len={limit}: "
                             f"give a larger max_len or a shorter prefix")
        return ids

    # ---- one sentence, everything captured ----------------------------------------------
    @torch.inference_mode()
    def translate(self, text: str, beam_size: int = 1, max_len: int | None = None, capture: bool = True,
                  top_k: int = 5, length_penalty: float | None = None, target: str | list[str] | None = None,
                  head_mask=None, explain: bool = False, diagnose: bool = False,
                  prefix: str | list[str] | None = None, lens: bool = False,
                  encoder_layer: int | None = None, align: bool = False, hooks: dict | None = None,
                  analyses=()) -> Translation:
        """Decode (greedy or beam) or, with `target`, force a reference: a text, or a list of
        pieces fed exactly (e.g. another run's output_tokens, so two runs align step by step).
        `prefix` (pieces, or a text segmented without </s>) forces the first output pieces, then
        decoding goes on from there; beam hypotheses all start with it. length_penalty None: ours
        1.0, Hugging Face its generation config. encoder_layer=k (DecoderLens): the decoder reads
        encoder layer k's output (0-based, through the final encoder norm; the last = plain).
        hooks={point: fn(name, tensor)} reads or writes named points during this call's decoding and
        forced passes (interventions.py; beam: the search and the pass over the returned hypothesis);
        head_mask is such a hook on the z points. analyses=(name, ...) runs those analyses of
        analyses.py over the result (out.analyses[name]); explain=True, diagnose=True, lens=True and
        align=True are the same for "explain" (out.explanation), "diagnose" (out.diagnosis), "lens"
        (out.lens, the logit lens) and "align" (out.alignment: source piece i linked to output piece j
        by the method head_roles.json names; ALTI+ with mutual argmax where there is none)."""
        started = time.perf_counter()
        if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
        e, pieces = self.engine, self.engine.tokenizer
        flags = {"explain": explain, "diagnose": diagnose, "lens": lens, "align": align}
        asked = registry.asked([name for name, on in flags.items() if on] + registry.asked(analyses))
        source_ids, truncated = self.encode_source(text)
        max_len = self._check_max_len(max_len)
        prefix_ids = self._prefix_ids(prefix, target)
        gates = self.gates(head_mask)
        layer = check_encoder_layer(encoder_layer, self.config.n_encoder_layers, registry.own_passes(asked))
        hooks = self._hooks(hooks, registry.own_passes(asked))
        source = torch.tensor([source_ids], dtype=torch.long, device=self.device)           # (1, S)
        plan = e.plan(source, None, int(beam_size), max_len, length_penalty, 1 + len(prefix_ids))
        self._check_prefix(prefix_ids, plan.limits[0], plan.ends)
        beam_history, beam_final = None, None
        with recording(capture, registry.residual_reads(asked, self.config) or False) as recorder, \
                intervening(hooks, gates):
            if target is not None:
                output_ids = self.target_ids(target)
                logits = self._forced(source, plan, output_ids, layer)                        # (T, V)
            elif beam_size == 1:
                tokens, step_logits = e.greedy(source, None, plan, prefix_ids, layer)
                output_ids = tokens[0].tolist()
                logits = torch.cat(step_logits, dim=0)                                        # (T, V)
            else:
                with no_capture():
                    result = e.beam(source, None, plan, record=True, prefix=prefix_ids, encoder_layer=layer)[0]
                output_ids, beam_final = result.output_ids, result.final
                beam_history = [[Hypothesis(pieces.pieces(h.pieces), h.score, h.parent, h.finished,
                                            h.log_prob) for h in step] for step in result.history]
                # Steps and attention describe the returned hypothesis; a teacher-forced pass
                # over it equals cached decoding (tested), and gives every row at once.
                logits = self._forced(source, plan, output_ids, layer)
        probs = torch.softmax(logits.float(), dim=-1)                                         # (T, V)
        T, S = len(output_ids), len(source_ids)
        attention = trace_from(recorder, self.config, S, T) if capture else None
        fed_ids = [plan.start] + output_ids[:-1]
        out = Translation(
            text=pieces.decode(output_ids), source_tokens=pieces.source_pieces(source_ids),
            target_tokens=pieces.pieces(fed_ids), output_tokens=pieces.pieces(output_ids),
            truncated=truncated, attention=attention,
            masks=Masks(source_padding=np.ones(S, dtype=bool), target_causal=causal_mask(T)),
            positional_encoding=e.positional_table("encoder", max(S, T)),
            source_embeddings=e.source_embeddings(source), steps=self._steps(output_ids, probs, top_k, attention),
            beam=beam_history, beam_final=beam_final, source_ids=source_ids, output_ids=output_ids,
            forced=target is not None, prefix_length=len(prefix_ids), seconds=time.perf_counter() - started,
            positional_kind=e.positional_kind, decoder_positional_encoding=e.positional_table("decoder", T),
            position_bias=e.position_bias("encoder", S), decoder_position_bias=e.position_bias("decoder", T),
            encoder_layer=layer, source_text=text, head_mask=_heads_off(head_mask) if gates is not None else None,
            hooks=tuple(hooks or ()))
        call = registry.Call(logits=logits, recorder=recorder, top_k=top_k)
        for name in asked:
            registry.run(name, self, out, call)
        return out

    def _hooks(self, hooks, analyses: bool):
        """hooks= checked against the engine's points; ValueError beside explain/diagnose/align,
        whose own passes would not see them."""
        if not hooks:
            return None
        hooks = check_hooks(hooks, self.engine.hook_points())
        if analyses:
            raise ValueError("hooks= works with capture, lens, head_mask, prefix and target, not with "
                             "explain, diagnose or align (their own passes would not run the hooks)")
        return hooks

    def patch(self, clean: str, corrupt: str, step: int | None = None, target=None) -> PatchResult:
        """Activation patching (transformer/patching.py): which encoder position and which head
        carry the difference between two sources, as the fraction of the clean run's preference
        restored by copying each one from the clean run into the corrupt run. target: force this
        translation in both runs instead of the clean one's own greedy translation."""
        return patch_pair(self, clean, corrupt, step=step, target=target)

    def _forced(self, source, plan: Plan, output_ids: list[int], encoder_layer=None) -> torch.Tensor:
        """Logits (T, V) of one teacher-forced pass feeding the start piece, then output_ids[:-1]."""
        fed = torch.tensor([[plan.start] + list(output_ids[:-1])], dtype=torch.long, device=self.device)
        return self.engine.teacher_forced(source, None, fed, encoder_layer)[0]

    def _steps(self, output_ids, probs, top_k, attention):
        piece = self.engine.tokenizer.id_to_piece
        k = max(0, min(int(top_k), probs.shape[-1]))
        top_p, top_i = probs.topk(k, dim=-1) if k else (None, None)
        steps = []
        for t, token_id in enumerate(output_ids):
            alternatives = ([(piece(i), float(p))
                             for p, i in zip(top_p[t].tolist(), top_i[t].tolist())] if k else [])
            step = Step(piece(token_id), float(probs[t, token_id]), alternatives, token_id)
            if attention is not None:
                step.cross_attention = attention.cross[:, :, t, :]
                step.decoder_self_attention = attention.decoder_self[:, :, t, : t + 1]
            steps.append(step)
        return steps

    # ---- many sentences, no capture ------------------------------------------------------
    @torch.inference_mode()
    def translate_batch(self, sentences: list[str], beam_size: int = 1, max_len: int | None = None,
                        length_penalty: float | None = None, head_mask=None,
                        batch_size: int | None = None, encoder_layer: int | None = None,
                        hooks: dict | None = None) -> list[str]:
        """The same texts as translate() one by one, padding handled exactly (each sentence keeps
        the budget a call of its own would get). batch_size None: the engine's (ours 64, HF 32).
        hooks: as translate's, called once per batch of up to batch_size sentences; head_mask too."""
        e = self.engine
        encoded = [self.encode_source(s)[0] for s in sentences]
        max_len = self._check_max_len(max_len)
        gates = self.gates(head_mask)
        layer = check_encoder_layer(encoder_layer, self.config.n_encoder_layers)
        hooks = self._hooks(hooks, False)
        batch_size = batch_size or e.batch_size
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))   # similar lengths together
        results: list[str] = [""] * len(encoded)
        with no_capture(), intervening(hooks, gates):
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                source, mask = e.batch([encoded[i] for i in chunk])                          # (B, S) each
                plan = e.plan(source, mask, int(beam_size), max_len, length_penalty)
                if beam_size == 1:
                    tokens, _ = e.greedy(source, mask, plan, encoder_layer=layer)
                    outputs = [tokens[row, : plan.limits[row]].tolist() for row in range(len(chunk))]
                else:
                    outputs = [r.output_ids for r in e.beam(source, mask, plan, encoder_layer=layer)]
                for row, i in enumerate(chunk):
                    results[i] = e.tokenizer.decode(_until_end(outputs[row], plan.ends))
        return results


def _heads_off(head_mask) -> frozenset:
    """A checked head_mask (Engine.gates took it) as {(kind, layer, head)} of plain ints."""
    return frozenset((str(kind), int(layer), int(head)) for kind, layer, head in head_mask)


def _until_end(ids: list[int], ends) -> list[int]:
    """A batch row up to and including its first end piece (padding follows it)."""
    for t, token in enumerate(ids):
        if token in ends:
            return ids[: t + 1]
    return ids
