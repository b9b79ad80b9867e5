"""`python -m transformer analyze`: which heads matter, over a corpus (issue 10, item 5).

For every head (kind, layer, head) of a model directory of ours, on one split:
  1. loss_change: teacher-forced token-level mean cross-entropy (nats, no label smoothing) with that
     head alone ablated, minus the base loss. Ablation means exactly `translate(head_mask=...)`: the
     head's slice of softmax(QK^T)V is zeroed before the output projection (bias kept). One batched
     pass over length-bucketed batches per head; decoder heads reuse the unablated encoder output.
  2. michel_importance (Michel et al., 2019): a gate xi_h = 1 multiplies each head's output;
     I_h = E_x |dL(x)/dxi_h|, x a sentence, L(x) its summed token NLL. Each sentence gets its own gate
     row, so one backward pass per batch gives per-sentence gradients. `normalised` divides each
     (kind, layer) row of heads by its L2 norm, as in the paper.
  3. pruning_curve: greedy sacreBLEU on the first `bleu_sentences` sentences while heads are removed
     least important first (global order of the normalised Michel importance).

Work is saved to a resume file after every unit (Michel pass, head, pruning point), and a rerun skips
what is done. The result is `head_importance.json` in the model directory (see `load_head_importance`).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..capture import KINDS, normalize_head_mask
from ..interventions import gate_hooks, intervening
from ..training.data import REPO_ROOT, collate, read_split, token_batches
from ..training.evaluate import score_texts
from ..model import PAD_ID, Transformer

RESULT_FILE = "head_importance.json"
PRUNING_NOTE = ("removed lists the heads removed since the previous point (incremental); the heads off at a "
                "point are the union of `removed` over it and every earlier point. Order: ascending "
                "normalised Michel importance over all kinds and layers, ties by kind, layer, head.")


def load_head_importance(model_dir) -> dict | None:
    """The parsed head_importance.json of a model directory, or None when there is none
    (including hub ids and Hugging Face directories). A corrupt file raises ValueError naming it."""
    path = Path(str(model_dir)) / RESULT_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("heads"), dict):
        raise ValueError(f"{path}: no 'heads' table; not a head_importance file")
    return data


# ---- the corpus --------------------------------------------------------------------------------
class Corpus:
    """A split encoded exactly as `translate(text, target=reference)` encodes it, in batches."""

    def __init__(self, tr, data_dir, split: str, limit: int | None = None, max_tokens: int = 3000):
        sources = read_split(data_dir, split, tr.source_lang)
        references = read_split(data_dir, split, tr.target_lang)
        if len(sources) != len(references):
            raise ValueError(f"{data_dir}: {split} has {len(sources)} {tr.source_lang} lines but "
                             f"{len(references)} {tr.target_lang} lines")
        if limit is not None:
            sources, references = sources[:limit], references[:limit]
        self.sources, self.references = sources, references
        limit_t = tr.config.max_target_len - 1
        src = [tr.encode_source(s)[0] for s in sources]
        tgt = [tr.engine.tokenizer.encode_ids(t)[:limit_t] for t in references]
        order = token_batches(src, tgt, max_tokens, torch.Generator().manual_seed(0))
        self.batches = [tuple(t.to(tr.device) for t in collate(b, src, tgt)) for b in order]
        self.tokens = sum(len(t) + 1 for t in tgt)           # scored pieces, </s> included

    def __len__(self) -> int:
        return len(self.sources)


def layer_counts(cfg) -> dict[str, int]:
    return {"encoder_self": cfg.n_encoder_layers, "decoder_self": cfg.n_decoder_layers,
            "cross": cfg.n_decoder_layers}


def all_heads(cfg) -> list[tuple[str, int, int]]:
    return [(k, l, h) for k, n in layer_counts(cfg).items() for l in range(n) for h in range(cfg.n_heads)]


def head_key(head) -> str:
    return "{}/{}/{}".format(*head)


def _summed_nll(logits, gold):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), gold.reshape(-1),
                           ignore_index=PAD_ID, reduction="sum")


@torch.inference_mode()
def encoder_memories(model: Transformer, corpus: Corpus) -> list[torch.Tensor]:
    """The unablated encoder output of every batch: decoder-head ablations start from it."""
    return [model.encode(src, src != PAD_ID) for src, _, _ in corpus.batches]


@torch.inference_mode()
def corpus_loss(model: Transformer, corpus: Corpus, gates=None, memories=None) -> float:
    """Token-level mean cross-entropy over the corpus. gates: as normalize_head_mask returns, applied
    as translate applies head_mask (hooks on z). memories: reuse these encoder outputs (only valid
    when no encoder head is gated)."""
    total = 0.0
    with intervening(None, gates):
        for b, (src, fed, gold) in enumerate(corpus.batches):
            keep = src != PAD_ID
            if memories is not None:
                logits = model.decode(fed, memories[b], keep, fed != PAD_ID)
            else:
                logits = model(src, keep, fed, fed != PAD_ID)
            total += float(_summed_nll(logits, gold))
    return total / corpus.tokens


def ablated_loss(model: Transformer, corpus: Corpus, head, memories=None) -> float:
    """Loss with one head off, gated exactly as translate(head_mask={head}) gates it."""
    cfg = model.config
    gates = normalize_head_mask({head}, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.n_heads,
                                corpus.batches[0][0].device)
    return corpus_loss(model, corpus, gates, None if head[0] == "encoder_self" else memories)


def michel_importance(model: Transformer, corpus: Corpus, progress: bool = False) -> dict[str, np.ndarray]:
    """Raw I_h = (1/N) sum_x |dL(x)/dxi_h| per kind, (layers, heads); L(x) the summed NLL of sentence x."""
    cfg, counts = model.config, layer_counts(model.config)
    total = {k: torch.zeros(n, cfg.n_heads, dtype=torch.float64) for k, n in counts.items()}
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        with torch.enable_grad():
            for src, fed, gold in tqdm(corpus.batches, desc="michel", disable=not progress, leave=False):
                B = src.shape[0]
                # per-row gates (layers, B, heads): row x's gradient is dL(x)/dxi, not the batch's
                gates = {k: torch.ones(n, B, cfg.n_heads, device=src.device, requires_grad=True)
                         for k, n in counts.items()}
                with intervening(gate_hooks(gates, every_module=True)):      # z * gate, every module
                    _summed_nll(model(src, src != PAD_ID, fed, fed != PAD_ID), gold).backward()
                for k in counts:
                    total[k] += gates[k].grad.abs().sum(dim=1).double().cpu()
    finally:
        for p in params:
            p.requires_grad_(True)
    return {k: (v / len(corpus)).numpy() for k, v in total.items()}


def normalise_per_layer(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each (kind, layer) row divided by its L2 norm (Michel et al., 2019, section 4.2)."""
    out = {}
    for k, v in raw.items():
        v = np.asarray(v, dtype=np.float64)
        out[k] = v / (np.linalg.norm(v, axis=-1, keepdims=True) + 1e-20)
    return out


def pruning_order(normalised: dict[str, np.ndarray]) -> list[tuple[str, int, int]]:
    items = [(float(v[l, h]), KINDS.index(k), l, h) for k, v in normalised.items()
             for l in range(v.shape[0]) for h in range(v.shape[1])]
    return [(KINDS[k], l, h) for _, k, l, h in sorted(items)]


def pruning_counts(n_heads: int, step: float) -> list[int]:
    """0, step, 2*step ... 100% of all heads (rounded), as head counts."""
    points = int(round(1 / step))
    return sorted({min(n_heads, int(round(i * step * n_heads))) for i in range(points + 1)} | {n_heads})


# ---- the whole run, resumable ------------------------------------------------------------------
def _fingerprint(model_dir: Path) -> str:
    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()[:16]


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


def _matrix(a) -> list:
    return [[_sig(x) for x in row] for row in np.asarray(a).tolist()]


def _dump(data: dict) -> str:
    """Indented JSON with every innermost list (a row of numbers, one head triple) on one line."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def default_resume_file(model_dir, split: str, limit: int | None = None) -> Path:
    suffix = f"-limit{limit}" if limit is not None else ""
    return REPO_ROOT / "runs" / f"analyze-{Path(model_dir).resolve().name}-{split}{suffix}.json"


def analyze(tr, model_dir, data_dir, split: str = "val", limit: int | None = None, out=None,
            resume_file=None, bleu_sentences: int = 200, prune_step: float = 0.1, max_tokens: int = 3000,
            command: str = "", fresh: bool = False, progress: bool = True) -> dict:
    """Run (or finish) the analysis and write head_importance.json; returns its content."""
    if not isinstance(tr.engine.model, Transformer):
        raise ValueError(f"{model_dir}: analyze supports Attention Atlas model directories only")
    started = time.time()
    model, cfg, model_dir = tr.engine.model, tr.config, Path(model_dir)
    out = Path(out) if out else model_dir / RESULT_FILE
    resume_file = Path(resume_file) if resume_file else default_resume_file(model_dir, split, limit)
    corpus = Corpus(tr, data_dir, split, limit, max_tokens)
    key = {"model": str(model_dir.resolve()), "weights": _fingerprint(model_dir), "split": split,
           "sentences": len(corpus), "tokens": corpus.tokens, "bleu_sentences": bleu_sentences,
           "prune_step": prune_step}
    state = None
    if resume_file.is_file() and not fresh:
        state = json.loads(resume_file.read_text(encoding="utf-8"))
        if state.get("key") != key:
            tqdm.write(f"{resume_file}: made for another model, split or setting; starting over")
            state = None
    state = state or {"key": key, "elapsed": 0.0, "phase_seconds": {}, "loss": {}, "bleu": {}}
    elapsed_before = state["elapsed"]

    def save(phase: str, t0: float) -> None:
        state["phase_seconds"][phase] = state["phase_seconds"].get(phase, 0.0) + time.time() - t0
        state["elapsed"] = elapsed_before + time.time() - started
        _write(resume_file, json.dumps(state))

    t0 = time.time()
    memories = encoder_memories(model, corpus)
    base = corpus_loss(model, corpus, None, memories)
    state["base_loss"] = base
    save("base", t0)
    if "michel" not in state:
        t0 = time.time()
        state["michel"] = {k: v.tolist() for k, v in michel_importance(model, corpus, progress).items()}
        save("michel", t0)
    raw = {k: np.asarray(v) for k, v in state["michel"].items()}
    normalised = normalise_per_layer(raw)

    heads = all_heads(cfg)
    todo = [h for h in heads if head_key(h) not in state["loss"]]
    for head in tqdm(todo, desc="ablate heads", unit="head", disable=not progress):
        t0 = time.time()
        state["loss"][head_key(head)] = ablated_loss(model, corpus, head, memories)
        save("loss_change", t0)
    del memories

    order = pruning_order(normalised)
    counts = pruning_counts(len(heads), prune_step)
    sources, references = corpus.sources[:bleu_sentences], corpus.references[:bleu_sentences]
    for n in tqdm([n for n in counts if str(n) not in state["bleu"]], desc="pruning curve", unit="point",
                  disable=not progress):
        t0 = time.time()
        hypotheses = tr.translate_batch(sources, beam_size=1, head_mask=set(order[:n]))
        scores = score_texts(hypotheses, references)
        state["bleu"][str(n)] = {"bleu": scores["bleu"], "chrf": scores["chrf"]}
        save("pruning", t0)

    layers = layer_counts(cfg)
    table = {}
    for kind in KINDS:
        change = [[state["loss"][head_key((kind, l, h))] - base for h in range(cfg.n_heads)]
                  for l in range(layers[kind])]
        table[kind] = {"loss_change": _matrix(change),
                       "michel_importance": {"raw": _matrix(raw[kind]), "normalised": _matrix(normalised[kind])}}
    curve, previous = [], 0
    for n in counts:
        curve.append({"heads_removed": n, "removed": [list(h) for h in order[previous:n]],
                      "bleu": state["bleu"][str(n)]["bleu"], "chrf": state["bleu"][str(n)]["chrf"]})
        previous = n
    result = {
        "model": model_dir.resolve().name, "model_dir": str(model_dir),
        "source_lang": tr.source_lang, "target_lang": tr.target_lang,
        "split": split, "sentences": len(corpus), "target_tokens": corpus.tokens,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command, "wall_seconds": round(state["elapsed"], 1),
        "phase_seconds": {k: round(v, 1) for k, v in state["phase_seconds"].items()},
        "device": str(tr.device), "threads": torch.get_num_threads(), "cores": os.cpu_count(),
        "shape": {"layers": layers, "heads": cfg.n_heads},
        "definitions": {
            "base_loss": "teacher-forced token-level mean cross-entropy in nats (no label smoothing), "
                         "</s> included, over the whole split",
            "loss_change": "[layer][head]: loss with that head alone ablated (its slice of softmax(QK^T)V "
                           "zeroed before the output projection, bias kept, as translate(head_mask=...)) "
                           "minus base_loss",
            "michel_importance": "[layer][head]: raw = mean over sentences x of |dL(x)/dxi_h|, L(x) the "
                                 "summed NLL of x, xi_h = 1 a gate on the head's output; normalised = raw "
                                 "divided by the L2 norm of its (kind, layer) row",
            "pruning_curve": f"greedy sacreBLEU/chrF on the first {len(sources)} sentences of {split} as heads "
                             f"are removed. {PRUNING_NOTE}",
        },
        "base_loss": _sig(base),
        "heads": table,
        "pruning_curve": curve,
    }
    _write(out, _dump(result) + "\n")
    return result
