"""Silver labels for the models' own val translations: eflomal (train + val refs + val outputs)."""
import json, sys, tempfile
from pathlib import Path
import eflomal
from transformer.training.data import read_split
from transformer.diagnosis.word_align import words
from transformer.diagnosis.protocol import is_content
from transformer.diagnosis.lexicon import read_lexicon, stem
D = "../shared/data/multi30k"

def links(src, tgt):
    S = [" ".join(w.text.lower() for w in words(s)) for s in src]
    T = [" ".join(w.text.lower() for w in words(t)) for t in tgt]
    with tempfile.TemporaryDirectory() as tmp:
        f, r = Path(tmp, "f"), Path(tmp, "r")
        eflomal.Aligner().align(S, T, links_filename_fwd=str(f), links_filename_rev=str(r), quiet=True)
        out = []
        for a, b in zip(f.read_text().splitlines(), r.read_text().splitlines()):
            la = {tuple(map(int, x.split("-"))) for x in a.split()}
            lb = {tuple(map(int, x.split("-"))) for x in b.split()}
            out.append((la & lb, la | lb))
    return out

for sl, tl in (("en", "de"), ("de", "en")):
    rows = [json.loads(l) for l in open(f"runs/s27/val.{sl}-{tl}.greedy.jsonl")]
    trs, trt = read_split(D, "train", sl), read_split(D, "train", tl)
    n = len(rows)
    src = trs + [r["source"] for r in rows] + [r["source"] for r in rows]
    tgt = trt + [r["reference"] for r in rows] + [r["output"] for r in rows]
    L = links(src, tgt)
    ref_links, out_links = L[len(trs):len(trs) + n], L[len(trs) + n:]
    lex = read_lexicon(f"pretrained/{sl}-{tl}")
    train_words = {w.text.lower() for t in trt for w in words(t)}
    with open(f"runs/s27/silver.{sl}-{tl}.jsonl", "w") as fo:
        for r, (ri, ru), (oi, ou) in zip(rows, ref_links, out_links):
            sw, rw, ow = words(r["source"]), words(r["reference"]), words(r["output"])
            ostems = {L_: {stem(w.text, L_) for w in ow} for L_ in (4, 5)}
            rstems = {stem(w.text, 4) for w in rw}
            omitted = []
            for i, w in enumerate(sw):
                if not is_content(w, sl):
                    continue
                if any(a == i for a, _ in ou):
                    continue
                refw = [rw[j].text for a, j in ri if a == i and j < len(rw)]
                if any(stem(x, 4) in ostems[4] for x in refw):
                    continue
                if any(lex.usual(w.text, L_) & ostems[L_] for L_ in (4, 5)):
                    continue
                omitted.append(i)
            wrong = []
            for j, w in enumerate(ow):
                if not w.text.isalpha():
                    continue
                garbled = w.text.lower() not in train_words
                repeat = j > 0 and ow[j - 1].text.lower() == w.text.lower()
                if garbled or repeat:
                    wrong.append(j); continue
                if not is_content(w, tl):
                    continue
                if any(b == j for _, b in ou):
                    continue
                if stem(w.text, 4) in rstems:
                    continue
                wrong.append(j)
            fo.write(json.dumps({"i": r["i"], "omitted": [sw[i].text for i in omitted], "omitted_idx": omitted,
                                 "wrong": [ow[j].text for j in wrong], "wrong_idx": wrong}, ensure_ascii=False) + "\n")
    print(sl, tl, "done", flush=True)
