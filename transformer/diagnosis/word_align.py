"""Statistical word alignment of Multi30k, for the diagnosis protocol's realistic errors (issue 30).

Which reference word translates a source word is decided by eflomal (Östling and Tiedemann 2016),
a Bayesian IBM-style aligner from PyPI, trained on Multi30k train + val in both directions and
symmetrised by intersection (high precision: a link both directions agree on). Nothing of this
project's models is used, so the errors built from it are independent of what diagnosis measures.
eflomal is a development dependency (`pip install .[dev]`), imported only here.

Alignments are cached under runs/ (git-ignored) by language pair and data file sizes.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / "runs" / "word_align"
WORD = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Word:
    text: str
    start: int          # character offsets in the sentence
    end: int


def words(sentence: str) -> list[Word]:
    """Words and punctuation marks with their character spans (the aligner's tokens)."""
    return [Word(m.group(), m.start(), m.end()) for m in WORD.finditer(sentence)]


def _run_eflomal(source: list[str], target: list[str]) -> list[set[tuple[int, int]]]:
    """Intersection of eflomal's forward and reverse links, per sentence pair."""
    import tempfile

    import eflomal
    src = [" ".join(w.text.lower() for w in words(s)) for s in source]
    tgt = [" ".join(w.text.lower() for w in words(t)) for t in target]
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = Path(tmp, "fwd"), Path(tmp, "rev")
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
        out = []
        for a, b in zip(fwd.read_text().splitlines(), rev.read_text().splitlines()):
            la = {tuple(map(int, x.split("-"))) for x in a.split()}
            lb = {tuple(map(int, x.split("-"))) for x in b.split()}
            out.append(la & lb)
    return out


def val_alignments(data_dir, source_lang: str, target_lang: str) -> list[set[tuple[int, int]]]:
    """Intersection links (source word index, target word index) for every val pair, from an
    aligner trained on train + val (unsupervised: val's links are never labels of anything)."""
    from ..training.data import read_split
    langs = sorted([source_lang, target_lang])
    texts = {lang: read_split(data_dir, "train", lang) + read_split(data_dir, "val", lang) for lang in langs}
    n_val = len(read_split(data_dir, "val", langs[0]))
    digest = hashlib.sha1(json.dumps([langs, [len(texts[x]) for x in langs],
                                      texts[langs[0]][-1], texts[langs[1]][-1]]).encode()).hexdigest()[:12]
    cache = CACHE / f"val.{langs[0]}-{langs[1]}.{digest}.json"
    if cache.is_file():
        links = [set(map(tuple, x)) for x in json.loads(cache.read_text())]
    else:
        links = _run_eflomal(texts[langs[0]], texts[langs[1]])[-n_val:]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps([sorted(x) for x in links]))
    if langs[0] != source_lang:
        links = [{(j, i) for i, j in x} for x in links]
    return links


if __name__ == "__main__":
    from ..training.data import resolve_data_dir
    found = val_alignments(resolve_data_dir(None), "en", "de")
    print(len(found), "val pairs;", sum(map(len, found)) / len(found), "links per pair")
