"""Per-word features of the models' own greedy val translations: the shipped features + candidates."""
import json, sys, pickle, time
import numpy as np
from transformer import Translator
from transformer.training.data import read_split
from transformer.diagnosis.scores import features, diagnose_items, OUTPUT_FEATURES, SOURCE_FEATURES, diagnosis_weights, scored
from transformer.diagnosis.signals import make_item, compute_signals, output_words, content_words, forced_passes, word_texts
from transformer.diagnosis.lexicon import lexicon_for
from transformer.diagnosis.reverse import reverse_for, add_reverse, reverse_support
from transformer.diagnosis.protocol import piece_words
from transformer.diagnosis.word_align import words
D = "../shared/data/multi30k"
m = sys.argv[1]; sl, tl = m.split("-")
tr = Translator.load(f"pretrained/{m}", device="cpu")
rev = reverse_for(tr)
rows = [json.loads(l) for l in open(f"runs/s27/val.{m}.greedy.jsonl")]
train_words = {w.text.lower() for t in read_split(D, "train", tl) for w in words(t)}
special = frozenset(tr.engine.special_ids)
lex = lexicon_for(tr)
W = diagnosis_weights(tr)
items = [make_item(tr, r["source"], r["output"]) for r in rows]
t0 = time.time()
sigs = compute_signals(tr, items, None, lexicon=lex)
add_reverse(rev, items, sigs, special)
t1 = time.time()
# all flaggable output words tested by the reverse model (ungated)
ogroups = [output_words(it, len(it.output_ids), special) for it in items]
full_rev = reverse_support(rev, items, [g for g, _ in ogroups], [np.asarray(on, bool) for _, on in ogroups])
t2 = time.time()
# reverse rebuild: rev reads the output, writes the source; and with a null output
rr = []
for it in items:
    fed = [rev.engine.start_id] + list(it.source_ids)[:-1]
    null = [i for i in it.output_ids if i in special] or list(it.output_ids)[-1:]
    rr.append((list(it.output_ids), fed, list(it.source_ids)))
    rr.append((null, fed, list(it.source_ids)))
rp = forced_passes(rev, rr, None, top=0)
t3 = time.time()
print("times", t1 - t0, t2 - t1, t3 - t2, flush=True)
out = []
for n, (r, it, sig) in enumerate(zip(rows, items, sigs)):
    f = features(sig, it, special, lex, tr.engine.tokenizer.id_to_piece)
    dg = scored(f, W, it)
    lp_rev, lp_rev_null = rp[2 * n][0], rp[2 * n + 1][0]
    sp = piece_words(it.source_pieces, r["source"], set())
    op = piece_words(it.output_pieces, r["output"], set())
    owords = words(r["output"])
    src_rows = []
    for w, (g, on) in enumerate(zip(f["source_groups"], f["source_flaggable"])):
        src_rows.append(dict(word=int(sp[g[0]]), text="".join(it.source_pieces[j] for j in g).replace("\u2581", ""),
                             on=bool(on), x=f["source"][w].tolist(), score=float(dg.omission[g[0]]),
                             rebuild=float(lp_rev[g].min()), rebuild_mean=float(lp_rev[g].mean()),
                             rebuild_pmi=float((lp_rev[g] - lp_rev_null[g]).min()),
                             rebuild_sum=float(lp_rev[g].sum())))
    out_rows = []
    prev = None
    for k, (g, on) in enumerate(zip(f["output_groups"], f["output_flaggable"])):
        text = "".join(it.output_pieces[j] for j in g).replace("\u2581", "")
        wi = int(op[g[0]])
        wt = owords[wi].text if 0 <= wi < len(owords) else text
        maxrun = max((len(s) for s in __import__("re").findall(r"((.)\2*)", text.lower()) for s in [s[0]]), default=0)
        out_rows.append(dict(word=wi, text=text, on=bool(on), x=f["output"][k].tolist(), score=float(dg.hallucination[g[0]]),
                             unknown=float(text.lower().strip("-") not in train_words and not text.isdigit()),
                             maxrun=maxrun, repeat=float(prev is not None and prev == text.lower()),
                             rev_full=float(full_rev[n][k]) if not np.isnan(full_rev[n][k]) else 0.0,
                             log_p=[float(x) for x in sig.log_p[g]], pmi=[float(x) for x in (sig.log_p - sig.log_p_null)[g]]))
        prev = text.lower()
    out.append(dict(i=r["i"], src=src_rows, out=out_rows, sentence=float(dg.sentence_score), flags=len(dg.flags),
                    mean_lp=float(sig.log_p.mean()), mean_pmi=float((sig.log_p - sig.log_p_null).mean()),
                    mean_rebuild=float(lp_rev.mean()), mean_rebuild_pmi=float((lp_rev - lp_rev_null).mean())))
pickle.dump(out, open(f"runs/s27/feats.{m}.pkl", "wb"))
print("done", m, sum(o["flags"] > 0 for o in out), "of", len(out), "flagged")
