"""Session 31: the blind labels of the typed sentences (two annotators per model, runs/s31/typed/labels.*)
written as benchmarks/own_translations/typed.{pair}.jsonl, one row per sentence with its source, after the
outputs were checked to be what today's models write. Run only after the free lines were frozen (cv32.py).
Prints the annotators' agreement on ok and on the words both list."""
import json
import re

from transformer import Translator

KEYS = ("omitted", "wrong", "minor", "ok", "detached")


def words(xs):
    return {w.lower() for x in xs for w in re.findall(r"\w+", x)}


for pair in ("en-de", "de-en"):
    items = [json.loads(line) for line in open(f"runs/s31/typed/items.{pair}.jsonl", encoding="utf-8")]
    a, b = ([json.loads(line) for line in open(f"runs/s31/typed/labels.{pair}.{who}.jsonl", encoding="utf-8")]
            for who in "AB")
    assert [x["i"] for x in items] == [x["i"] for x in a] == [x["i"] for x in b] == list(range(len(items)))
    tr = Translator.load(f"pretrained/{pair}", device="cpu")
    now = tr.translate_batch([x["source"] for x in items])
    same = sum(o == x["output"] for o, x in zip(now, items))
    with open(f"benchmarks/own_translations/typed.{pair}.jsonl", "w", encoding="utf-8") as out:
        for item, la, lb in zip(items, a, b):
            out.write(json.dumps({"typed": item["i"], "source": item["source"], "output": item["output"],
                                  "A": {k: la[k] for k in KEYS}, "B": {k: lb[k] for k in KEYS}},
                                 ensure_ascii=False) + "\n")
    ok = sum(x["ok"] == y["ok"] for x, y in zip(a, b))
    both_ok = sum(x["ok"] and y["ok"] for x, y in zip(a, b))
    both_bad = sum(not x["ok"] and not y["ok"] for x, y in zip(a, b))
    cells = {}
    for key in ("omitted", "wrong"):
        na = sum(len(words(x[key])) for x in a)
        nb = sum(len(words(y[key])) for y in b)
        both = sum(len(words(x[key]) & words(y[key])) for x, y in zip(a, b))
        cells[key] = f"{both} of {na}/{nb}"
    print(f"{pair}: {len(items)} items, {same} outputs what the model writes today; agree on ok {ok}/{len(items)} "
          f"(both ok {both_ok}, both not ok {both_bad}); words both list: left out {cells['omitted']}, "
          f"wrong {cells['wrong']}")
