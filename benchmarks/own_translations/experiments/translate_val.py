import json, gzip, sys
from transformer import Translator
from transformer.training.data import read_split
data = "../shared/data/multi30k"
for src, tgt in (("en", "de"), ("de", "en")):
    tr = Translator.load(f"pretrained/{src}-{tgt}", device="cpu")
    S, R = read_split(data, "val", src), read_split(data, "val", tgt)
    outs = tr.translate_batch(S)
    with open(f"runs/s27/val.{src}-{tgt}.greedy.jsonl", "w") as f:
        for i, (s, r, o) in enumerate(zip(S, R, outs)):
            f.write(json.dumps({"i": i, "source": s, "reference": r, "output": o}, ensure_ascii=False) + "\n")
    print(src, tgt, len(outs), flush=True)
