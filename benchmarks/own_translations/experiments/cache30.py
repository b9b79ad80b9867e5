"""Free features of today's code for the labelled own translations of val 0-(stop-1) and, for the sentence model,
each source with the next case's output. Reads no label row with val >= stop.

    cache30.py MODEL [THREADS] [STOP]     # STOP 500 (session 29): runs/s30/ownfeats.{m}.pkl;
                                          # STOP 800 (session 30, cv31.py): runs/s30/ownfeats800.{m}.pkl;
                                          # STOP 1014 (session 31, cv32.py): runs/s31/ownfeats1014.{m}.pkl"""
import pickle
import sys
import time

import torch

from transformer import Translator
from transformer.diagnosis import fit_free as ff
from transformer.diagnosis.own import own_cases
from transformer.diagnosis.reverse import reverse_for
from transformer.diagnosis.signals import make_item
from transformer.training.data import read_split

torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
m = sys.argv[1]
t = time.time()
tr = Translator.load(f"pretrained/{m}")
rev = reverse_for(tr)
src = read_split("../shared/data/multi30k", "val", tr.source_lang)
stop = int(sys.argv[3]) if len(sys.argv) > 3 else 500
cases = own_cases(tr, src, m, 0, stop)
assert max(c.pair for c in cases) < stop
feats = ff.featurise(tr, rev, [c.item for c in cases])
others = []
for n, c in enumerate(cases):
    item = make_item(tr, c.source, cases[(n + 1) % len(cases)].output)
    item.free = True
    others.append(item)
swapped = ff.featurise(tr, rev, others)
out = f"runs/s30/ownfeats{'' if stop == 500 else stop}.{m}.pkl" if stop <= 800 else f"runs/s31/ownfeats{stop}.{m}.pkl"
pickle.dump((cases, feats, swapped), open(out, "wb"))
print(m, len(cases), f"{time.time() - t:.0f}s")
