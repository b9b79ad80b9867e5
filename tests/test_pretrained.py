"""The shipped models score what their cards say, on the first 200 test_2016_flickr sentences."""
import os
from pathlib import Path

import pytest

from transformer import Translator
from transformer.training.data import DATA_HELP, resolve_data_dir
from transformer.training.evaluate import evaluate

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (REPO / "pretrained").iterdir() if (p / "config.json").is_file())
DATA_DIR = resolve_data_dir(os.environ.get("ATLAS_DATA_DIR"))


def test_both_directions_are_shipped():
    assert {"en-de", "de-en"} <= set(SHIPPED), SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_matches_its_card(name):
    path = REPO / "pretrained" / name
    assert (path / "model.safetensors").stat().st_size <= 25 * 1024 * 1024
    tr = Translator.load(path, device="cpu")
    src, tgt = name.split("-")
    assert (tr.source_lang, tr.target_lang) == (src, tgt)
    card = tr.card
    for split in ("val", "test_2016_flickr"):
        for decoding in ("greedy", "beam4"):
            assert {"bleu", "chrf"} <= set(card["scores"][split][decoding])
    if not (DATA_DIR / "test_2016_flickr.en.gz").is_file():
        pytest.skip(f"Multi30k not found at {DATA_DIR}. {DATA_HELP}")
    result = evaluate(tr, DATA_DIR, "test_2016_flickr", beam_size=1, limit=200)
    expected = card["scores"]["test_2016_flickr_first200"]["greedy"]["bleu"]
    assert abs(result["bleu"] - expected) <= 2.0, (result["bleu_text"], expected)
