"""Tiny Hugging Face translation models of each family, built offline in seconds.

Tokenizers come from small sentencepiece / byte-level BPE models trained here on a few
hundred Multi30k lines (generated sentences when the data is absent); models are built
from configs (d_model 32, 2+2 layers, 4 heads), fitted for a few dozen steps so they end
sentences with </s> and depend on their input, then written with save_pretrained.
Generation configs copy the real checkpoints' habits (Marian's bad pad word and forced
EOS, BART's no-repeat n-grams and length penalty, M2M100's early stopping, ...).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import random
from pathlib import Path

import torch

from conftest import REPO, one_thread, random_sentences

DATA_DIR = Path(os.environ.get("ATLAS_DATA_DIR") or REPO.parent / "shared" / "data" / "multi30k").resolve()
TINY = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128, dropout=0.0,
            attention_dropout=0.0, activation_dropout=0.0)


def corpus(lang: str, n: int = 400) -> list[str]:
    path = DATA_DIR / f"train.{lang}.gz"
    if path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [next(handle).strip() for _ in range(n)]
    return random_sentences(n, seed=0 if lang == "en" else 1)     # CI without the data: never skip


def train_spm(lines: list[str], path: Path, model_type: str = "unigram", vocab_size: int = 300,
              bos_id: int = -1, eos_id: int = 1) -> Path:
    import sentencepiece as spm
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buffer, vocab_size=vocab_size,
                                   model_type=model_type, character_coverage=1.0, pad_id=-1, unk_id=0,
                                   bos_id=bos_id, eos_id=eos_id, num_threads=1, minloglevel=2,
                                   hard_vocab_limit=False)
    path.write_bytes(buffer.getvalue())
    return path


def spm_pieces(path: Path) -> list[tuple[str, float]]:
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


def fairseq_vocab(pieces) -> dict[str, int]:
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece, _ in pieces:
        vocab.setdefault(piece, len(vocab))
    return vocab


def fit(model, tokenizer, pairs, steps: int, seed: int = 0) -> None:
    """A few teacher-forced steps: enough for </s> to appear and outputs to depend on inputs. On one
    thread (conftest.one_thread): on a busy machine a step took 0.3 s on one thread and 1-4 s on two."""
    torch.manual_seed(seed)
    sources, targets = zip(*pairs)
    batch = tokenizer(list(sources), text_target=list(targets), padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    with one_thread():
        for _ in range(steps):
            optimizer.zero_grad()
            model(**batch).loss.backward()
            optimizer.step()
    model.eval()


def finish(model, tokenizer, out: Path, pairs, steps: int = 40, **generation) -> Path:
    if steps:
        fit(model, tokenizer, pairs, steps)
    for key, value in generation.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_marian(root: Path, pairs, steps: int = 40) -> Path:
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    src = train_spm([s for s, _ in pairs], root / "source.spm")
    tgt = train_spm([t for _, t in pairs], root / "target.spm")
    vocab = {}
    for piece, _ in spm_pieces(src) + spm_pieces(tgt):
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (root / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = MarianTokenizer(str(src), str(tgt), str(root / "vocab.json"), source_lang="en", target_lang="de")
    pad, eos = tok.pad_token_id, tok.eos_token_id
    config = MarianConfig(vocab_size=len(vocab), pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                          **TINY)
    torch.manual_seed(1)
    return finish(MarianMTModel(config), tok, root / "marian", pairs, steps, bad_words_ids=[[pad]],
                  forced_eos_token_id=eos, decoder_start_token_id=pad, max_length=40, num_beams=4)


def build_m2m(root: Path, pairs, steps: int = 40) -> Path:
    from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer
    spm_path = train_spm([s for pair in pairs for s in pair], root / "m2m.spm")
    (root / "m2m_vocab.json").write_text(json.dumps(fairseq_vocab(spm_pieces(spm_path))), encoding="utf-8")
    tok = M2M100Tokenizer(str(root / "m2m_vocab.json"), str(spm_path), src_lang="en", tgt_lang="de")
    size = len(tok.encoder) + len(tok.lang_code_to_id) + tok.num_madeup_words     # pieces, codes, madeup
    config = M2M100Config(vocab_size=size, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          decoder_start_token_id=2, **TINY)
    torch.manual_seed(2)
    return finish(M2M100ForConditionalGeneration(config), tok, root / "m2m100", pairs, steps,
                  decoder_start_token_id=2, max_length=40, early_stopping=True, num_beams=5)


def build_nllb(root: Path, pairs, steps: int = 40) -> Path:
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer
    from transformers.tokenization_utils_base import generate_merges
    spm_path = train_spm([s for pair in pairs for s in pair], root / "nllb.spm", model_type="bpe")
    vocab = fairseq_vocab(spm_pieces(spm_path))
    tok = NllbTokenizer(vocab=vocab, merges=generate_merges(vocab), src_lang="eng_Latn", tgt_lang="deu_Latn")
    config = M2M100Config(vocab_size=max(tok.get_vocab().values()) + 1, pad_token_id=1, bos_token_id=0,
                          eos_token_id=2, decoder_start_token_id=2, **TINY)
    torch.manual_seed(3)
    return finish(M2M100ForConditionalGeneration(config), tok, root / "nllb", pairs, steps,
                  decoder_start_token_id=2, max_length=40)


def build_mbart50(root: Path, pairs, steps: int = 40) -> Path:
    from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration
    spm_path = train_spm([s for pair in pairs for s in pair], root / "mbart.spm", bos_id=1, eos_id=2)
    tok = MBart50Tokenizer(vocab=spm_pieces(spm_path), src_lang="en_XX", tgt_lang="de_DE")
    config = MBartConfig(vocab_size=max(tok.get_vocab().values()) + 1, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2, decoder_start_token_id=2, scale_embedding=True, **TINY)
    torch.manual_seed(4)
    return finish(MBartForConditionalGeneration(config), tok, root / "mbart50", pairs, steps,
                  decoder_start_token_id=2, forced_eos_token_id=2, max_length=40)


def build_bart(root: Path, pairs, steps: int = 40) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([s for pair in pairs for s in pair], vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    (root / "bart_bpe").mkdir()
    bpe.save_model(str(root / "bart_bpe"))
    tok = BartTokenizer(str(root / "bart_bpe" / "vocab.json"), str(root / "bart_bpe" / "merges.txt"))
    config = BartConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        decoder_start_token_id=2, **TINY)
    torch.manual_seed(5)
    # like bart-large-cnn: forced <s>, no repeated trigrams, a length penalty, a minimum length
    return finish(BartForConditionalGeneration(config), tok, root / "bart", pairs, steps,
                  decoder_start_token_id=2, forced_bos_token_id=0, forced_eos_token_id=2,
                  no_repeat_ngram_size=3, length_penalty=2.0, min_length=4, early_stopping=True,
                  max_length=40, num_beams=4)


# as t5-small's config.json carries them: a summary task first, then the translation tasks
T5_TASKS = {
    "summarization": {"early_stopping": True, "length_penalty": 2.0, "max_length": 200, "min_length": 30,
                      "no_repeat_ngram_size": 3, "num_beams": 4, "prefix": "summarize: "},
    "translation_en_to_de": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to German: "},
    "translation_en_to_fr": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to French: "},
    "translation_en_to_ro": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to Romanian: "},
}


def build_t5(root: Path, pairs, steps: int = 40) -> Path:
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer
    prefix = "translate English to German: "
    pieces = spm_pieces(train_spm([prefix + s for s, _ in pairs] + [t for _, t in pairs], root / "t5.spm"))
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + [p for p in pieces if p[0] not in ("<unk>", "</s>")]
    tok = T5Tokenizer(vocab=vocab, extra_ids=0)
    config = T5Config(vocab_size=len(vocab), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                      dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                      task_specific_params=T5_TASKS)
    torch.manual_seed(6)
    pairs = [(prefix + s, t) for s, t in pairs]
    return finish(T5ForConditionalGeneration(config), tok, root / "t5", pairs, steps,
                  decoder_start_token_id=0, max_length=40)


BUILDERS = {"marian": build_marian, "m2m100": build_m2m, "nllb": build_nllb, "mbart50": build_mbart50,
            "bart": build_bart, "t5": build_t5}
LANGUAGES = {"m2m100": ("en", "de"), "nllb": ("eng_Latn", "deu_Latn"), "mbart50": ("en_XX", "de_DE"),
             "t5": ("en", "de")}


def training_pairs() -> list[tuple[str, str]]:
    pairs = [(s, t) for s, t in zip(corpus("en"), corpus("de")) if len(s.split()) <= 12][:48]
    random.Random(0).shuffle(pairs)
    return pairs


def build(name: str, root: Path, steps: int = 40) -> Path:
    folder = root / f"{name}-src"
    folder.mkdir()
    return BUILDERS[name](folder, training_pairs(), steps)


def build_all(root: Path) -> dict[str, Path]:
    return {name: build(name, root) for name in BUILDERS}


def randomise_biases(folder: Path, seed: int = 0, std: float = 0.3) -> Path:
    """Reload a saved model, draw every Linear bias and every norm's gain and bias at random
    (gains around 1), and save it back. A fresh or briefly fitted model has biases near 0 and
    gains near 1, which hides any difference in how a method treats biases and norms."""
    from transformers import AutoModelForSeq2SeqLM
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    torch.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            is_norm = isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith(("LayerNorm", "RMSNorm"))
            if is_norm and getattr(module, "weight", None) is not None:
                torch.nn.init.normal_(module.weight, mean=1.0, std=std)
            if (is_norm or isinstance(module, torch.nn.Linear)) and getattr(module, "bias", None) is not None:
                torch.nn.init.normal_(module.bias, std=std)
    model.save_pretrained(folder)
    return folder


def t5_v11(folder: Path, out: Path, seed: int = 7) -> Path:
    """A T5 v1.1-style model beside a tiny T5: the same config and tokenizer but a gated-gelu
    feed-forward, no d_model^-0.5 on the decoder output, and heads × d_kv (48) unequal to d_model
    (32), as in t5-v1_1-small (6 × 64 vs 512); fresh weights."""
    import shutil
    from transformers import T5Config, T5ForConditionalGeneration
    shutil.copytree(folder, out)
    settings = T5Config.from_pretrained(folder).to_dict()
    for derived in ("dense_act_fn", "is_gated_act", "scale_decoder_outputs", "architectures", "transformers_version"):
        settings.pop(derived, None)
    settings.update(feed_forward_proj="gated-gelu", tie_word_embeddings=False, num_heads=6)
    torch.manual_seed(seed)
    T5ForConditionalGeneration(T5Config(**settings)).save_pretrained(out)
    return out
