"""Sentencepiece tokenizer with the project's fixed special ids (0 pad, 1 unk, 2 <s>, 3 </s>)."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable

import sentencepiece as spm

SPECIALS = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}


class Tokenizer:
    def __init__(self, processor: spm.SentencePieceProcessor, path: str = "<memory>"):
        self.sp = processor
        self.path = path
        for piece, idx in SPECIALS.items():
            if self.sp.id_to_piece(idx) != piece:
                raise ValueError(f"{path}: special id {idx} is {self.sp.id_to_piece(idx)!r}, expected {piece!r}")
        # every piece's text, read once: diagnosis looks pieces up by the hundred thousand
        self._piece_texts = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, model_type: str = "unigram",
              seed_sentencepiece_size: int = 200_000) -> "Tokenizer":
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buffer, vocab_size=vocab_size,
            model_type=model_type, character_coverage=1.0,
            pad_id=0, unk_id=1, bos_id=2, eos_id=3,
            pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
            seed_sentencepiece_size=seed_sentencepiece_size,
            num_threads=1, minloglevel=2, train_extremely_large_corpus=False)
        return cls.from_bytes(buffer.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<memory>") -> "Tokenizer":
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(data)
        except Exception as exc:   # sentencepiece raises RuntimeError/OSError on bad protos
            raise ValueError(f"{path}: not a valid sentencepiece model ({exc})") from exc
        tok = cls(sp, path)
        tok._bytes = data
        return tok

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: sentencepiece model not found")
        return cls.from_bytes(path.read_bytes(), str(path))

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self._bytes)

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    @property
    def vocab_size(self) -> int:
        return len(self)

    def encode_ids(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def encode_pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.sp.encode(texts, out_type=int)

    def id_to_piece(self, idx: int) -> str:
        idx = int(idx)
        if 0 <= idx < len(self._piece_texts):
            return self._piece_texts[idx]
        return self.sp.id_to_piece(idx)            # out of range: sentencepiece's own error

    def piece_ids(self, pieces) -> list[int]:
        """Pieces back to ids, exactly (no re-segmentation); an unknown piece is a ValueError."""
        ids = []
        for piece in pieces:
            idx = self.sp.piece_to_id(str(piece))
            if idx == 1 and piece != "<unk>":      # sentencepiece maps unknown pieces to <unk>
                raise ValueError(f"{piece!r} is not a piece of this vocabulary")
            ids.append(idx)
        return ids

    def pieces(self, ids) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def source_pieces(self, ids) -> list[str]:
        """Source ids named (one joint vocabulary here; engines with a separate one differ)."""
        return self.pieces(ids)

    def decode(self, ids) -> str:
        """Ids to text; special ids (<s>, </s>, <pad>) are dropped, <unk> reads as ' ⁇ '."""
        return self.sp.decode([int(i) for i in ids if int(i) not in (0, 2, 3)])
