"""AUCs of each signal on own translations: hand labels (both annotators) and silver labels."""
import json, pickle, re, sys
import numpy as np
from transformer.diagnosis.protocol import roc_auc
from transformer.diagnosis.word_align import words
from transformer.diagnosis.scores import OUTPUT_FEATURES, SOURCE_FEATURES

def load_hand(m):
    """val index -> (annotator A's labels, B's), from the committed benchmarks/own_translations/{m}.jsonl."""
    H = {}
    for line in open(f"benchmarks/own_translations/{m}.jsonl", encoding="utf-8"):
        row = json.loads(line)
        H[row["val"]] = (dict(row["A"], i=row["val"]), dict(row["B"], i=row["val"]))
    return H


def subwords(tokens):
    return {s.lower() for t in tokens for s in re.findall(r"\w+", t)}

def word_label(text, a_list, b_list):
    """1 both list it, 0 neither, None one only."""
    t = text.lower()
    ina, inb = t in subwords(a_list), t in subwords(b_list)
    return 1 if ina and inb else 0 if not ina and not inb else None

def rows(m, which="hand", lo=0, hi=200):
    F = pickle.load(open(f"runs/s27/feats.{m}.pkl", "rb"))
    V = [json.loads(l) for l in open(f"runs/s27/val.{m}.greedy.jsonl")]
    H = load_hand(m)
    S = {json.loads(l)["i"]: json.loads(l) for l in open(f"runs/s27/silver.{m}.jsonl")}
    src, out, sent = [], [], []
    for f in F:
        i = f["i"]
        if not (lo <= i < hi):
            continue
        v = V[i]
        sw, ow = words(v["source"]), words(v["output"])
        if which == "hand":
            if i not in H: continue
            a, b = H[i]
            la = lambda text: word_label(text, a["omitted"], b["omitted"])
            lw = lambda text: word_label(text, a["wrong"], b["wrong"])
            ok = a["ok"] and b["ok"]; bad = (not a["ok"]) and (not b["ok"])
            det = a["detached"] and b["detached"]
            sent.append(dict(i=i, ok=ok, bad=bad, det=det, f=f))
        else:
            s = S[i]
            om = {sw[k].text.lower() for k in s["omitted_idx"]}
            wr = {ow[k].text.lower() for k in s["wrong_idx"]}
            la = lambda text: int(text.lower() in om)
            lw = lambda text: int(text.lower() in wr)
            sent.append(dict(i=i, ok=not om and not wr, bad=bool(om or wr), det=False, f=f))
        for r in f["src"]:
            if not r["on"]: continue
            t = sw[r["word"]].text if 0 <= r["word"] < len(sw) else r["text"]
            y = la(t)
            if y is not None: src.append((i, y, r))
        seen = {}
        for r in f["out"]:
            t = ow[r["word"]].text if 0 <= r["word"] < len(ow) else r["text"]
            k = t.lower(); seen[k] = seen.get(k, 0) + 1
            r["_copy"] = seen[k] - 1
            if not r["on"]: continue
            y = lw(t)
            # a listed word written more than once: the annotators list the repeated copy, so the first is not it
            if y == 1 and seen[k] == 1 and sum(1 for w in ow if w.text.lower() == k) > 1:
                y = 0
            if y is not None: out.append((i, y, r))
    return src, out, sent

if __name__ == "__main__":
    for m in ("en-de", "de-en"):
        for which in ("hand", "silver"):
            src, out, sent = rows(m, which)
            ys = np.array([y for _, y, _ in src]); yo = np.array([y for _, y, _ in out])
            print(f"== {m} {which}: source words {len(ys)} ({ys.sum()} omitted), output words {len(yo)} ({yo.sum()} wrong), "
                  f"outputs ok {sum(s['ok'] for s in sent)} bad {sum(s['bad'] for s in sent)}")
            X = np.array([r["x"] for _, _, r in src])
            cols = {n: X[:, k] for k, n in enumerate(SOURCE_FEATURES)}
            for n in ("rebuild", "rebuild_mean", "rebuild_pmi", "rebuild_sum"):
                cols[n] = -np.array([r[n] for _, _, r in src])
            cols["shipped score"] = np.array([r["score"] for _, _, r in src])
            print("  omission:", ", ".join(f"{n} {roc_auc(v, ys):.3f}" for n, v in cols.items()))
            X = np.array([r["x"] for _, _, r in out])
            cols = {n: X[:, k] for k, n in enumerate(OUTPUT_FEATURES)}
            for n in ("unknown", "maxrun", "repeat"):
                cols[n] = np.array([r[n] for _, _, r in out])
            cols["rev_full"] = -np.array([r["rev_full"] for _, _, r in out])
            cols["shipped score"] = np.array([r["score"] for _, _, r in out])
            print("  unsupported:", ", ".join(f"{n} {roc_auc(v, yo):.3f}" for n, v in cols.items()))
