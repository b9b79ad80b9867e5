"""A room full of people: many sessions at once over Streamlit's websocket protocol.

    python benchmarks/bench_serving.py [--sessions 40 100] [--turns 6] [--via-proxy] [--rss 500] [--bad-input]
    python benchmarks/bench_serving.py --views all [--norm] [--sessions 40] [--turns 3]

Starts the app and, in the same run with the same server settings, the floor: serving/floor_app.py,
one chart with torch and our model loaded. Each session connects to /_stcore/stream and asks for one
run of the share link (as a browser does); the time to its first chart is from the start of its
connection to the arrival of the first plotly_chart element. All N sessions of a crowd start at once;
the app and the floor take turns (which goes first alternates), each crowd starts when both servers
are idle (the last crowd's sessions closed), and a warm-up session loads the model first. Reported per
crowd: p50 and p95 to the first chart, failures (no chart, an error on the page, a timeout), RSS before
and after, and the app / floor ratio of the p95; per size, the median of the per-turn ratios.

--views all | NAME ...: the crowds for the share link of each view (atlas_ui/views VIEWS; Beam with
beam=4, Ablation with ablate=cross:2:3), one table row per view: p50, p95, the floor's p95 in the same
turns, the median ratio, failures, the bytes a session received, and each server's CPU time per
session (steadier than wall time when other work shares the machine). --norm adds the norm-weighted
link (norm=1) of every view that has the switch; --branch adds each view's link with a what-if branch
open (branch=: the model's first piece, then its second choice; issue 23).
--via-proxy: also 2 app processes behind nginx (serving/proxy.py), the same crowds; ratio to one process.
--rss N: N sessions with varied sentences and views, 20 at a time; RSS every 50 sessions.
--bad-input: while normal sessions open the link, sessions that disconnect mid-run, a flood of reruns
from one session, and 40 sessions opening a 1,000-character sentence. Every normal session must still
get its chart.

Goals (issue 14): p95 <= 3x the floor's at 40 and at 100 sessions, 0 failures; 2 processes behind the
proxy <= 0.6x one process at 100; RSS <= 700 MB after 500 varied sessions, flat over the last 200.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import statistics
import sys
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from serving.client import RunRecord, bad_input_crowd, crowd, open_link, percentile  # noqa: E402
from serving.proxy import ProxiedApp  # noqa: E402
from serving.servers import AppServer, cpu_seconds, rss_mb, settle  # noqa: E402

LINK = {"model": "en-de", "sentence": "A man in a red jacket is riding his bicycle down a narrow street.",
        "view": "Heatmap"}
# what a view's link needs besides view=NAME to show its chart at once
VIEW_PARAMS = {"Beam": {"beam": 4}, "Ablation": {"ablate": "cross:2:3"}}
VARIED_VIEWS = ("Heatmap", "Layer grid", "Overview", "Decoding steps", "Head summary", "Rollout",
                "Positional encodings", "Beam", "Ablation", "Masks", "Compare")


def summary(records: list[RunRecord]) -> dict:
    times = [r.first_chart for r in records if r.ok]
    failures = [r for r in records if not r.ok]
    return {"n": len(records), "ok": len(times), "failures": len(failures),
            "p50": percentile(times, 50) if times else float("nan"),
            "p95": percentile(times, 95) if times else float("nan"),
            "first_failure": (failures[0].errors or ["no chart"])[0] if failures else "",
            "kb": statistics.median(r.bytes_received for r in records) / 1024 if records else float("nan")}


def run_crowd(url: str, pids: list[int], query: str, n: int, idle: list[int] = ()) -> dict:
    """One crowd of n sessions at once, started when these servers and `idle` ones are quiet."""
    settle(list(pids) + list(idle))
    before, cpu = sum(rss_mb(pid) for pid in pids), sum(cpu_seconds(pid) for pid in pids)
    result = summary(asyncio.run(crowd(url, [query] * n)))
    # the servers' CPU per session: far steadier than wall time on a machine others share
    result.update(rss_before=before, rss_after=sum(rss_mb(pid) for pid in pids),
                  cpu_ms=(sum(cpu_seconds(pid) for pid in pids) - cpu) * 1000 / n)
    return result


def line(name: str, r: dict) -> str:
    return (f"  {name:<22} {r['n']:>4} sessions  p50 {r['p50']:6.2f} s  p95 {r['p95']:6.2f} s  "
            f"failures {r['failures']}  RSS {r['rss_before']:.0f} -> {r['rss_after']:.0f} MB"
            + (f"  ({r['first_failure']})" if r["failures"] else ""))


def crowds(args, query: str) -> None:
    """The app and the floor, one process each, taking turns; then the proxy if asked."""
    with AppServer("app.py") as app, AppServer("serving/floor_app.py") as floor:
        for server in (app, floor):
            warm = asyncio.run(open_link(server.url, query))
            if not warm.ok:
                raise SystemExit(f"warm-up session failed on {server.app}: {warm.errors}")
        one_process = {}
        for n in args.sessions:
            ratios, app_p95 = [], []
            for turn in range(1, args.turns + 1):
                # the two take turns, and which goes first alternates, so drift in the machine's
                # speed falls on both alike
                both = [app.process.pid, floor.process.pid]
                if turn % 2:
                    a = run_crowd(app.url, [app.process.pid], query, n, both)
                    f = run_crowd(floor.url, [floor.process.pid], query, n, both)
                else:
                    f = run_crowd(floor.url, [floor.process.pid], query, n, both)
                    a = run_crowd(app.url, [app.process.pid], query, n, both)
                print(f"{n} sessions, turn {turn}:")
                print(line("app", a))
                print(line("floor", f))
                print(f"  app / floor p95: {a['p95'] / f['p95']:.2f}x", flush=True)
                ratios.append(a["p95"] / f["p95"])
                app_p95.append(a["p95"])
            print(f"{n} sessions: app / floor p95 over {len(ratios)} turns: median {statistics.median(ratios):.2f}x "
                  f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x; goal <= 3x); app p95 median "
                  f"{statistics.median(app_p95):.2f} s", flush=True)
            one_process[n] = dict(a, p95=statistics.median(app_p95))
    if args.via_proxy:
        with ProxiedApp(processes=args.processes) as proxy:
            url, proxied = proxy.url, None
            warm = asyncio.run(open_link(url, query))
            if not warm.ok:
                raise SystemExit(f"warm-up through the proxy failed: {warm.errors}")
            # every process loads the model on its first session: warm each one
            asyncio.run(crowd(url, [query] * (4 * args.processes)))
            for n in args.sessions:
                p95s = []
                for turn in range(1, args.turns + 1):
                    proxied = run_crowd(url, proxy.pids(), query, n)
                    p95s.append(proxied["p95"])
                print(f"{n} sessions, {args.processes} processes behind nginx (last of {args.turns} turns):")
                print(line("proxied", proxied))
                print(f"  proxied / one process p95, medians over the turns: "
                      f"{statistics.median(p95s):.2f} s / {one_process[n]['p95']:.2f} s = "
                      f"{statistics.median(p95s) / one_process[n]['p95']:.2f}x (goal <= 0.6x at 100)", flush=True)


def branch_param(sentence: str = LINK["sentence"], model: str = "pretrained/en-de") -> str:
    """A what-if branch of `sentence` as a share link holds it (branch=): the model's first piece,
    then its second choice at step 2 (issue 23: a page with a branch open)."""
    from transformer import Translator
    out = Translator.load(str(REPO / model), device="cpu").translate(sentence, capture=False, top_k=2)
    return " ".join([out.output_tokens[0], out.steps[1].top_k[1][0]])


def view_links(names: list[str], norm: bool, branch: str = "") -> list[tuple[str, str]]:
    """(label, query) of each view's share link; with `norm`, also norm=1 for views with the switch."""
    from atlas_ui.views import VIEWS          # here: the other modes need no app import
    names = list(VIEWS) if names == ["all"] else names
    unknown = [name for name in names if name not in VIEWS]
    if unknown:
        raise SystemExit(f"unknown view(s) {unknown}; the views are {list(VIEWS)}")
    links = []
    for name in names:
        params = {**LINK, "view": name, **VIEW_PARAMS.get(name, {}), **({"branch": branch} if branch else {})}
        links.append((name + (" branch" if branch else ""), urlencode(params)))
        if norm and VIEWS[name].norm_switch:
            links.append((f"{name} norm=1", urlencode({**params, "norm": 1})))
    return links


def per_view(args) -> None:
    """Each view's link against the floor, side by side, `turns` crowds each; one row per view."""
    links = view_links(args.views, args.norm)
    if args.branch:                                      # issue 23: the same links with a what-if branch open
        links += view_links(args.views, False, branch_param())
    rows = []
    with AppServer("app.py") as app, AppServer("serving/floor_app.py") as floor:
        if not asyncio.run(open_link(floor.url, urlencode(LINK))).ok:
            raise SystemExit("warm-up session failed on the floor")
        both = [app.process.pid, floor.process.pid]
        for label, query in links:
            warm = asyncio.run(open_link(app.url, query))       # the view's translation, cached
            for n in args.sessions:
                turns = []
                for turn in range(1, args.turns + 1):
                    order = ((app, "a"), (floor, "f")) if turn % 2 else ((floor, "f"), (app, "a"))
                    got = {tag: run_crowd(server.url, [server.process.pid], query, n, both) for server, tag in order}
                    turns.append(got)
                    print(f"  {label:<24} {n} sessions, turn {turn}: app p95 {got['a']['p95']:.2f} s, floor p95 "
                          f"{got['f']['p95']:.2f} s, {got['a']['p95'] / got['f']['p95']:.2f}x; CPU per session "
                          f"{got['a']['cpu_ms']:.1f} / {got['f']['cpu_ms']:.1f} ms", flush=True)
                med = lambda values: statistics.median(values)  # noqa: E731
                rows.append(dict(view=label, n=n, warm_ok=warm.ok, p50=med(t["a"]["p50"] for t in turns),
                                 p95=med(t["a"]["p95"] for t in turns), floor=med(t["f"]["p95"] for t in turns),
                                 ratio=med(t["a"]["p95"] / t["f"]["p95"] for t in turns),
                                 failures=sum(t["a"]["failures"] for t in turns), kb=med(t["a"]["kb"] for t in turns),
                                 cpu=med(t["a"]["cpu_ms"] for t in turns), floor_cpu=med(t["f"]["cpu_ms"] for t in turns),
                                 first_failure=next((t["a"]["first_failure"] for t in turns if t["a"]["failures"]), "")))
    print(f"\nEach view's share link, medians over {args.turns} turns (app p95 / floor p95 of each turn; goal <= 3x):")
    print(f"  {'view':<24} {'sessions':>8} {'p50 s':>7} {'p95 s':>7} {'floor p95 s':>11} {'ratio':>6} "
          f"{'failures':>8} {'KB/session':>10} {'CPU ms/session app / floor':>27}")
    for r in rows:
        print(f"  {r['view']:<24} {r['n']:>8} {r['p50']:7.2f} {r['p95']:7.2f} {r['floor']:11.2f} {r['ratio']:5.2f}x "
              f"{r['failures']:>8} {r['kb']:10.0f} {r['cpu']:12.1f} / {r['floor_cpu']:4.1f} = {r['cpu'] / r['floor_cpu']:4.1f}x"
              + (f"  ({r['first_failure']})" if r["failures"] else ""))


def varied_queries(count: int) -> list[str]:
    rows = list(csv.DictReader(open(REPO / "pretrained" / "examples.tsv", encoding="utf-8"), delimiter="\t"))
    combos = itertools.cycle(itertools.product(rows, VARIED_VIEWS, ("encoder_self", "cross", "decoder_self")))
    queries = []
    for i, (row, view, kind) in zip(range(count), combos):
        queries.append(urlencode({"model": "en-de", "sentence": row["en"], "view": view, "kind": kind,
                                  "layer": i % 3, "head": i % 8, "words": i % 2 or None} if i % 2 else
                                 {"model": "en-de", "sentence": row["en"], "view": view, "kind": kind}))
    return queries


def memory(total: int, wave: int = 20) -> None:
    with AppServer("app.py") as app:
        asyncio.run(open_link(app.url, urlencode(LINK)))
        print(f"RSS after the warm-up session: {app.rss_mb():.0f} MB")
        queries, failures, samples = varied_queries(total), 0, []
        for start in range(0, total, wave):
            records = asyncio.run(crowd(app.url, queries[start:start + wave]))
            # a failure: an error on the page or a run that did not end (Ablation draws no chart
            # until heads are ticked, so a missing chart is not one here)
            failures += sum(bool(r.errors) or r.finished is None for r in records)
            done = start + len(records)
            if done % 50 == 0 or done == total:
                samples.append((done, app.rss_mb()))
                print(f"  {done:>4} sessions: RSS {samples[-1][1]:.0f} MB, failures so far {failures}", flush=True)
        tail = [rss for done, rss in samples if done >= total - 200]
        print(f"RSS after {total} varied sessions: {samples[-1][1]:.0f} MB (goal <= 700); over the last 200: "
              f"{min(tail):.0f}..{max(tail):.0f} MB (spread {max(tail) - min(tail):.0f} MB); failures {failures}")


def bad_input(args) -> None:
    with AppServer("app.py") as app:
        asyncio.run(open_link(app.url, urlencode(LINK)))
        grouped = asyncio.run(bad_input_crowd(app.url, urlencode(LINK), normal=40, long_sessions=40, leavers=20, flood=50))
        for name in ("normal", "long"):
            print(line(name, {**summary(grouped[name]), "rss_before": float("nan"), "rss_after": app.rss_mb()}))
        flood = grouped["flood"][0]
        print(f"  flood of 50 reruns: errors {flood.errors or 'none'}, charts received {flood.charts}")
        after = asyncio.run(crowd(app.url, [urlencode(LINK)] * 10))
        print(f"  10 sessions after it all: {sum(r.ok for r in after)} ok")
        text = app.log_path.read_text(errors="replace")
        print(f"  server log: {text.count('Traceback')} tracebacks, {text.count('Error')} lines naming an error")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[40, 100])
    parser.add_argument("--turns", type=int, default=6,
                        help="crowds per size and app; the median of the per-turn ratios is the result")
    parser.add_argument("--via-proxy", action="store_true")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rss", type=int, default=0, help="varied sessions for the memory check")
    parser.add_argument("--bad-input", action="store_true")
    parser.add_argument("--skip-crowds", action="store_true")
    parser.add_argument("--views", nargs="+", metavar="VIEW",
                        help="'all' or view names: the crowds for each view's share link instead of the Heatmap's")
    parser.add_argument("--norm", action="store_true", help="with --views: also each norm-switch view with norm=1")
    parser.add_argument("--branch", action="store_true",
                        help="with --views: also each view's link with a what-if branch open (branch=)")
    args = parser.parse_args(argv)
    if args.views:
        per_view(args)
    elif not args.skip_crowds:
        crowds(args, urlencode(LINK))
    if args.rss:
        memory(args.rss)
    if args.bad_input:
        bad_input(args)


if __name__ == "__main__":
    main()
