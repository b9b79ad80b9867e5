"""Multi30k reading and token-count batching."""
from __future__ import annotations

import gzip
from pathlib import Path

import torch

from ..model import BOS_ID, EOS_ID, PAD_ID

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "multi30k"
DATA_HELP = ("Multi30k task 1 raw files (train/val/test_2016_flickr .en/.de .gz) are in the public "
             "multi30k/dataset repository on GitHub under data/task1/raw; pass their folder with --data-dir "
             "(or set ATLAS_DATA_DIR for the tests).")


def resolve_data_dir(data_dir: str | Path | None) -> Path:
    """Default: ../shared/data/multi30k from the repository root, not from the working directory."""
    return Path(data_dir).expanduser().resolve() if data_dir else DEFAULT_DATA_DIR


def read_split(data_dir: str | Path, split: str, lang: str) -> list[str]:
    base = Path(data_dir)
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        path = base / name
        if path.is_file():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as handle:
                return [line.rstrip("\n") for line in handle]
    raise FileNotFoundError(f"{base / (split + '.' + lang + '.gz')}: not found. {DATA_HELP}")


def token_batches(source: list[list[int]], target: list[list[int]], max_tokens: int,
                  generator: torch.Generator) -> list[list[int]]:
    """Index batches of similar-length pairs whose padded size stays under max_tokens.

    Sorting by length (with random tie-breaks) keeps padding low; the batch order is shuffled.
    """
    noise = torch.rand(len(source), generator=generator).tolist()
    order = sorted(range(len(source)), key=lambda i: (len(source[i]), len(target[i]), noise[i]))
    batches, current, longest = [], [], 0
    for i in order:
        longest_if_added = max(longest, len(source[i]), len(target[i]) + 1)
        if current and longest_if_added * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest_if_added = [], max(len(source[i]), len(target[i]) + 1)
        current.append(i)
        longest = longest_if_added
    if current:
        batches.append(current)
    permutation = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[p] for p in permutation]


def collate(indices: list[int], source: list[list[int]], target: list[list[int]]):
    """Returns source (B, S), fed target (B, T) = <s> + y, gold (B, T) = y + </s>; PAD elsewhere."""
    B = len(indices)
    S = max(len(source[i]) for i in indices)
    T = max(len(target[i]) for i in indices) + 1
    src = torch.full((B, S), PAD_ID, dtype=torch.long)
    fed = torch.full((B, T), PAD_ID, dtype=torch.long)
    gold = torch.full((B, T), PAD_ID, dtype=torch.long)
    for row, i in enumerate(indices):
        s, t = source[i], target[i]
        src[row, : len(s)] = torch.tensor(s)
        fed[row, : len(t) + 1] = torch.tensor([BOS_ID] + t)
        gold[row, : len(t) + 1] = torch.tensor(t + [EOS_ID])
    return src, fed, gold
