import sys
from transformer import Translator
from transformer.training.data import read_split
from transformer.diagnosis.own import own_cases
from transformer.diagnosis.scores import diagnose_items
from viz.diagnosis import words_of
m = sys.argv[1]
tr = Translator.load(f"pretrained/{m}")
cases = own_cases(tr, read_split("../shared/data/multi30k", "val", tr.source_lang), m, 0, 200)
ds = diagnose_items(tr, [c.item for c in cases])
for c, d in zip(cases, ds):
    if c.ok and d.flags:
        fl = [(f.kind[0], words_of((c.item.output_pieces if f.kind == "hallucination" else c.item.source_pieces)[f.start:f.end]), round(f.score, 2)) for f in d.flags]
        print(c.pair, fl, "|", c.source, "->", c.output)
