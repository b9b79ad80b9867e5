"""Features of the current code for the labelled own translations of val 0-499 (runs/s28/ownfeats.{m}.pkl)."""
import pickle, sys, time
import torch
from transformer import Translator
from transformer.training.data import read_split
from transformer.diagnosis import fit_free as ff
from transformer.diagnosis.own import own_cases
from transformer.diagnosis.reverse import reverse_for
torch.set_num_threads(1)
m = sys.argv[1]
t = time.time()
tr = Translator.load(f"pretrained/{m}"); rev = reverse_for(tr)
src = read_split("../shared/data/multi30k", "val", tr.source_lang)
cases = own_cases(tr, src, m, 0, 500)
feats = ff.featurise(tr, rev, [c.item for c in cases])
pickle.dump((cases, feats), open(f"runs/s28/ownfeats.{m}.pkl", "wb"))
print(m, len(cases), f"{time.time() - t:.0f}s")
