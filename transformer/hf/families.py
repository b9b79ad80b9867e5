"""The supported Hugging Face families: one record each, the one table of what differs between them.

runtime.py imports each record's `packages` and tokenizer `tokenizer_keys`; arch.py reads its
positions, norm placement, layer layout and how languages are chosen; view.py builds the layer
description explain/ decomposes (`layout`). Nothing here imports `transformers`, so the app's
catalogue may read it before any model loads. Outside the engines (this package and
engine_ours.py) no code asks a family by name: it asks the engine (engine.py's contract).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    model_type: str              # config.json's model_type
    packages: tuple              # the transformers.models packages its config, model and tokenizers live in
    tokenizer_keys: tuple        # its keys in transformers' tokenizer mapping (resolved once by runtime.py)
    positional_kind: str         # "sinusoidal" | "learned" | "relative_bias"
    norm_first: bool             # pre-LN (a norm before each sublayer) or post-LN
    layout: str                  # "bart": stack.layers of self_attn/encoder_attn/fc1/fc2; "t5": stack.block
    languages: str               # "codes" (language-code tokens), "marian" (>>xx<< tokens), "task" (T5 prefix), "pair"


FAMILIES = {f.model_type: f for f in (
    Family("marian", ("marian",), ("marian",), "sinusoidal", False, "bart", "marian"),
    Family("m2m_100", ("m2m_100", "nllb"), ("m2m_100", "nllb"), "sinusoidal", True, "bart", "codes"),  # + NLLB
    Family("mbart", ("mbart", "mbart50"), ("mbart", "mbart50"), "learned", True, "bart", "codes"),     # + mBART-50
    Family("bart", ("bart",), ("bart",), "learned", False, "bart", "pair"),
    Family("t5", ("t5",), ("t5",), "relative_bias", True, "t5", "task"),
)}
SUPPORTED = tuple(FAMILIES)


def family(model_type: str) -> Family:
    """The record of a supported model_type; ValueError naming the supported ones otherwise."""
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise ValueError(f"the Hugging Face family {model_type!r} is not supported; supported: "
                         f"{', '.join(SUPPORTED)}") from None


def chooses_languages(model_type: str) -> bool:
    """One model, many language pairs, chosen by language-code tokens (M2M100/NLLB, mBART-50)."""
    return model_type in FAMILIES and FAMILIES[model_type].languages == "codes"


def config_tasks(config: dict) -> dict | None:
    """The task_specific_params whose translation tasks choose the languages (T5), else None."""
    record = FAMILIES.get(config.get("model_type"))
    return config.get("task_specific_params") if record is not None and record.languages == "task" else None
