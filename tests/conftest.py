"""Shared fixtures. The tiny model is trained here in seconds on a generated reverse task,
so the model-core tests need neither the shipped models nor the Multi30k data."""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

torch.set_num_threads(int(os.environ.get("ATLAS_TEST_THREADS", "2")))

WORDS = ["red", "blue", "green", "dog", "cat", "man", "runs", "sits", "big", "small",
         "tree", "ball", "river", "girl", "jumps", "old"]


def random_sentences(n: int, seed: int, min_len: int = 3, max_len: int = 8) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(min_len, max_len))) for _ in range(n)]


def reverse(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


def train_tiny(norm_first: bool = True, steps: int = 450, seed: int = 0, tie: bool = True):
    """Train a 2+2-layer model to reverse word sequences. Returns (translator, losses)."""
    from transformer.config import ModelConfig
    from transformer.data import collate, token_batches
    from transformer.model import Transformer
    from transformer.tokenizer import Tokenizer
    from transformer.train import learning_rate, train_step
    from transformer.translator import Translator

    torch.manual_seed(seed)
    sentences = random_sentences(3000, seed)
    tokenizer = Tokenizer.train(sentences + [reverse(s) for s in sentences[:200]], vocab_size=40,
                                seed_sentencepiece_size=1000)
    cfg = ModelConfig(vocab_size=len(tokenizer), d_model=64, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=128, dropout=0.0, norm_first=norm_first,
                      tie_embeddings=tie, source_lang="xx", target_lang="yy")
    model = Transformer(cfg)
    source = [ids + [3] for ids in tokenizer.encode_batch(sentences)]
    target = tokenizer.encode_batch([reverse(s) for s in sentences])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    generator = torch.Generator().manual_seed(seed)
    losses, step = [], 0
    while step < steps:
        for batch in token_batches(source, target, 800, generator):
            step += 1
            loss, _ = train_step(model, optimizer, *collate(batch, source, target), label_smoothing=0.0,
                                 clip=1.0, lr=learning_rate(step, 3e-3, 100))
            losses.append(loss)
            if step >= steps:
                break
    model.eval()
    return Translator(model, tokenizer, card={"name": "tiny reverse"}, device="cpu"), losses


@pytest.fixture(scope="session")
def tiny():
    translator, losses = train_tiny()
    translator.train_losses = losses
    return translator


@pytest.fixture(scope="session")
def tiny_dir(tiny, tmp_path_factory):
    """The tiny model written as a model directory (fp32 so round trips are exact)."""
    from transformer.checkpoint import save_model_dir
    path = tmp_path_factory.mktemp("models") / "xx-yy"
    save_model_dir(path, tiny.model, tiny.tokenizer, card={"name": "tiny reverse", "scores": {}},
                   dtype=torch.float32)
    return path


# ---- browser tests: one app server and one Chromium for the whole session ----------------------
@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where browser tests save their screenshots: a temporary folder, so a test run leaves the
    repository as it was; `python -m tests.tour --out docs` points it at the README's pictures."""
    folder = os.environ.get("ATLAS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return Path(folder)
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="session")
def app_url(tmp_path_factory):
    from browser_utils import running_app
    with running_app(tmp_path_factory.mktemp("streamlit")) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    from browser_utils import CHROMIUM, CHROMIUM_ARGS
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
