"""The engine interface: everything `Translator` needs from a model family, and nothing more.

`Translator` (translator.py) checks input, plans decoding, runs greedy, beam and forced decoding and
assembles a `Translation`, once, for every family. What differs between families lives behind this
interface, in one engine each: `engine_ours.OursEngine` (our `Transformer` + sentencepiece) and
`hf.engine.HFEngine` (a Hugging Face encoder-decoder; family facts in hf/arch.py). A new family is a
new engine; a caller that needs a family fact asks the engine a question (`tr.engine.special_ids`,
`tr.engine.model_view()`, ...), never `hasattr` and never the family's name.

The contract (shapes: B sentences, S source pieces, T fed pieces, V vocabulary, D d_model):
- ids: `source_ids(text)` -> (ids ending in the model's end piece, cut to max_source_len;
  truncated); ([], False) when the text yields no content piece. `target_text_ids(text)` -> a
  reference as output ids, ending with the end piece; `prefix_text_ids(text)` -> the same without it.
- pieces: `tokenizer` has pieces(ids), id_to_piece(id), piece_ids(pieces) (ValueError for an unknown
  piece), decode(ids) (specials dropped), source_pieces(ids) and len().
- decoding: `plan(source, mask, beam_size, max_len, length_penalty, prompt)` resolves a call's
  settings into a `Plan` (start piece, end pieces, each row's output budget). `greedy` and `beam`
  decode with the KV cache; `teacher_forced(source, mask, fed)` is one batched pass -> (B, T, V).
  source (B, S) long, padded with `pad_id`; mask (B, S) bool, True where a key may be attended, or
  None when nothing is padding; fed (B, T) long, padding only after each row's real pieces (the
  causal mask keeps the real positions exact); rows that repeat a source share its encoding when
  nothing is captured (shared_sources). `encoder_layer` k (all three; None = plain): the
  decoder reads encoder layer k's output through the final encoder norm (DecoderLens).
- gates: `gates(head_mask)` -> {kind: (layers, heads)} or None. No decoding method takes them:
  head ablation is a hook on the z points (interventions.intervening(hooks, gates)), so it reaches
  every engine through the one channel every other intervention takes.
- capture: attention and the residual stream reach the recorder of `capture.capture()` through
  hooks installed once at load (ContextVar per call, no per-call global state); `capture_sites()`
  names the attention sites, `residual_sites()` the residual points (capture.py's docstring).
- interventions: the same hooks hand every point of `hook_points()` (residual points and each
  attention module's "{stack}.{layer}.{kind}.z") to the call's `interventions.intervening(hooks)`,
  which may read or replace it, in every decoding method (interventions.py).
- questions the rest of the code would otherwise answer by asking the family: `model_view()` (the
  layers, for the decompositions of explain/) and `explainable`; the source vocabulary
  (`source_embedding_weight()`, `source_vocabulary(rows)`, `source_special(ids)`,
  `source_piece_ids(pieces)`, `source_id_rows(texts)`); `join_pieces(pieces)` (pieces -> text).
- read-out: `read_out(hidden)` (..., D) -> (..., V) logits: a decoder residual stream through the
  model's own final norm and output projection, exactly as its last layer is read (the logit lens).
- facts: family ("ours" or the HF model_type), positional_kind, positional_table(side, n),
  position_bias(side, n), source_embeddings(source), special_ids, pad_id, unk_id, batch_size.
Engines hold no per-call state: calls from many threads share one engine.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from .capture import current_recorder
from .view import ModelView
from .interventions import rows_apart
from .interventions import z_names


def shared_sources(source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(one row index per distinct source, each row's place among them) when rows of a batched
    forced pass repeat a source and no capture records this call: the source is then encoded once
    (diagnosis puts a piece back into the translation under the unchanged source). None otherwise:
    a capture or a call's hooks keep one encoder row per input row (a hook may patch rows apart;
    head gates treat every row alike, so they share)."""
    if len(source) < 2 or current_recorder() is not None or rows_apart():
        return None
    unique, inverse = torch.unique(source, dim=0, return_inverse=True)
    if len(unique) == len(source):
        return None
    first = torch.empty(len(unique), dtype=torch.long, device=source.device)
    first[inverse] = torch.arange(len(source), device=source.device)       # any row of each: they are equal
    return first, inverse


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class Plan:
    """One call's decoding settings, resolved by the engine."""
    start: int                      # the decoder's start piece
    ends: frozenset                 # ids that end an output
    limits: list                    # per row: the most output pieces, the end piece included
    beam_size: int
    length_penalty: float
    native: object = None           # the engine's own resolved settings (HF: generation.Plan)


class Engine(ABC):
    """A model family behind `Translator`. Attributes every engine sets: family, device, model,
    tokenizer, config, card, source_lang, target_lang, positional_kind, special_ids (frozenset),
    pad_id, unk_id, start_id (the decoder's start piece), batch_size (translate_batch's default)."""
    family: str
    device: torch.device
    positional_kind: str
    special_ids: frozenset
    pad_id: int
    unk_id: int
    start_id: int
    batch_size: int

    # ---- ids -------------------------------------------------------------------------------
    @abstractmethod
    def source_ids(self, text: str) -> tuple[list[int], bool]: ...

    @abstractmethod
    def target_text_ids(self, text: str) -> list[int]: ...

    @abstractmethod
    def prefix_text_ids(self, text: str) -> list[int]: ...

    # ---- decoding ----------------------------------------------------------------------------
    @abstractmethod
    def plan(self, source: torch.Tensor, mask, beam_size: int, max_len: int | None,
             length_penalty: float | None, prompt: int = 1) -> Plan:
        """max_len None: the engine's default budget. prompt: start piece + forced prefix pieces."""

    @abstractmethod
    def greedy(self, source, mask, plan: Plan, prefix=None, encoder_layer=None):
        """-> (tokens (B, T) padded after each row's end, step logits list[(B, V)]); prefix: output
        ids forced first (every row), fed through the same cached loop."""

    @abstractmethod
    def beam(self, source, mask, plan: Plan, record: bool = False, prefix=None, encoder_layer=None) -> list:
        """-> one BeamResult (output_ids, score, history, final) per sentence; history only with
        record (B = 1), one entry per output step, hypotheses' pieces as ids."""

    @abstractmethod
    def teacher_forced(self, source, mask, fed, encoder_layer=None) -> torch.Tensor:
        """One teacher-forced pass: logits (B, T, V) for fed (B, T) = start piece + outputs[:-1]."""

    @abstractmethod
    def read_out(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., D) decoder residual stream -> (..., V) logits, as the model reads its last layer."""

    def batch(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Source id rows -> (source (B, S) padded with pad_id, mask (B, S) bool) on the device."""
        S = max(len(r) for r in rows)
        source = torch.full((len(rows), S), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), S), dtype=torch.bool)
        for b, ids in enumerate(rows):
            source[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[b, : len(ids)] = True
        return source.to(self.device), mask.to(self.device)

    # ---- gates and capture -------------------------------------------------------------------
    def gates(self, head_mask):
        """{(kind, layer, head)} -> {kind: float (layers, heads)} on the device, or None (all on):
        what interventions.intervening(hooks, gates) applies, and the decompositions read."""
        from .capture import normalize_head_mask
        c = self.config
        return normalize_head_mask(head_mask, c.n_encoder_layers, c.n_decoder_layers, c.n_heads, self.device)

    def capture_sites(self) -> list[tuple[str, int]]:
        """The (kind, layer) names attention is recorded under, in model order. The residual stream
        is recorded under `residual_sites()`: "encoder.{i}.resid_pre|resid_mid_self|resid_post",
        "decoder.{i}.resid_pre|resid_mid_self|resid_mid_cross|resid_post", "{stack}.final_norm"."""
        c = self.config
        return ([("encoder_self", i) for i in range(c.n_encoder_layers)]
                + [(kind, i) for i in range(c.n_decoder_layers) for kind in ("decoder_self", "cross")])

    def residual_sites(self) -> list[str]:
        """Every residual capture point, in model order (capture.residual_names)."""
        from .capture import residual_names
        return residual_names(self.config.n_encoder_layers, self.config.n_decoder_layers)

    def hook_points(self) -> list[str]:
        """Every point translate(hooks=...) can read and write: the residual points, then each
        attention module's per-head "z" (interventions.z_names)."""
        return self.residual_sites() + z_names(self.config.n_encoder_layers, self.config.n_decoder_layers)

    # ---- per-family facts --------------------------------------------------------------------
    @abstractmethod
    def positional_table(self, side: str, n: int) -> np.ndarray:
        """(n, D) float32: what `side` ("encoder" | "decoder") adds at positions 0..n-1."""

    def position_bias(self, side: str, n: int) -> np.ndarray | None:
        """(H, n, n) relative position bias added to self-attention scores (T5), else None."""
        return None

    @abstractmethod
    def source_embeddings(self, source: torch.Tensor) -> np.ndarray:
        """(S, D) float32 for source (1, S): token embeddings x the model's scale, before positions."""

    # ---- what the rest of the code asks instead of the family ----------------------------------
    explainable: bool = True             # model_view() describes this model's layers

    @abstractmethod
    def model_view(self) -> ModelView:
        """The layers as explain/ decomposes them (view.py); ValueError when not `explainable`."""

    @abstractmethod
    def source_embedding_weight(self) -> torch.Tensor:
        """(V, D): the source side's input embedding rows, by source id, before any scale."""

    @abstractmethod
    def source_vocabulary(self, rows: int) -> tuple[list[str], set]:
        """(pieces by source id, special ids among them) for the first `rows` ids that have a piece."""

    @abstractmethod
    def source_special(self, ids, pieces: list[str] | None = None) -> set:
        """The special ids among source ids (control, unknown, unused, language codes, no piece);
        `pieces`, when the caller has them, are those of `ids` in order."""

    @abstractmethod
    def source_piece_ids(self, pieces) -> list[int]:
        """Source pieces (Translation.source_tokens) back to source ids; ValueError for an unknown one."""

    @abstractmethod
    def source_id_rows(self, texts) -> list[list[int]]:
        """Each text's source ids, its content pieces only (no specials added)."""

    @abstractmethod
    def join_pieces(self, pieces) -> str:
        """Pieces (either side's) joined into text as the tokenizer would detokenize them."""
