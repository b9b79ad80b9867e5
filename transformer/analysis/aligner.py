"""Alignment methods: every way this project reads a word alignment out of a model, and one pair's
alignment by the method head_roles.json names (what `translate(..., align=True)` returns).

A method turns one forced pass's evidence into a (target words, source words) score matrix:
- "head L.H": one cross-attention head's weights (row t = the query that produces output piece t:
  no shift; reading row t + 1, the step after, was much worse for our models, issue 34);
- "layer L": the mean over layer L's heads;
- "norm L": Kobayashi et al.'s ‖Σ_h α_hij f_h(x_j)‖ for layer L, each row divided by its sum;
- "alti+": ALTI+ source contributions (Ferrando et al. 2022), rolled out through the model;
- "combination": a logistic regression over all of the above and each one's column-normalised
  copy (score / its sum over target words: how much of source word i goes to target word j, the
  reverse direction's view that one model gives for free), fitted on one part of the corpus.
Links are then read by a rule (alignment.RULES): "row" or "mutual" argmax.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .alignment import links_from_scores, piece_links, piece_words, text_words, to_words

FALLBACK = {"method": "alti+", "rule": "mutual"}     # models without head_roles.json (e.g. Hugging Face)


def map_names(n_layers: int, n_heads: int) -> list[str]:
    """Names of the base maps, in the order `piece_maps` stacks them."""
    return ([f"head {layer}.{h}" for layer in range(n_layers) for h in range(n_heads)]
            + [f"norm {layer}" for layer in range(n_layers)] + ["alti+"])


def piece_maps(cross: np.ndarray, norm_layer: np.ndarray, alti: np.ndarray) -> np.ndarray:
    """cross (L, H, T, S), norm_layer (L, T, S), alti (T, S) of one pair -> (L·H + L + 1, T, S)."""
    L, H, T, S = cross.shape
    norms = norm_layer / np.maximum(norm_layer.sum(-1, keepdims=True), 1e-12)
    return np.concatenate([cross.reshape(L * H, T, S), norms, alti[None]]).astype(np.float32)


def column_normalised(maps: np.ndarray) -> np.ndarray:
    """(M, nt, ns) -> each source word's scores divided by their sum over target words."""
    return maps / np.maximum(maps.sum(-2, keepdims=True), 1e-6)


def features(word_maps: np.ndarray) -> np.ndarray:
    """(M, nt, ns) base maps -> (2M, nt, ns) the combination's features."""
    return np.concatenate([word_maps, column_normalised(word_maps)])


def method_scores(name: str, word_maps: np.ndarray, names: list[str], combination: dict | None = None,
                  n_heads: int | None = None) -> np.ndarray:
    """One method's (nt, ns) word scores from a pair's base maps (M, nt, ns)."""
    if name == "combination":
        if not combination:
            raise ValueError("the combination method needs its fitted weights (head_roles.json 'combination')")
        w = np.asarray(combination["weights"], dtype=np.float64)
        return np.tensordot(w, features(word_maps).astype(np.float64), axes=1) + float(combination["bias"])
    if name.startswith("layer "):
        layer = int(name.split()[1])
        heads = [names.index(f"head {layer}.{h}") for h in range(n_heads)]
        return word_maps[heads].mean(0)
    return word_maps[names.index(name)]


def fit_combination(feature_maps: list[np.ndarray], links: list[set], l2: float = 1e-3) -> dict:
    """Logistic regression, cell = (target word, source word), label = a reference link (sure or
    possible). feature_maps: per pair (F, nt, ns). L-BFGS in float64 from zeros: deterministic."""
    X = np.concatenate([f.reshape(f.shape[0], -1).T for f in feature_maps])          # (cells, F)
    y = np.concatenate([np.array([[(i, j) in gold for i in range(f.shape[2])] for j in range(f.shape[1])],
                                 dtype=np.float64).reshape(-1) for f, gold in zip(feature_maps, links)])
    X, y = torch.tensor(X, dtype=torch.float64), torch.tensor(y)
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=300, line_search_fn="strong_wolfe")

    def loss():
        optimizer.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(X @ w + b, y) + l2 * (w ** 2).sum()
        value.backward()
        return value
    with torch.enable_grad():
        optimizer.step(loss)
    return {"weights": [round(float(v), 6) for v in w.detach()], "bias": round(float(b.detach()), 6), "l2": l2}


@dataclass
class PairWords:
    """Which word each piece of a pair belongs to (None: a special piece)."""
    source: list
    n_source: int
    target: list
    n_target: int


def pair_words(tr, source_ids: list, output_ids: list, source_tokens: list[str],
               target_tokens: list[str]) -> PairWords:
    specials = {tr.engine.tokenizer.id_to_piece(i) for i in tr.engine.special_ids}
    sw, ns = piece_words(tr.engine.tokenizer.source_pieces(source_ids), source_tokens, specials)
    tw, nt = piece_words(tr.engine.tokenizer.pieces(output_ids), target_tokens, specials)
    return PairWords(sw, ns, tw, nt)


def align_pair(tr, source_ids: list, output_ids: list, source_text: str, output_text: str,
               roles: dict | None, gates=None) -> list[tuple[int, int]]:
    """[(source piece i, output piece j)] by the method `roles` names (head_roles.json), or by
    FALLBACK (ALTI+, mutual argmax: the best method that needs no fitting, on both our models)
    when there is none. Words: word_align.words of the source and of the decoded output."""
    from .corpus_pass import corpus_pass
    spec = {"method": roles["method"], "rule": roles["rule"]} if roles and "method" in roles else FALLBACK
    found = {}

    def keep(batch):
        S, T = batch.source_len[0], batch.target_len[0]
        found["maps"] = piece_maps(batch.weights["cross"][0, :, :, :T, :S], batch.norm_layer[0, :, :T, :S],
                                   batch.alti[0, :T, :S])
    corpus_pass(tr, [(source_ids, output_ids)], keep, gates=gates)
    words = pair_words(tr, source_ids, output_ids, text_words(source_text), text_words(output_text))
    word_maps = to_words(found["maps"], words.target, words.n_target, words.source, words.n_source)
    c = tr.config
    scores = method_scores(spec["method"], word_maps, map_names(c.n_decoder_layers, c.n_heads),
                           roles.get("combination") if roles else None, c.n_heads)
    return piece_links(links_from_scores(scores, spec["rule"]), words.source, words.target)


def align_of(tr, out, call) -> list[tuple[int, int]]:
    """The analysis (transformer/analyses.py): out.alignment under its head_mask."""
    return align_pair(tr, out.source_ids, out.output_ids, out.source_text, out.text, tr.head_roles,
                      tr.gates(out.head_mask))
