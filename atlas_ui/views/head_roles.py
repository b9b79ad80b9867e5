"""Head roles: what each head does over a corpus (head_roles.json, `python -m transformer heads`),
and the word alignment of the sentence on screen, scored against a gold alignment the user types
(issue 34, item 2 and the in-app part of item 3)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from viz.roles import KIND_TITLES, alignment_figure, head_roles_figure, role_table, roles_selection

from ..ui import state
from ..ui.common import (chart, column_width, escape_md, n_heads, n_layers, pick_head, pick_kind, pick_layer,
                           shared_figure, shared_table)
from ..runs.alignment import alignment_key, alignment_run, gold_report, head_roles, parse_gold, sentence_shares
from ..server.settings import KINDS, max_concurrent
from .base import View, ViewContext
from .shared import head_heatmap, spinner_unless_held

MAP_CHART, ALIGN_CHART = "roles_map", "roles_alignment_chart"
GOLD = "role_gold"             # the gold alignment typed by the user (share link: gold=)
GOLD_LIMIT = 2000              # characters of gold read (a sentence has at most a few hundred links)
NO_FILE = ("This model has no head_roles.json (run `python -m transformer heads --model M` to make one), so its "
           "heads have no roles; the alignment below uses ALTI+ with mutual argmax, the method that needs no fitting.")
METHODS = {"combination": "a combination of heads, layers, norms and ALTI+ fitted on Multi30k val",
           "alti+": "ALTI+ source contributions"}
# Constants only (no user text). A role map's cells are a few px wide on a phone: keep the colours.
# There the source words stand upright and fill the alignment's top margin, where its title is: the
# title goes (the caption and the gold line below say the same).
PHONE_CSS = ("<style>@media (max-width:640px){.st-key-roles_maps .heatmaplayer text{display:none}"
             ".st-key-roles_alignment .gtitle{display:none}}</style>")


def render(ctx: ViewContext):
    result, display = ctx.result, ctx.display
    key = alignment_key(ctx.run, tuple(result.output_tokens))    # the page's run, over the pieces on screen
    run = spinner_unless_held(key, "Aligning the words…", lambda: alignment_run(key, max_concurrent()))
    roles = head_roles(ctx.model, ctx.device)
    picture = st.container(key="roles_alignment")             # drawn first, filled once the gold is read
    gold_text = state.text_input(
        "Gold alignment for this sentence (optional)", GOLD, placeholder="0-0 1-1 2p3",
        help="Pharaoh format: i-j is a sure link, ipj a possible one; i counts the source words (above), j the "
             "output words (below), from 0 as their small numbers show.")[:GOLD_LIMIT]
    gold, error = parse_gold(gold_text, len(run.source_words), len(run.output_words))
    report = gold_report(run, gold) if gold is not None else None
    if error:
        st.warning("The gold alignment was not read: " + escape_md(error, 400))
    with picture:
        st.html(PHONE_CSS)
        method = METHODS.get(run.method, run.method)
        fig = shared_figure(result, ("align", run.key, gold_text, display.presenter), lambda: alignment_figure(
            run.source_words, run.output_words, run.word_links,
            f"Word alignment by {'ALTI+' if run.fallback else 'the best method'} ({run.rule} argmax)",
            gold_sure=report.sure if report else None, gold_possible=report.possible if report else None,
            aer=report.aer if report else None))
        chart(fig, ALIGN_CHART)
    st.caption(escape_md(f"Each line links a source word to the output word it was translated into, read from "
                         f"{method} by {run.rule} argmax. Hover a line for the pair.", 400))
    if report is not None:
        gold_summary(report, roles)
    if roles is None:
        st.info(NO_FILE)
    kind, layer, head = opened_head(result, roles)
    if roles is not None:
        with st.container(key="roles_maps"):
            role_maps(result, roles, (kind, layer, head), display.presenter)
    else:
        columns = st.columns(3)
        with columns[0]:
            kind = pick_kind()
        with columns[1]:
            layer = pick_layer(result, kind)
        with columns[2]:
            head = pick_head(result)
    head_panel(ctx, run, roles, report, kind, layer, head, gold_text if report is not None else "")
    return fig


def gold_summary(report, roles: dict | None) -> None:
    layer, head = report.best_head
    line = (f"Against your gold: the alignment drawn has AER {report.aer:.1f}; the best single head on this "
            f"sentence, cross-attention layer {layer} head {head}, {report.head_aer[layer, head]:.1f}")
    named = (roles or {}).get("best_alignment_head")
    if named:
        a, b = int(named["layer"]), int(named["head"])
        line += f"; the head head_roles.json names best ({a}.{b}), {report.head_aer[a, b]:.1f}"
    st.markdown("**" + escape_md(line + ". (AER: lower is better, 0 = every link right.)", 600) + "**")


def opened_head(result, roles) -> tuple[str, int, int]:
    """(kind, layer, head) open below the maps: the last click (or the link's kind, layer and head);
    the landing head for a first visit (page/landing.py)."""
    kind = state.kept("kind")
    kind = kind if kind in KINDS else "cross"
    layer, head = state.kept("layer"), state.kept("head")
    if not (isinstance(layer, int) and not isinstance(layer, bool) and 0 <= layer < n_layers(result, kind)):
        layer = 0
    if not (isinstance(head, int) and not isinstance(head, bool) and 0 <= head < n_heads(result)):
        head = 0
    for key, value in (("kind", kind), ("layer", layer), ("head", head)):
        state.put(key, value)
    return kind, layer, head


def role_maps(result, roles: dict, selected: tuple, presenter: bool) -> None:
    rule = str(roles.get("best_alignment_head", {}).get("rule", "mutual"))
    kinds = [k for k in KINDS if k in roles.get("kinds", {})]
    maps = [(k, *role_table(roles["kinds"][k], k, n_layers(result, k), n_heads(result), rule)) for k in kinds]
    where = (kinds.index(selected[0]), selected[1], selected[2]) if selected[0] in kinds else None
    fig = shared_figure(result, ("roles", roles.get("model"), roles.get("seconds"), where, presenter),
                        lambda: head_roles_figure(
                            maps, "What each head does over " + str(roles.get("data", "the corpus")),
                            note="cell: the head's role, or its strongest score · cross: AER against "
                                 + ("the gold" if str(roles.get("reference", "")).startswith("gold") else
                                    "a silver alignment") + ", lower aligns better",
                            selected=where, cell_font=12))
    chart(fig, MAP_CHART, on_select=lambda: _on_pick(kinds, result), selection_mode="points")
    st.caption("No head of this model reaches a role (positional ≥ 90% of rows at one offset, rare word or "
               "sink ≥ 50%), "
               "so each is labelled with its strongest score: prev / self / next = rows peaking on the previous, "
               "same or next piece, rare = on the sentence's rarest piece, sink = weight on the first or a special "
               "piece. Click a head to open it on this sentence."
               if all(e.get("role") == "none" for k in kinds for e in roles["kinds"][k]) else
               "Each head is labelled with its role and score, or its strongest score where it has none. "
               "Click a head to open it on this sentence.")


def _on_pick(kinds: list, result) -> None:
    event = st.session_state.get(MAP_CHART) or {}
    picked = roles_selection((event.get("selection") or {}).get("points", []))
    if picked is None or not 0 <= picked[0] < len(kinds):
        return
    kind = kinds[picked[0]]
    if 0 <= picked[1] < n_layers(result, kind) and 0 <= picked[2] < n_heads(result):
        state.put("kind", kind)
        state.put("layer", picked[1])
        state.put("head", picked[2])


def _entry(roles: dict | None, kind: str, layer: int, head: int) -> dict:
    for entry in (roles or {}).get("kinds", {}).get(kind, ()):
        if int(entry["layer"]) == layer and int(entry["head"]) == head:
            return entry
    return {}


def head_panel(ctx: ViewContext, run, roles: dict | None, report, kind: str, layer: int, head: int,
               gold_key: str = "") -> None:
    """The opened head on this sentence (the Heatmap view's figure) beside its role's evidence: its
    scores over the corpus (head_roles.json) and on this sentence."""
    result, display = ctx.result, ctx.display
    weights = (3, 2)
    left, right = st.columns(weights)
    with left:
        head_heatmap(result, display, kind, layer, head, "roles_head", width=column_width(weights, 0))
    with right:
        entry = _entry(roles, kind, layer, head)
        st.markdown(escape_md(f"{KIND_TITLES[kind]}, layer {layer}, head {head}: role "
                              f"{entry.get('role', 'unknown (no head_roles.json)')}", 300))
        # one Arrow table per (run, head, gold) for every session: st.dataframe would convert a pandas
        # frame again on every run of every session
        table = shared_table(result, ("roles_evidence", run.key, (roles or {}).get("seconds"), kind, layer, head,
                                      gold_key),
                             lambda: evidence_frame(result, run, entry, report, kind, layer, head))
        st.dataframe(table, key="roles_evidence", hide_index=True, width="stretch")
        st.caption("Corpus: head_roles.json's share of rows (query positions) over its sentences; here: this "
                   "sentence. A sink is the first piece or a special one. The rarest piece needs the training "
                   "data's frequencies: corpus only." if roles is not None else
                   "This model has no head_roles.json: only this sentence's scores.")


def evidence_frame(result, run, entry: dict, report, kind: str, layer: int, head: int) -> pd.DataFrame:
    """The opened head's scores over the corpus (head_roles.json) and on this sentence."""
    _, keys = result.axes(kind)
    here = sentence_shares(result.attention[kind][layer, head], keys)
    corpus = {"prev": (entry.get("positional") or {}).get("-1"), "self": (entry.get("positional") or {}).get("0"),
              "next": (entry.get("positional") or {}).get("+1"), "sink": entry.get("sink"),
              "rare": entry.get("rare_word")}
    names = {"prev": "peak on the previous piece", "self": "peak on the same piece",
             "next": "peak on the next piece", "sink": "weight on a sink", "rare": "peak on the rarest piece"}
    rows = [{"score": names[k], "corpus": _pct(corpus[k]), "here": _pct(here.get(k))}
            for k in names]
    if kind == "cross":
        aer = (entry.get("aer") or {}).get(run.rule) or {}
        links = run.head_links[layer][head]
        rows.insert(0, {"score": f"AER, {run.rule} (lower: better)",
                        "corpus": f"{aer['held_out']:.1f}" if "held_out" in aer else "–",
                        "here": f"{report.head_aer[layer, head]:.1f}" if report is not None else "(no gold)"})
        rows.insert(1, {"score": "links also drawn above", "corpus": "–",
                        "here": f"{len(links & set(run.word_links))} of {len(links)}"})
    return pd.DataFrame(rows)


def _pct(value) -> str:
    return "–" if value is None else f"{float(value):.0%}"


VIEW = View(
    name="Head roles", title="What each head does, and the word alignment",
    explains="Each head is named by what it does over many sentences (looks at the previous word, at the rarest "
             "word, aligns words across languages); the lines link each source word to the word it became.",
    render=render, url_fields=(("gold", GOLD, str),))
