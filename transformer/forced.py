"""One batched teacher-forced pass over many (source, fed, output) rows, for every engine.

Diagnosis (many deletions of one sentence), the faithfulness tests (many perturbed sources) and
corpus statistics all force known outputs on many sources. This is the one place that packs such
rows into padded batches (rows of similar lengths together, at most `budget` padded tokens per
pass), runs `tr.engine.teacher_forced` without capture, and hands each batch's log-probabilities
to a `reduce` function, so that only what a caller keeps leaves the batch: the full (B, T, V)
distributions of a long sentence with a 58k vocabulary are hundreds of MB.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .capture import no_capture
from .interventions import intervening


@dataclass
class Row:
    """One forced pass: the source ids, the decoder's input (start piece + output[:-1]) and the
    output ids scored at each step."""
    source_ids: list
    fed_ids: list
    output_ids: list


@dataclass
class Batch:
    """Padded rows on the translator's device. Decoder padding sits after every real position, so
    the causal mask keeps real positions exact; gold is 0 at padded steps."""
    rows: list                    # indices into the caller's rows
    log_probs: torch.Tensor       # (B, T, V) float32
    gold: torch.Tensor            # (B, T) long
    lengths: list                 # real output length of each row


def default_budget(tr) -> int:
    """Padded tokens (source + target) per forward pass. On a CPU small passes stay in cache: on
    2 cores, en-de val in float32, 2,000 gave 27.1 sentences/s of forced passes against 22.7 for
    6,000 and 19.2 for 12,000 (a throwaway timer over 400 val sentences); with today's diagnosis
    (session 25, `runs/s25/budget.py`: diagnose_items on 400 val sentences, alternating, two rounds)
    1,200 took 15.6-15.7 s against 16.8-17.1 s for 2,000, 15.4-16.2 s for 1,400 and 15.5-16.4 s for 1,000."""
    return 60000 if tr.device.type == "cuda" else 1200


def plan_chunks(rows: list, budget: int) -> list[list[int]]:
    """Row indices grouped by similar (source, fed) lengths, each group's padded size <= budget
    (a single row larger than the budget is a group of its own)."""
    order = sorted(range(len(rows)), key=lambda r: (len(rows[r].source_ids), len(rows[r].fed_ids)))
    chunks, current, s_max, t_max = [], [], 0, 0
    for r in order:
        s, t = max(s_max, len(rows[r].source_ids)), max(t_max, len(rows[r].fed_ids))
        if current and (s + t) * (len(current) + 1) > budget:
            chunks.append(current)
            current, s, t = [], len(rows[r].source_ids), len(rows[r].fed_ids)
        current.append(r)
        s_max, t_max = s, t
    if current:
        chunks.append(current)
    return chunks


def _pad(tr, rows: list, chunk: list[int]) -> tuple[torch.Tensor, ...]:
    """(source, keep) as the engine pads sources (Engine.batch); fed and gold padded after each row."""
    src, keep = tr.engine.batch([rows[r].source_ids for r in chunk])                     # (B, S) each
    T = max(len(rows[r].fed_ids) for r in chunk)
    fed = torch.full((len(chunk), T), tr.engine.pad_id, dtype=torch.long)
    gold = torch.zeros((len(chunk), T), dtype=torch.long)
    for b, r in enumerate(chunk):
        fed[b, : len(rows[r].fed_ids)] = torch.tensor(rows[r].fed_ids)
        gold[b, : len(rows[r].output_ids)] = torch.tensor(rows[r].output_ids)
    return src, keep, fed.to(tr.device), gold.to(tr.device)


@torch.inference_mode()
def forced_pass(tr, rows: list, reduce: Callable[[Batch], list], gates=None, budget: int | None = None,
                bf16: bool = False) -> list:
    """reduce(batch) -> one result per row of the batch, in batch order; returns the results in
    the order of `rows`. rows: Row or (source_ids, fed_ids, output_ids) tuples. bf16: the passes
    under bfloat16 autocast (about 1.8x faster on a CPU with AVX512-BF16; scores move slightly)."""
    rows = [r if isinstance(r, Row) else Row(*r) for r in rows]
    results: list = [None] * len(rows)
    autocast = torch.autocast(tr.device.type, dtype=torch.bfloat16, enabled=bf16)
    with no_capture(), intervening(None, gates), autocast:          # gates: head_mask, as hooks on z
        for chunk in plan_chunks(rows, budget or default_budget(tr)):
            src, keep, fed, gold = _pad(tr, rows, chunk)
            logits = tr.engine.teacher_forced(src, keep, fed)                             # (B, T, V)
            batch = Batch(chunk, torch.log_softmax(logits.float(), dim=-1), gold,
                          [len(rows[r].output_ids) for r in chunk])
            for r, value in zip(chunk, reduce(batch)):
                results[r] = value
    return results


def chosen_log_probs(batch: Batch) -> list[np.ndarray]:
    """log p(output_t | source, output<t) per row, (T,) float64: the usual reduce."""
    lp = batch.log_probs.gather(-1, batch.gold.unsqueeze(-1)).squeeze(-1).cpu().numpy()   # (B, T)
    return [lp[b, :n].astype(np.float64) for b, n in enumerate(batch.lengths)]
