"""The logit lens over an encoder-decoder, step by step (nostalgebraist 2020), and DecoderLens's check.

`translate(..., lens=True)` records the decoder's residual stream after every sublayer through the
per-call recorder (capture.py; residual points "decoder.{i}.resid_mid_self|resid_mid_cross|resid_post")
and reads each one through the model's own final norm and output projection (`engine.read_out`:
the one place each family's head lives). The last site is then exactly the model's own output.

Contract (the public API, docs/api.md): T output steps, n_sites = 3 x n_decoder_layers.
- sites: ["L0.self", "L0.cross", "L0.ffn", "L1.self", ...], model order; "L{i}.self" is the stream
  after layer i's self-attention sublayer, ".cross" after its cross-attention, ".ffn" after its
  feed-forward (the layer's output).
- top_k[t][j]: list[(piece, prob)], best first, of that read-out at step t.
- chosen_prob float32 (T, n_sites): p(output_tokens[t]) there; chosen_rank int32 (T, n_sites): its
  rank (0 = top; the number of pieces strictly more probable).
- top_ids int64 / top_probs float32 (T, n_sites, k): top_k as arrays.
Steps describe what translate returned: cached greedy steps, or for beam search and forced decoding
the teacher-forced pass over the returned output (as attention capture does); prefix= and
head_mask= apply as they do to the translation.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from .capture import capture, residual_name
from .interventions import intervening

SUBLAYERS = (("self", "resid_mid_self"), ("cross", "resid_mid_cross"), ("ffn", "resid_post"))


def lens_points(n_decoder_layers: int) -> list[tuple[str, str]]:
    """[(site, residual capture point)] in model order: ("L0.self", "decoder.0.resid_mid_self"), ..."""
    return [(f"L{i}.{short}", residual_name("decoder", i, point))
            for i in range(n_decoder_layers) for short, point in SUBLAYERS]


@dataclass
class Lens:
    """What each decoder sublayer would say at every step (module docstring: the contract)."""
    sites: list                  # ["L0.self", "L0.cross", "L0.ffn", ...]
    top_k: list                  # [t][site] -> [(piece, prob)], best first
    chosen_prob: np.ndarray      # float32 (T, n_sites)
    chosen_rank: np.ndarray      # int32 (T, n_sites), 0 = top
    top_ids: np.ndarray          # int64 (T, n_sites, k)
    top_probs: np.ndarray        # float32 (T, n_sites, k)
    points: list                 # the residual capture point of each site ("decoder.0.resid_mid_self", ...)

    @property
    def n_layers(self) -> int:
        return len(self.sites) // len(SUBLAYERS)

    def grid(self, values: np.ndarray) -> np.ndarray:
        """(T, n_sites, ...) -> (T, layers, 3 sublayers (self, cross, ffn), ...)."""
        return values.reshape(values.shape[0], self.n_layers, len(SUBLAYERS), *values.shape[2:])


def check_encoder_layer(encoder_layer, n_encoder_layers: int, whole_model: bool = False) -> int | None:
    """None (plain) or a 0-based encoder layer; ValueError otherwise. whole_model: the call also
    explains or diagnoses, which describe the whole encoder, so only the last layer goes with it."""
    if encoder_layer is None:
        return None
    if (isinstance(encoder_layer, bool) or not isinstance(encoder_layer, (int, np.integer))
            or not 0 <= encoder_layer < n_encoder_layers):
        raise ValueError(f"encoder_layer must be an int in 0..{n_encoder_layers - 1} (the last = plain), "
                         f"got {encoder_layer!r}")
    if whole_model and encoder_layer != n_encoder_layers - 1:
        raise ValueError("explain= and diagnose= describe the whole model: not with an earlier encoder_layer")
    return int(encoder_layer)


@torch.inference_mode()
def read_lens(engine, recorder, output_ids: list[int], top_k: int, budget: int = 1 << 24,
              final_logits: torch.Tensor | None = None) -> Lens:
    """Read one call's recorded decoder residuals (B = 1) through engine.read_out, as many sites at
    once as keep the logits within `budget` floats (one matmul, not one per site).

    `final_logits` (T, V): the logits the call itself decoded with. The last site is the decoder's
    output through that same norm and projection, so those are its read-out (exactly the model's own
    distribution) and the matmul skips it. Everything after the read-out works on the logits, never a
    softmaxed copy: the rank is the count of larger logits, p = exp(logit - logsumexp) for the chosen
    piece and the top k (a softmax's numbers, one pass over the vocabulary fewer). What it costs:
    benchmarks/bench_lens.py --cost."""
    points = lens_points(engine.config.n_decoder_layers)
    T = len(output_ids)
    read = points[:-1] if final_logits is not None else points
    hidden = torch.stack([recorder.residual_stream(point)[0] for _, point in read])         # (n_read, T, D)
    assert hidden.shape[1] == T, f"{hidden.shape[1]} residual rows for {T} output steps"
    if final_logits is not None:
        assert tuple(final_logits.shape) == (T, engine.config.vocab_size), tuple(final_logits.shape)
    chosen = torch.tensor(output_ids, dtype=torch.long, device=hidden.device)
    k = max(0, int(top_k))
    step = max(1, budget // max(1, T * engine.config.vocab_size))
    chunks = (engine.read_out(hidden[start:start + step]) for start in range(0, len(read), step))
    if final_logits is not None:
        chunks = itertools.chain(chunks, [final_logits[None]])
    prob, rank, tops, ids = [], [], [], []
    for logits in chunks:
        logits = logits.float()                                                              # (n, T, V)
        norm = torch.logsumexp(logits, dim=-1, keepdim=True)                                 # (n, T, 1)
        picked = logits.gather(-1, chosen.expand(logits.shape[0], T)[..., None])             # (n, T, 1)
        prob.append(torch.exp(picked - norm)[..., 0])
        rank.append((logits > picked).sum(-1))
        top_l, top_i = logits.topk(min(k, logits.shape[-1]), dim=-1)                         # (n, T, k)
        tops.append(torch.exp(top_l - norm))
        ids.append(top_i)
    top_probs, top_ids = _joined(tops, np.float32), _joined(ids, np.int64)
    piece = engine.tokenizer.id_to_piece
    names = {i: piece(i) for i in np.unique(top_ids).tolist()}
    table = [[list(zip([names[i] for i in row_ids], row_probs)) for row_ids, row_probs in
              zip(step_ids, step_probs)] for step_ids, step_probs in zip(top_ids.tolist(), top_probs.tolist())]
    return Lens(sites=[s for s, _ in points], top_k=table, chosen_prob=_joined(prob, np.float32),
                chosen_rank=_joined(rank, np.int32), top_ids=top_ids, top_probs=top_probs,
                points=[p for _, p in points])


def _joined(parts: list, dtype) -> np.ndarray:
    """Chunks of (n, T, ...) -> (T, n_sites, ...) numpy."""
    return torch.cat(parts).transpose(0, 1).cpu().numpy().astype(dtype)


def lens_of(tr, out, call) -> Lens:
    """The analysis (analyses.py): out's lens from the call's own recorder, or, for a translation made
    earlier, from one teacher-forced pass over its output under its head_mask and encoder_layer
    (beam and forced decoding read such a pass anyway; cached greedy decoding equals it, tested)."""
    if call.recorder is not None:
        return read_lens(tr.engine, call.recorder, out.output_ids, call.top_k, final_logits=call.logits)
    if out.hooks:
        raise ValueError("lens of a translation made with hooks=: ask translate(..., lens=True, hooks=...) "
                         "so the hooks run in the pass it reads")
    e = tr.engine
    points = {point for _, point in lens_points(e.config.n_decoder_layers)}
    source = torch.tensor([out.source_ids], dtype=torch.long, device=e.device)               # (1, S)
    fed = torch.tensor([[e.start_id] + list(out.output_ids[:-1])], dtype=torch.long, device=e.device)
    with torch.inference_mode(), capture(attention=False, residual=points) as recorder, \
            intervening(None, tr.gates(out.head_mask)):
        logits = e.teacher_forced(source, None, fed, out.encoder_layer)[0]                   # (T, V)
    return read_lens(e, recorder, out.output_ids, call.top_k, final_logits=logits)
