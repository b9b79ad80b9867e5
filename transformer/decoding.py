"""Greedy, beam and forced decoding. All incremental decoding uses the model's KV cache."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .model import BOS_ID, EOS_ID, PAD_ID, Transformer


@dataclass
class Hypothesis:
    pieces: list            # output pieces so far (ids until the translator names them)
    score: float            # sum log p / ((5 + len) / 6) ** length_penalty
    parent: int | None      # index into the previous step's list (None at step 0)
    finished: bool          # ended with </s>
    log_prob: float = 0.0   # sum log p, without the length penalty


def length_normalizer(length: int, length_penalty: float) -> float:
    return ((5.0 + length) / 6.0) ** length_penalty


@torch.no_grad()
def greedy_decode(model: Transformer, source, source_keep, max_len: int, prefix=None,
                  encoder_layer: int | None = None):
    """Batched greedy decoding. Returns (tokens (B, T) padded with PAD, step logits list[(B, V)]).

    prefix: output ids forced at the first steps (every row), fed through the same cached loop,
    so their logits are the model's own for them; argmax takes over after the prefix.
    encoder_layer: decode from that encoder layer's output (DecoderLens; model.encode)."""
    memory = model.encode(source, source_keep, encoder_layer)        # (B, S, D)
    B = source.shape[0]
    cache = model.new_cache()
    last = torch.full((B,), BOS_ID, dtype=torch.long, device=source.device)
    finished = torch.zeros(B, dtype=torch.bool, device=source.device)
    produced, step_logits = [], []
    forced = len(prefix) if prefix else 0
    for position in range(max_len):
        logits = model.decode_step(last, position, memory, source_keep, cache)   # (B, V)
        step_logits.append(logits)
        token = logits.argmax(-1) if position >= forced else torch.full_like(last, int(prefix[position]))
        token = torch.where(finished, torch.full_like(token, PAD_ID), token)
        produced.append(token)
        finished |= token == EOS_ID
        if bool(finished.all()):
            break
        last = token
    return torch.stack(produced, dim=1), step_logits


@torch.no_grad()
def forced_logits(model: Transformer, source, source_keep, output_ids: list[int]):
    """One teacher-forced pass feeding <s> + output_ids[:-1]. Returns logits (T, V)."""
    fed = torch.tensor([[BOS_ID] + list(output_ids[:-1])], dtype=torch.long, device=source.device)
    return model(source, source_keep, fed)[0]


@dataclass
class BeamResult:
    output_ids: list                     # best hypothesis, ends with </s> unless max_len stopped it
    score: float
    history: list = field(default_factory=list)   # per step: list[Hypothesis] (only when recorded)
    final: tuple | None = None           # (step, index) of the returned hypothesis in history


def prefix_history(prefix: list, finished_at_end: bool) -> list[list[Hypothesis]]:
    """Beam history of forced prefix steps: one hypothesis per step (the prefix so far), score and
    log_prob 0 (given, not scored), parent None at step 0 and 0 after."""
    return [[Hypothesis(list(prefix[: t + 1]), 0.0, None if t == 0 else 0,
                        finished_at_end and t == len(prefix) - 1, 0.0)] for t in range(len(prefix))]


@torch.no_grad()
def beam_search(model: Transformer, source, source_keep, beam_size: int, max_len,
                length_penalty: float = 1.0, record: bool = False, prefix=None,
                encoder_layer: int | None = None) -> list[BeamResult]:
    """Batched beam search over B sentences with K beams each (flattened to B*K rows).

    max_len: an int, or one per sentence, so a batch gives each sentence what a single call would.
    prefix: output ids every hypothesis starts with (every sentence). They are fed once through the
    cache, then the search starts from that state. Like generate() with decoder_input_ids, the prefix
    is given, not scored: scores sum the log p of the pieces after it, and the length penalty counts
    those pieces. max_len counts the prefix. With record, history holds one entry per prefix step
    (prefix_history), then the search's steps, so history[t] is output step t.
    """
    B, K = source.shape[0], beam_size
    limits = [max_len] * B if isinstance(max_len, int) else list(max_len)
    max_len = max(limits)
    prefix = [int(i) for i in prefix] if prefix else []
    P = len(prefix)
    if P and (prefix[-1] == EOS_ID or P >= max_len):        # nothing left to search
        history = prefix_history(prefix, prefix[-1] == EOS_ID) if record else []
        return [BeamResult(list(prefix), 0.0, history, (P - 1, 0) if record else None) for _ in range(B)]
    unfinished_at_limit: list[list[tuple]] = [[] for _ in range(B)]
    device = source.device
    memory = model.encode(source, source_keep, encoder_layer).repeat_interleave(K, dim=0)  # (B*K, S, D)
    keep = None if source_keep is None else source_keep.repeat_interleave(K, dim=0)
    cache = model.new_cache()
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0                                  # all beams start as the same <s>
    alive = torch.full((B, K, 0), BOS_ID, dtype=torch.long, device=device)          # (B, K, t)
    last = torch.full((B * K,), BOS_ID, dtype=torch.long, device=device)
    for position, token_id in enumerate(prefix):       # the forced prefix, once, on every row
        model.decode_step(last, position, memory, keep, cache)
        last = torch.full_like(last, token_id)
    if P:
        alive = torch.tensor(prefix, dtype=torch.long, device=device).expand(B, K, P).clone()
    finished: list[list[tuple]] = [[] for _ in range(B)]   # (norm score, log_prob, ids, step, index)
    done = [False] * B
    history: list[list[Hypothesis]] = prefix_history(prefix, False) if record else []
    for position in range(P, max_len):
        logits = model.decode_step(last, position, memory, keep, cache)       # (B*K, V)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        V = log_probs.shape[-1]
        candidates = (scores[:, :, None] + log_probs.view(B, K, V)).view(B, K * V)
        top_scores, top_index = candidates.topk(min(2 * K, K * V), dim=1)         # (B, 2K)
        beam_index, token = top_index // V, top_index % V
        is_eos = token == EOS_ID
        norm = length_normalizer(position + 1 - P, length_penalty)
        step_record: list[Hypothesis] = []
        # Candidates that end here, within the best K, become finished hypotheses.
        for b, j in is_eos[:, :K].nonzero().tolist():
            if done[b]:
                continue
            raw = float(top_scores[b, j])
            if raw == float("-inf"):
                continue
            ids = alive[b, beam_index[b, j]].tolist() + [EOS_ID]
            finished[b].append((raw / norm, raw, ids, position, K + len(step_record) if record else None))
            if record:
                parent = None if position == 0 else int(beam_index[b, j])
                step_record.append(Hypothesis(ids, raw / norm, parent, True, raw))
        # The best K candidates that do not end stay alive (stable sort keeps score order).
        order = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :K]  # (B, K)
        new_scores = top_scores.gather(1, order)
        new_beam = beam_index.gather(1, order)
        new_token = token.gather(1, order)
        alive = torch.cat([alive.gather(1, new_beam[:, :, None].expand(-1, -1, alive.shape[2])),
                           new_token[:, :, None]], dim=2)
        scores = new_scores
        flat = (new_beam + torch.arange(B, device=device)[:, None] * K).view(-1)
        model.reorder_cache(cache, flat)
        last = new_token.view(-1)
        if record:
            kept = [Hypothesis(alive[0, k].tolist(), float(scores[0, k]) / norm,
                               None if position == 0 else int(new_beam[0, k]), False, float(scores[0, k]))
                    for k in range(K)]
            # alive first (indices 0..K-1), then those that finished at this step
            history.append(kept + step_record)
        for b in range(B):
            if not done[b] and len(finished[b]) >= K:
                done[b] = True
            elif not done[b] and position + 1 >= limits[b]:
                # this sentence's max_len is reached: its unfinished hypotheses compete too
                for k in range(K):
                    raw = float(scores[b, k])
                    if raw != float("-inf"):
                        unfinished_at_limit[b].append((raw / norm, raw, alive[b, k].tolist(), position, k))
                done[b] = True
        if all(done):
            break
    results = []
    for b in range(B):
        pool = finished[b] + unfinished_at_limit[b]
        best = max(pool, key=lambda item: item[0])
        results.append(BeamResult(best[2], best[0], history if record else [],
                                  (best[3], best[4]) if record else None))
    return results
