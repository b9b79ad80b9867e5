"""Session 30: the blind labels of val 800-1013 (two annotators per model, runs/s30/annot/labels4.*) appended
to benchmarks/own_translations/{pair}.jsonl as rows like the others, after the outputs were checked to be
today's (runs/s27's greedy outputs, which rows 0-799 match)."""
import json

KEYS = ("omitted", "wrong", "minor", "ok", "detached")
for pair in ("en-de", "de-en"):
    path = f"benchmarks/own_translations/{pair}.jsonl"
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    assert [r["val"] for r in rows] == list(range(800)), "rows 0-799, once"
    items = [json.loads(line) for line in open(f"runs/s30/annot/items4.{pair}.jsonl", encoding="utf-8")]
    a, b = ([json.loads(line) for line in open(f"runs/s30/annot/labels4.{pair}.{who}.jsonl", encoding="utf-8")]
            for who in "AB")
    assert [x["i"] for x in items] == [x["i"] for x in a] == [x["i"] for x in b] == list(range(800, 1014))
    with open(path, "a", encoding="utf-8") as out:
        for item, la, lb in zip(items, a, b):
            out.write(json.dumps({"val": item["i"], "output": item["output"], "A": {k: la[k] for k in KEYS},
                                  "B": {k: lb[k] for k in KEYS}}, ensure_ascii=False) + "\n")
    print(pair, len(rows) + len(items))
