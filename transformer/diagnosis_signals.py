"""Raw signals behind `diagnose` (transformer/diagnosis.py), for any batch of (source, output).

All of them come from teacher-forced passes, batched across sentences and variants:
- log p(y_t | x, y<t): the model's confidence in each output piece under the real source;
- log p(y_t | null, y<t) with a "null" source (the source's special pieces only, e.g. `</s>`):
  what the decoder predicts from the prefix alone. pmi_t = log p(y_t|x) - log p(y_t|null) is
  contrastive conditioning on the whole source: how much the source supports piece t;
- for each source word w, log p(y_t | x without w): contrastive conditioning (Vamvas and
  Sennrich 2022). drop_w = sum_t [log p(y_t|x) - log p(y_t|x\\w)]; a word whose deletion
  costs the translation nothing was probably not translated.
Everything is local to the call (thread-safe); the passes run on the translator's device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .capture import no_capture
from .faithfulness import _hf_gating, _special_ids

WORD_START = ("\u2581", "\u0120")          # SentencePiece "▁", byte-level BPE "Ġ"


@dataclass
class Item:
    """One sentence to diagnose: ids as the model sees them, pieces as the user sees them."""
    source_ids: list
    fed_ids: list                 # start token + output_ids[:-1]
    output_ids: list
    source_pieces: list
    output_pieces: list


@dataclass
class Signals:
    log_p: np.ndarray             # (T,) log p(y_t | x, y<t)
    log_p_null: np.ndarray        # (T,) log p(y_t | null source, y<t)
    words: list                   # source word groups: lists of source positions
    deletion: np.ndarray          # (W, T) log p(y_t | x without word w)


def word_groups(pieces: list, ids: list, special: set) -> list[list[int]]:
    """Source positions grouped into words: a piece starts a word after a special piece, at a
    "▁"/"Ġ" marker (or, for tokenizers without markers, unless it continues with "##" / "@@")."""
    content = [str(p) for p, i in zip(pieces, ids) if i not in special]
    markers = any(p.startswith(WORD_START) for p in content)
    groups: list[list[int]] = []
    for j, (piece, idx) in enumerate(zip(pieces, ids)):
        piece = str(piece)
        if markers:
            starts = piece.startswith(WORD_START)
        else:
            starts = not (piece.startswith("##") or (j > 0 and str(pieces[j - 1]).endswith("@@")))
        if j == 0 or idx in special or ids[j - 1] in special or starts:
            groups.append([j])
        else:
            groups[-1].append(j)
    return groups


def _pad_id(tr) -> int:
    hf = getattr(tr.tokenizer, "hf", None)
    if hf is None:
        from .model import PAD_ID
        return PAD_ID
    return hf.pad_token_id if hf.pad_token_id is not None else 0


def default_budget(tr) -> int:
    """Padded tokens (source + target) per forward pass. On a CPU small passes stay in cache: on
    2 cores, en-de val in float32, 2,000 gave 27.1 sentences/s of forced passes against 22.7 for
    6,000 and 19.2 for 12,000 (a throwaway timer over 400 val sentences)."""
    return 60000 if tr.device.type == "cuda" else 2000


@torch.inference_mode()
def forced_log_probs(tr, rows: list[tuple[list, list, list]], gates=None, budget: int | None = None,
                     bf16: bool = False) -> list[np.ndarray]:
    """rows: (source_ids, fed_ids, output_ids). One log p(output_t) array (T,) per row, from
    padded batched teacher-forced passes (rows of similar lengths together). bf16: the passes
    under bfloat16 autocast (about 1.8x faster on a CPU with AVX512-BF16; scores move slightly)."""
    budget = budget or default_budget(tr)
    hf = hasattr(tr, "family")
    pad = _pad_id(tr)
    order = sorted(range(len(rows)), key=lambda r: (len(rows[r][0]), len(rows[r][1])))
    results: list[np.ndarray | None] = [None] * len(rows)
    chunks, current, s_max, t_max = [], [], 0, 0
    for r in order:
        s, t = max(s_max, len(rows[r][0])), max(t_max, len(rows[r][1]))
        if current and (s + t) * (len(current) + 1) > budget:
            chunks.append(current)
            current, s, t = [], len(rows[r][0]), len(rows[r][1])
        current.append(r)
        s_max, t_max = s, t
    if current:
        chunks.append(current)
    autocast = torch.autocast(tr.device.type, dtype=torch.bfloat16, enabled=bf16)
    with no_capture(), _hf_gating(hf, gates), autocast:
        for chunk in chunks:
            S = max(len(rows[r][0]) for r in chunk)
            T = max(len(rows[r][1]) for r in chunk)
            src = torch.full((len(chunk), S), pad, dtype=torch.long)
            keep = torch.zeros((len(chunk), S), dtype=torch.bool)
            fed = torch.full((len(chunk), T), pad, dtype=torch.long)
            gold = torch.zeros((len(chunk), T), dtype=torch.long)
            for b, r in enumerate(chunk):
                source_ids, fed_ids, output_ids = rows[r]
                src[b, : len(source_ids)] = torch.tensor(source_ids)
                keep[b, : len(source_ids)] = True
                fed[b, : len(fed_ids)] = torch.tensor(fed_ids)
                gold[b, : len(output_ids)] = torch.tensor(output_ids)
            src, keep, fed, gold = (x.to(tr.device) for x in (src, keep, fed, gold))
            if hf:       # decoder padding sits after every real position: the causal mask hides it
                logits = tr.model(input_ids=src, attention_mask=keep.long(), decoder_input_ids=fed,
                                  use_cache=False, return_dict=True).logits
            else:
                logits = tr.model(src, keep, fed, gates=gates)                          # (B, T, V)
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, gold.unsqueeze(-1)).squeeze(-1)
            lp = lp.cpu().numpy()
            for b, r in enumerate(chunk):
                results[r] = lp[b, : len(rows[r][2])].astype(np.float64)
    return results


def compute_signals(tr, items: list[Item], gates=None, budget: int | None = None, bf16: bool = False) -> list[Signals]:
    """Full source, null source and every one-word deletion, for every item, in shared batches.
    Special pieces (</s>, language codes) are deleted like words: scored like any piece."""
    special = _special_ids(tr)
    rows, plans = [], []
    for it in items:
        null = [i for i in it.source_ids if i in special] or [it.source_ids[-1]]
        words = word_groups(it.source_pieces, it.source_ids, special)
        start = len(rows)
        rows.append((list(it.source_ids), list(it.fed_ids), list(it.output_ids)))
        rows.append((null, list(it.fed_ids), list(it.output_ids)))
        for group in words:
            drop = set(group)
            kept = [i for j, i in enumerate(it.source_ids) if j not in drop] or null
            rows.append((kept, list(it.fed_ids), list(it.output_ids)))
        plans.append((start, words))
    lps = forced_log_probs(tr, rows, gates, budget, bf16)
    out = []
    for (start, words), it in zip(plans, items):
        deletion = np.stack(lps[start + 2: start + 2 + len(words)]) if words else np.zeros((0, len(it.output_ids)))
        out.append(Signals(lps[start], lps[start + 1], words, deletion))
    return out
