"""sacreBLEU / chrF scoring of a Translator on a Multi30k split."""
from __future__ import annotations

import sacrebleu

from .data import read_split


def score_texts(hypotheses: list[str], references: list[str]) -> dict:
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_text": str(b), "chrf_text": str(c),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
            "sentences": len(hypotheses)}


def evaluate(translator, data_dir, split: str, beam_size: int = 1, limit: int | None = None,
             batch_size: int = 64) -> dict:
    src, tgt = translator.source_lang, translator.target_lang
    sources, references = read_split(data_dir, split, src), read_split(data_dir, split, tgt)
    if limit is not None:
        sources, references = sources[:limit], references[:limit]
    hypotheses = translator.translate_batch(sources, beam_size=beam_size, batch_size=batch_size)
    result = score_texts(hypotheses, references)
    result["beam_size"] = beam_size
    return result
