"""What differs between the supported Hugging Face families, in one place.

Everything else (capture, ablation, decoding) is written once against `Site`s: the
attention modules and their output projections, and `ResidualSite`s: where each residual capture
point (capture.py) is read, found here by family. `read_out` is each family's own output head.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..capture import FINAL_NORM, RESIDUAL_POINTS, residual_name
from .families import FAMILIES, SUPPORTED  # noqa: F401  (the records; SUPPORTED for load.py's messages)
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "ro": "Romanian"}   # T5 task prefixes


@dataclass
class HFModelConfig:
    """The same field names as our ModelConfig, read from the Hugging Face config."""
    model_type: str
    vocab_size: int
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    max_source_len: int            # pieces the encoder takes, specials included
    max_target_len: int            # output pieces the decoder may produce
    norm_first: bool               # pre-LN (mBART, M2M100/NLLB, T5) or post-LN (Marian, BART)
    d_head: int
    positional_kind: str           # "sinusoidal" | "learned" | "relative_bias" (T5: nothing is added)
    source_lang: str = ""
    target_lang: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Site:
    """One attention module: where its weights come out and where its heads are gated."""
    kind: str                      # "encoder_self" | "decoder_self" | "cross"
    layer: int
    attention: nn.Module           # forward returns (..., weights (B, H, Tq, Tk)) under eager attention
    out_proj: nn.Linear            # its input is (B, Tq, H * d_head), head-major
    n_heads: int
    d_head: int


def hf_config(config, tokenizer_max: int | None) -> HFModelConfig:
    family = config.model_type
    record = FAMILIES[family]
    kind, norm_first = record.positional_kind, record.norm_first
    if record.layout == "t5":
        heads, d_head = config.num_heads, config.d_kv
        enc, dec, d_ff = config.num_layers, config.num_decoder_layers, config.d_ff
        positions = getattr(config, "n_positions", None) or 512     # relative: a convention, not a table
    else:
        heads, dec_heads = config.encoder_attention_heads, config.decoder_attention_heads
        if heads != dec_heads:
            raise ValueError(f"{family}: encoder and decoder head counts differ ({heads} vs {dec_heads}); "
                             "the atlas shows one head count per model")
        d_head = config.d_model // heads
        enc, dec, d_ff = config.encoder_layers, config.decoder_layers, config.encoder_ffn_dim
        positions = config.max_position_embeddings
    max_source = min(positions, tokenizer_max) if tokenizer_max and tokenizer_max < 10**6 else positions
    return HFModelConfig(model_type=family, vocab_size=config.vocab_size, d_model=config.d_model, n_heads=heads,
                         n_encoder_layers=enc, n_decoder_layers=dec, d_ff=d_ff, max_source_len=max_source,
                         max_target_len=positions, norm_first=norm_first, d_head=d_head, positional_kind=kind)


def attention_sites(model) -> list[Site]:
    """Every attention module in (kind, layer) order, for BART-like stacks and for T5."""
    encoder, decoder, sites = model.get_encoder(), model.get_decoder(), []
    if model.config.model_type == "t5":
        for i, block in enumerate(encoder.block):
            sites.append(_site("encoder_self", i, block.layer[0].SelfAttention))
        for i, block in enumerate(decoder.block):
            sites.append(_site("decoder_self", i, block.layer[0].SelfAttention))
            sites.append(_site("cross", i, block.layer[1].EncDecAttention))
        return sites
    for i, layer in enumerate(encoder.layers):
        sites.append(_site("encoder_self", i, layer.self_attn))
    for i, layer in enumerate(decoder.layers):
        sites.append(_site("decoder_self", i, layer.self_attn))
        sites.append(_site("cross", i, layer.encoder_attn))
    return sites


def _site(kind: str, layer: int, attention: nn.Module) -> Site:
    if hasattr(attention, "o"):                                   # T5Attention
        return Site(kind, layer, attention, attention.o, attention.n_heads, attention.key_value_proj_dim)
    return Site(kind, layer, attention, attention.out_proj, attention.num_heads, attention.head_dim)


@dataclass(frozen=True)
class ResidualSite:
    """One residual capture point: the module whose first input ("input") or output ("output",
    its first element when a tuple) is the residual stream there. `adds`: where a hook writes it
    when that is elsewhere (pre-LN mid points, read at the next norm's input, which is not the
    residual the layer carries on): (the point before the sublayer, the residual its output is
    added to; the sublayer)."""
    name: str                      # e.g. "decoder.1.resid_mid_cross"
    module: nn.Module
    reads: str                     # "input" | "output"
    adds: tuple | None = None      # (previous point's name, sublayer) or None: written where it is read


def _layers(stack, family: str):
    return stack.block if FAMILIES[family].layout == "t5" else stack.layers


def final_norm(stack) -> nn.Module | None:
    """The norm a stack ends with (T5 final_layer_norm; mBART, M2M100/NLLB layer_norm), or None
    (Marian, BART: post-LN, each layer already ends in a norm)."""
    return getattr(stack, "final_layer_norm", None) or getattr(stack, "layer_norm", None)


def residual_sites(model) -> list[ResidualSite]:
    """Every residual point of capture.residual_names, in model order. resid_pre: the layer's input;
    resid_post: its output. After a sublayer: T5, its T5Layer* module's output; post-LN (Marian,
    BART), that sublayer's LayerNorm output; pre-LN (mBART, M2M100/NLLB), the next norm's input,
    written as the sublayer's output plus the residual it is added to (`adds`)."""
    family, sites = model.config.model_type, []
    for stack_name, stack in (("encoder", model.get_encoder()), ("decoder", model.get_decoder())):
        mids = RESIDUAL_POINTS[stack_name][1:-1]                  # resid_mid_self (, resid_mid_cross)
        layers = _layers(stack, family)
        for i, layer in enumerate(layers):
            sites.append(ResidualSite(residual_name(stack_name, i, "resid_pre"), layer, "input"))
            if FAMILIES[family].layout == "t5":
                where = [(layer.layer[j], "output", None) for j in range(len(mids))]
            else:
                norms = [layer.self_attn_layer_norm] + ([layer.encoder_attn_layer_norm] if len(mids) == 2 else [])
                norms.append(layer.final_layer_norm)
                blocks = [layer.self_attn] + ([layer.encoder_attn] if len(mids) == 2 else [])
                before = [residual_name(stack_name, i, p) for p in RESIDUAL_POINTS[stack_name][:-1]]
                where = ([(n, "input", (before[j], blocks[j])) for j, n in enumerate(norms[1:])] if FAMILIES[family].norm_first
                         else [(n, "output", None) for n in norms[:-1]])
            sites += [ResidualSite(residual_name(stack_name, i, p), m, r, a) for p, (m, r, a) in zip(mids, where)]
            sites.append(ResidualSite(residual_name(stack_name, i, "resid_post"), layer, "output"))
        sites.append(ResidualSite(f"{stack_name}.{FINAL_NORM}", final_norm(stack) or layers[-1], "output"))
    return sites


def normed(stack, hidden: torch.Tensor) -> torch.Tensor:
    """hidden through the stack's final norm (if any), by `forward` so no capture hook sees it."""
    norm = final_norm(stack)
    return hidden if norm is None else norm.forward(hidden)


def read_out(model, hidden: torch.Tensor) -> torch.Tensor:
    """(..., D) decoder residual stream -> (..., V) logits, as each family's forward reads its last
    layer: final norm where the stack has one; T5 rescales by d_model**-0.5 (scale_decoder_outputs,
    i.e. tied embeddings); lm_head; Marian, BART and mBART add final_logits_bias."""
    hidden = normed(model.get_decoder(), hidden)
    if model.config.model_type == "t5":
        config = model.config
        if getattr(config, "scale_decoder_outputs", getattr(config, "tie_word_embeddings", True)):
            hidden = hidden * (config.d_model ** -0.5)
    logits = model.lm_head(hidden)
    bias = getattr(model, "final_logits_bias", None)
    return logits if bias is None else logits + bias.to(logits.device)


def token_embeddings(stack, ids: torch.Tensor) -> torch.Tensor:
    """(B, S, D): token embeddings times the model's embed_scale, before positions are added."""
    x = stack.embed_tokens(ids)
    if not hasattr(stack.embed_tokens, "embed_scale"):           # Marian scales in the stack, others in the module
        x = x * getattr(stack, "embed_scale", 1.0)
    return x


def position_table(stack, family: str, n: int, d_model: int) -> torch.Tensor:
    """(n, D): what the stack adds at positions 0..n-1 of an unpadded sequence. Zeros for T5."""
    if family == "t5":
        return torch.zeros(n, d_model)
    device = next(stack.parameters()).device
    if family == "marian":
        table = stack.embed_positions((1, n))
    elif family == "m2m_100":                 # positions count non-pad ids from padding_idx + 1
        dummy = torch.full((1, n), stack.padding_idx + 1, dtype=torch.long, device=device)
        table = stack.embed_positions(dummy)
    else:                                     # learned BART / mBART tables, offset 2 inside the module
        table = stack.embed_positions(torch.zeros(1, n, dtype=torch.long, device=device))
    return table.reshape(-1, n, d_model)[0]


def relative_bias(stack, n: int) -> torch.Tensor:
    """T5: (H, n, n) relative-position bias that block 0 adds to every layer's scores."""
    return stack.block[0].layer[0].SelfAttention.compute_bias(n, n)[0]


# ---- languages --------------------------------------------------------------------------------
@dataclass
class Languages:
    source: str
    target: str
    prefix: str = ""                          # text put before the source (T5 task, Marian >>xx<<)
    overrides: dict = field(default_factory=dict)   # generation settings, e.g. forced_bos_token_id


_CODE = re.compile(r"^(__[a-z]{2,3}__|[a-z]{3}_[A-Z][a-z]{3}|[a-z]{2}_[A-Z]{2})$")


def language_codes(tokenizer) -> list[str]:
    """The language-code tokens a multilingual tokenizer knows (M2M100 __de__, NLLB deu_Latn, mBART de_DE)."""
    if hasattr(tokenizer, "lang_code_to_id"):
        return sorted(tokenizer.lang_code_to_id)
    return sorted(t for t in tokenizer.get_vocab() if _CODE.match(t))


def _code_id(tokenizer, code: str, what: str, name: str) -> int:
    if hasattr(tokenizer, "get_lang_id") and hasattr(tokenizer, "lang_code_to_id"):   # M2M100: "de" -> __de__
        if code in tokenizer.lang_code_to_id:
            return tokenizer.get_lang_id(code)
    elif code in tokenizer.get_vocab() and _CODE.match(code):
        return tokenizer.convert_tokens_to_ids(code)
    codes = language_codes(tokenizer)
    raise ValueError(f"{name}: {what}={code!r} is not a language code of this model; it knows "
                     f"{len(codes)}, e.g. {codes[:12]}")


def languages(family: str, config, tokenizer, source: str | None, target: str | None, name: str) -> Languages:
    """Choose language codes per family and set the tokenizer's once (it is per translator)."""
    how = FAMILIES[family].languages
    if how == "codes" and language_codes(tokenizer):
        source = source or getattr(tokenizer, "src_lang", None)
        target = target or getattr(tokenizer, "tgt_lang", None)
        if not source or not target:
            raise ValueError(f"{name}: a multilingual model needs source_lang= and target_lang=, "
                             f"e.g. {language_codes(tokenizer)[:12]}")
        _code_id(tokenizer, source, "source_lang", name)
        target_id = _code_id(tokenizer, target, "target_lang", name)
        tokenizer.src_lang, tokenizer.tgt_lang = source, target
        return Languages(source, target, overrides={"forced_bos_token_id": target_id})
    if how == "marian":
        source = source or getattr(tokenizer, "source_lang", None) or ""
        target = target or getattr(tokenizer, "target_lang", None) or ""
        codes = [t for t in tokenizer.get_vocab() if re.match(r"^>>\w+<<$", t)]
        if codes and f">>{target}<<" not in codes:
            raise ValueError(f"{name}: this Marian model writes several languages; pass target_lang= "
                             f"one of {sorted(c[2:-2] for c in codes)[:12]}")
        return Languages(source, target, prefix=f">>{target}<< " if codes else "")
    if how == "task":
        return t5_languages(config, source, target, name)
    return Languages(source or "", target or "")


_T5_TASK = re.compile(r"^translation_([A-Za-z]+)_to_([A-Za-z]+)$")


def t5_tasks(config) -> list[Languages]:
    """The translation tasks a T5 config names (task_specific_params' translation_xx_to_yy, in
    the file's order), each with its prefix: what the model was trained to be told."""
    tasks = []
    for task, params in (getattr(config, "task_specific_params", None) or {}).items():
        match = _T5_TASK.match(task)
        if match and isinstance(params, dict):
            source, target = match.groups()
            prefix = params.get("prefix")
            if not isinstance(prefix, str):
                prefix = _t5_prefix(source, target) or ""
            tasks.append(Languages(source, target, prefix=prefix))
    return tasks


def _t5_prefix(source: str, target: str) -> str | None:
    if source in LANGUAGE_NAMES and target in LANGUAGE_NAMES:
        return f"translate {LANGUAGE_NAMES[source]} to {LANGUAGE_NAMES[target]}: "
    return None


def t5_languages(config, source: str | None, target: str | None, name: str) -> Languages:
    """A T5 is told its task in words. Without languages: its config's first translation task;
    with one or both: the first task that agrees, else the prefix T5 was trained with."""
    tasks = t5_tasks(config)
    if not source and not target:
        if not tasks:
            raise ValueError(f"{Path(name) / 'config.json'}: this T5 has no translation task in "
                             "task_specific_params; pass source_lang= and target_lang=")
        return tasks[0]
    for task in tasks:
        if source in (None, "", task.source) and target in (None, "", task.target):
            return task
    prefix = _t5_prefix(source or "", target or "")
    if prefix is None:
        known = [f"{t.source}->{t.target}" for t in tasks]
        raise ValueError(f"{Path(name) / 'config.json'}: no T5 task for {source!r} -> {target!r}; its tasks: "
                         f"{known or 'none'}; languages T5 was trained on: {sorted(LANGUAGE_NAMES)}")
    return Languages(source, target, prefix=prefix)
