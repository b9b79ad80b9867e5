"""Session 31: each shipped model's greedy translation (what the app shows) of the typed sentences
(runs/s31/typed/sources.{lang}.txt, written by helpers told not to read Multi30k; a sentence found verbatim in
Multi30k train or val is dropped) as annotation items runs/s31/typed/items.{pair}.jsonl: typed index, source,
output (no reference: the annotators judge the output against the source)."""
import gzip
import json

from transformer import Translator

data = "../shared/data/multi30k"
for src, tgt in (("en", "de"), ("de", "en")):
    seen = {line.strip() for split in ("train", "val") for line in gzip.open(f"{data}/{split}.{src}.gz", "rt")}
    typed = [s.strip() for s in open(f"runs/s31/typed/sources.{src}.txt", encoding="utf-8") if s.strip()]
    typed = [s for s in typed if s not in seen]
    tr = Translator.load(f"pretrained/{src}-{tgt}", device="cpu")
    outputs = tr.translate_batch(typed)
    assert all(tr.translate(s).text == o for s, o in list(zip(typed, outputs))[:20])
    with open(f"runs/s31/typed/items.{src}-{tgt}.jsonl", "w", encoding="utf-8") as f:
        for i, (s, o) in enumerate(zip(typed, outputs)):
            f.write(json.dumps({"i": i, "source": s, "output": o}, ensure_ascii=False) + "\n")
    print(src, tgt, len(outputs), flush=True)
