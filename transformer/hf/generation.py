"""Greedy and beam decoding for Hugging Face models, with the KV cache, step by step.

Written out (rather than calling `model.generate`) so every step's logits, attention and
beam hypotheses can be shown. The settings come from the model's own generation config
through the same helpers `generate()` uses (transformers is pinned), so the logits
processors (forced BOS/EOS, bad words, min length, no-repeat n-grams, ...) and the length
rules are exactly generate's; the beam loop mirrors `GenerationMixin._beam_search`.
Tests check both against `generate()` on every family.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from ..decoding import Hypothesis, prefix_history

NEG = -1.0e9                                   # generate's "impossible" score


@dataclass
class Plan:
    """One call's decoding settings, resolved as generate() would resolve them."""
    processors: object                         # LogitsProcessorList
    eos: torch.Tensor | None                   # (n_eos,) ids that end a hypothesis
    pad: int
    start: int                                 # decoder start token
    max_length: int                            # generate's: the start token plus the outputs
    num_beams: int
    length_penalty: float
    early_stopping: bool | str


def make_plan(model, source: torch.Tensor, mask: torch.Tensor, num_beams: int, max_len: int | None,
              length_penalty: float | None, overrides: dict, prompt: int = 1) -> Plan:
    """source, mask (B, S). max_len caps the outputs (</s> included), like max_new_tokens.

    prompt: the decoder input generate() starts from (the start token, then a forced prefix); the
    logits processors see it as generate(decoder_input_ids=...) would. The length budget does not
    move with it: max_length is the same as without a prefix (the prefix counts as output)."""
    kwargs = dict(overrides, num_beams=num_beams, do_sample=False)
    if max_len is not None:
        kwargs["max_new_tokens"] = int(max_len)
    if length_penalty is not None:
        kwargs["length_penalty"] = float(length_penalty)
    default_max = model.generation_config.max_length is None
    default_min = model.generation_config.min_length is None
    config, _ = model._prepare_generation_config(None, **kwargs)
    model._prepare_special_tokens(config, True, device=source.device, batch_size=source.shape[0])
    config = model._prepare_generated_length(config, default_max, default_min, "input_ids", 1, source)
    processors = model._get_logits_processor(config, input_ids_seq_length=prompt, encoder_input_ids=source,
                                             device=source.device, model_kwargs={"attention_mask": mask})
    pad = config._pad_token_tensor
    return Plan(processors, config._eos_token_tensor, int(pad) if pad is not None else -1,
                int(config._decoder_start_token_tensor), int(config.max_length), num_beams,
                float(config.length_penalty), config.early_stopping)


def new_cache(model) -> EncoderDecoderCache:
    text = model.config.get_text_config(decoder=True)
    return EncoderDecoderCache(DynamicCache(config=text), DynamicCache(config=text))


def step_logits(model, tokens, memory: BaseModelOutput, mask, cache) -> torch.Tensor:
    """Feed one token per row (B, 1) with the cache; returns float32 logits (B, V), a copy."""
    out = model(encoder_outputs=memory, attention_mask=mask, decoder_input_ids=tokens,
                past_key_values=cache, use_cache=True, return_dict=True)
    return out.logits[:, -1].to(copy=True, dtype=torch.float32)


def _ends(plan: Plan, tokens: torch.Tensor) -> torch.Tensor:
    if plan.eos is None:
        return torch.zeros_like(tokens, dtype=torch.bool)
    return torch.isin(tokens, plan.eos)


@torch.no_grad()
def greedy(model, memory: BaseModelOutput, mask, plan: Plan, prefix=None):
    """generate(num_beams=1, do_sample=False). Returns (outputs (B, T), raw logits list[(B, V)]);
    a finished row is padded with pad ids, like generate's.

    prefix: output ids forced at the first steps (generate(decoder_input_ids=[start] + prefix)),
    fed one by one through the cache so each has the model's raw logits; then greedy goes on."""
    B = mask.shape[0]
    cache = new_cache(model)
    sequences = torch.full((B, 1), plan.start, dtype=torch.long, device=mask.device)    # (B, 1 + t)
    unfinished = torch.ones(B, dtype=torch.bool, device=mask.device)
    raw = []
    forced = len(prefix) if prefix else 0
    for t in range(plan.max_length - 1):
        logits = step_logits(model, sequences[:, -1:], memory, mask, cache)               # (B, V)
        raw.append(logits)
        if t < forced:
            token = torch.full((B,), int(prefix[t]), dtype=torch.long, device=mask.device)
        else:
            token = plan.processors(sequences, logits.clone()).argmax(-1)
        if plan.eos is not None:
            token = torch.where(unfinished, token, torch.full_like(token, plan.pad))
        sequences = torch.cat([sequences, token[:, None]], dim=1)
        unfinished &= ~_ends(plan, token)
        if not bool(unfinished.any()):
            break
    return sequences[:, 1:], raw


@dataclass
class BeamResult:
    output_ids: list                 # best hypothesis, start token excluded
    score: float                     # sum log p / len ** length_penalty (generate's formula)
    history: list                    # per step: list[Hypothesis] (alive first, then finished); B = 1 only
    final: tuple | None              # (step, index) of the returned hypothesis in history


def _gather(tensor, index):
    """tensor (B, N, ...) gathered along dim 1 by index (B, M)."""
    while index.dim() < tensor.dim():
        index = index.unsqueeze(-1)
    return torch.take_along_dim(tensor, index, dim=1)


@torch.no_grad()
def beam_search(model, memory: BaseModelOutput, mask, plan: Plan, record: bool = False,
                prefix=None) -> list[BeamResult]:
    """generate(num_beams=K), vectorised over B sentences like GenerationMixin._beam_search.

    prefix: output ids every hypothesis starts with, as generate(decoder_input_ids=[start] + prefix):
    fed once (one pass over the prompt fills the cache), not scored, and the length penalty counts
    the pieces after it. With record, history holds one entry per prefix step (prefix_history),
    then the search's, so history[t] is output step t."""
    B, K, L = mask.shape[0], plan.num_beams, plan.max_length
    device = mask.device
    prefix = [int(i) for i in prefix] if prefix else []
    P = len(prefix)
    if P and (bool(_ends(plan, torch.tensor(prefix[-1:], device=device))[0]) or 1 + P >= L):    # nothing left to search
        history = prefix_history(prefix, True) if record else []
        return [BeamResult(list(prefix), 0.0, history, (P - 1, 0) if record else None) for _ in range(B)]
    keep = max(2, 1 + (len(plan.eos) if plan.eos is not None else 0)) * K
    top_k_mask = torch.arange(keep, device=device) < K
    memory = BaseModelOutput(last_hidden_state=memory.last_hidden_state.repeat_interleave(K, dim=0))
    mask = mask.repeat_interleave(K, dim=0)
    cache = new_cache(model)
    running = torch.full((B, K, L), plan.pad, dtype=torch.long, device=device)           # (B, K, L)
    running[:, :, 0] = plan.start
    if P:
        running[:, :, 1:1 + P] = torch.tensor(prefix, dtype=torch.long, device=device)
    running_scores = torch.zeros(B, K, device=device)
    running_scores[:, 1:] = NEG                       # only the first beam is live at the start
    sequences, scores = running.clone(), torch.full((B, K), NEG, device=device)
    lengths = torch.zeros(B, K, dtype=torch.long, device=device)        # outputs of each finished one
    tags = torch.full((B, K), -1, dtype=torch.long, device=device)      # step * keep + index in history
    finished = torch.zeros(B, K, dtype=torch.bool, device=device)
    improvable = torch.ones(B, 1, dtype=torch.bool, device=device)
    history = prefix_history(prefix, False) if record else []
    for cur in range(1 + P, L):                       # cur: tokens so far, the start token included
        flat = running[:, :, :cur].reshape(B * K, cur)
        fed = flat if cur == 1 + P else flat[:, -1:]  # the first pass takes the whole prompt
        logits = step_logits(model, fed, memory, mask, cache)                              # (B*K, V)
        log_probs = plan.processors(flat, torch.log_softmax(logits, dim=-1))
        V = log_probs.shape[-1]
        total = (log_probs.view(B, K, V) + running_scores[:, :, None]).view(B, K * V)
        top_scores, top_index = total.topk(keep, dim=1)                                   # (B, keep)
        parent, token = top_index // V, top_index % V
        candidates = _gather(running, parent)                                              # (B, keep, L)
        candidates[:, :, cur] = token
        stops = _ends(plan, token) | (cur + 1 >= L)                                        # (B, keep)
        # the best K that go on
        go_on = top_scores + stops.float() * NEG
        chosen = go_on.topk(K, dim=1).indices                                              # (B, K)
        running, running_scores = _gather(candidates, chosen), _gather(go_on, chosen)
        chosen_parent = _gather(parent, chosen)
        # those of the best K that stop here compete with the finished ones
        normalized = top_scores / ((cur - P) ** plan.length_penalty)
        full = finished.all(dim=1, keepdim=True) & (plan.early_stopping is True)
        normalized = normalized + full.float() * NEG + (~improvable).float() * NEG
        normalized = normalized + (~(stops & top_k_mask)).float() * NEG
        new_tags = torch.full((B, keep), -1, dtype=torch.long, device=device)
        if record:
            step = _record_step(history, cur, candidates, running, _gather(top_scores, chosen), chosen_parent,
                                normalized, parent, plan.length_penalty, K, P)
            for index, j in step:
                new_tags[0, j] = (cur - 1) * keep + index
        merged = torch.topk(torch.cat([scores, normalized], dim=1), K, dim=1).indices
        sequences = _gather(torch.cat([sequences, candidates], dim=1), merged)
        scores = _gather(torch.cat([scores, normalized], dim=1), merged)
        lengths = _gather(torch.cat([lengths, torch.full_like(stops, cur, dtype=torch.long)], dim=1), merged)
        tags = _gather(torch.cat([tags, new_tags], dim=1), merged)
        finished = _gather(torch.cat([finished, stops & top_k_mask], dim=1), merged)
        offset = torch.arange(B, device=device)[:, None] * K
        cache.reorder_cache((chosen_parent + offset).view(-1))
        # generate's stopping rule: can a running beam still beat the worst finished one?
        if plan.early_stopping == "never" and plan.length_penalty > 0.0:
            best_length = L - 1 - P
        else:
            best_length = cur - P
        best_running = running_scores[:, :1] / (best_length ** plan.length_penalty)
        worst = torch.where(finished, scores.min(dim=1, keepdim=True).values, torch.full_like(scores, NEG))
        improvable = improvable & (best_running > worst).any(dim=-1, keepdim=True)
        open_beams = not (bool(finished.all()) and plan.early_stopping is True)
        if not (bool(improvable.any()) and open_beams and not bool(stops.all())):
            break
    results = []
    for b in range(B):
        n = int(lengths[b, 0])
        final = divmod(int(tags[b, 0]), keep) if record and int(tags[b, 0]) >= 0 else None
        results.append(BeamResult(sequences[b, 0, 1:1 + n].tolist(), float(scores[b, 0]),
                                  history if record else [], final))
    return results


def _record_step(history, cur, candidates, running, running_raw, running_parent, normalized, parent,
                 length_penalty, K, P: int = 0) -> list[tuple[int, int]]:
    """Append step cur's hypotheses (sentence 0): the K alive, then those that finished here.
    Returns (index in this step's list, candidate column) for the finished ones. P: prefix pieces
    (not counted by the length penalty)."""
    n = cur - P
    alive = [Hypothesis(running[0, k, 1:cur + 1].tolist(), float(running_raw[0, k]) / n ** length_penalty,
                        None if cur == 1 else int(running_parent[0, k]), False, float(running_raw[0, k]))
             for k in range(K)]
    ended = []
    for j in range(normalized.shape[1]):
        value = float(normalized[0, j])
        if value > NEG / 2:
            ended.append((K + len(ended), j))
            alive.append(Hypothesis(candidates[0, j, 1:cur + 1].tolist(), value,
                                    None if cur == 1 else int(parent[0, j]), True,
                                    value * n ** length_penalty))
    history.append(alive)
    return ended
