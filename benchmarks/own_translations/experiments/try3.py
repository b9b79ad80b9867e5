import sys; sys.path.insert(0, "benchmarks/own_translations/experiments")
import numpy as np
import model
from judge import rows
from transformer.diagnosis.protocol import roc_auc
old = model.ocols2
def oc(out):
    c = old(out)
    c["rmax"] = -np.array([r["_rmax"] for _, _, r in out]); c["rneg"] = np.array([r["_rneg"] for _, _, r in out])
    c["rshare"] = -np.array([r["_rshare"] for _, _, r in out]); c["rpos"] = -np.array([r["_rpos"] for _, _, r in out])
    c["rsum"] = -np.array([r["_rsum"] for _, _, r in out])
    return c
model.ocols2 = oc
if __name__ == "__main__":
  for O in (["neg_log_p", "rev_full", "entropy", "unknown", "repeat", "run3", "lexicon_gap", "expected_translation"],
            ["neg_log_p", "rsum", "rmax", "rneg", "rshare", "rpos", "entropy", "unknown", "repeat", "run3", "lexicon_gap", "expected_translation"],
            ["neg_log_p", "rmax", "rneg", "rpos", "entropy", "unknown", "repeat", "run3", "lexicon_gap", "expected_translation"]):
      for m in ("en-de", "de-en"):
          r = model.evaluate(m, O, ["rebuild", "rebuild_sum", "lexicon_gap"])
          print(m, "out %.3f" % r["out"][0], r["out"][1])
