"""Attribution: which source pieces mattered for each output piece, by four methods, and how
faithful each is (the perturbation test, rank correlations, the average over the examples)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from viz import method_comparison_figure, method_table

from ..runs.explain import METHOD_LABELS, correlation_summary
from ..ui.common import STEP_SLIDE_HEIGHT, chart, escape_md, shared_figure, shared_table, step_nav
from .base import View, ViewContext

AVERAGE_FLAG = "attr_average_on"      # session key: the examples' average was asked for
STEP_DETAIL_OPEN = "attr_step_open"    # session key: the step's perturbation rows are open


def _raw_cross(result) -> dict:
    """Raw cross-attention, mean of layers and heads, rows summing to 1 (what every model has)."""
    a = np.asarray(result.attention["cross"], dtype=np.float64).mean(axis=(0, 1))
    total = a.sum(-1, keepdims=True)
    return {"attention": np.divide(a, total, out=np.zeros_like(a), where=total > 0)}


def _method_figure(scores: dict, result, display, t: int):
    row = {name: np.asarray(values)[t] for name, values in scores.items()}       # this step: (S,) each
    shown = ("attr_methods", t, tuple(scores), display.show_space)      # built once for an audience
    fig = shared_figure(result, shown, lambda: method_comparison_figure(
        row, result.source_tokens, show_space=display.show_space, height=420,
        title=f"Which source pieces mattered for step {t + 1} ({result.output_tokens[t]}), by method"))
    chart(fig, "attr_methods_chart", max_height=STEP_SLIDE_HEIGHT)
    return fig


def _step_rows(data: dict, t: int) -> pd.DataFrame:
    """Step t's perturbation rows, the dropped pieces spelled out."""
    frame = data["perturbation"]
    here = frame[frame["step"] == t].drop(columns=["step"]).copy()
    here["dropped"] = here["dropped"].map(lambda d: " ".join(data["source_tokens"][j] for j in d))
    return here


def _set_average() -> None:
    st.session_state[AVERAGE_FLAG] = True


def _summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    table = summary.copy()
    table.insert(1, "what", table["method"].map(lambda m: METHOD_LABELS.get(m, m)))
    return table.rename(columns={"k": "pieces dropped", "mean_drop": "p(chosen) fall, mean",
                                 "flip_rate": "piece changed, share of steps"})


NUMBER = st.column_config.NumberColumn(format="%.3f")
SUMMARY_COLUMNS = {"p(chosen) fall, mean": NUMBER, "piece changed, share of steps": NUMBER}


def attribution_view(result, display, explain_note: str, attribution, average, example_count: int):
    """`attribution()` -> runs/explain.attribution for this run; `average()` -> its mean over
    the example sentences. `explain_note`: why the methods beyond raw attention are unavailable."""
    t = step_nav(len(result.steps), display.presenter)
    if explain_note:
        st.info(escape_md(explain_note, 400) + " Only the raw cross-attention can be shown here; the "
                "perturbation test and the rank correlations need the other methods.")
        return _method_figure(_raw_cross(result), result, display, t)
    try:
        data = attribution()
    except (ValueError, RuntimeError, TimeoutError) as exc:
        st.info("The attribution is unavailable for this run: " + escape_md(str(exc), 300))
        return _method_figure(_raw_cross(result), result, display, t)
    if list(data["output_tokens"]) != list(result.output_tokens):    # a guard: numbers of another run
        st.info("The attribution describes another run than the one on screen; showing raw cross-attention.")
        return _method_figure(_raw_cross(result), result, display, t)
    scores = data["scores"]
    fig = _method_figure(scores, result, display, t)
    st.caption("Each row is one method's weight on every source piece for this output step (rows sum to 1): "
               + "; ".join(f"{name}: {METHOD_LABELS[name]}" for name in scores) + ". The norm row is Kobayashi "
               "et al.'s (2020) score of a layer, ‖Σ_h α_h·f_h(x_j)‖: heads are summed before the norm, so heads "
               "that cancel count as cancelled. ALTI+ measures each piece against the whole block output, biases "
               "included, as Ferrando et al. (2022) define it.")
    table = shared_table(result, ("attr_method_table", t), lambda: method_table(scores, data["source_tokens"], t))
    st.dataframe(table, hide_index=True, key="attr_method_table",
                 column_config={name: NUMBER for name in scores})

    st.subheader("Perturbation test: drop what each method ranks highest")
    st.caption("For every output step, the 1 or 3 source pieces a method ranks highest become <unk>, the same "
               "output is forced again, and we measure how much p(chosen piece) falls and how often the "
               "model's top piece changes. A faithful method's top pieces should cost the most. Special pieces "
               "are never dropped; “random” is a seeded random ranking to compare against.")
    st.dataframe(shared_table(result, ("attr_summary",), lambda: _summary_table(data["summary"])), hide_index=True,
                 key="attr_perturbation",
                 column_config=SUMMARY_COLUMNS)
    # drawn only while open (lazy: opening it is one rerun); its label stays the same at every step,
    # since a stateful expander's label is its identity and a new one would close it
    details = st.expander("The pieces each method dropped at this step", key=STEP_DETAIL_OPEN, on_change="rerun")
    if details.open:
        with details:
            st.dataframe(shared_table(result, ("attr_step_perturbation", t), lambda: _step_rows(data, t)),
                         hide_index=True, key="attr_step_perturbation", column_config={
                             name: st.column_config.NumberColumn(format="%.4f") for name in ("p_before", "p_after", "drop")})

    st.subheader("Do the methods agree? Rank correlations")
    correlations = shared_table(result, ("attr_correlations",), lambda: correlation_summary(data["correlations"]))
    st.dataframe(correlations, hide_index=True, key="attr_correlations",
                 column_config={"mean_spearman": NUMBER})
    st.caption("Spearman's ρ between two methods' rankings of the source pieces (special pieces left out), "
               "averaged over the output steps where both rankings vary; 1 = same order, 0 = unrelated.")

    st.subheader(f"Average over the {example_count} examples")
    st.button(f"Average over the {example_count} examples", key="attr_average", on_click=_set_average,
              disabled=example_count == 0, help="Translate every example sentence with this model and "
                                                "decoding and pool every step (takes a while the first time).")
    if st.session_state.get(AVERAGE_FLAG) and example_count:
        with st.spinner(f"Running the perturbation test on the {example_count} examples…"):
            pooled = average()
        if not pooled.get("sentences"):
            st.info("None of the example sentences could be translated.")
        else:
            st.caption(f"Pooled over {pooled['sentences']} sentences (every output step weighs the same).")
            st.dataframe(_summary_table(pooled["summary"]), hide_index=True, key="attr_average_perturbation",
                         column_config=SUMMARY_COLUMNS)
            st.dataframe(pooled["correlations"], hide_index=True, key="attr_average_correlations",
                         column_config={"mean_spearman": NUMBER})
    return fig


def render(ctx: ViewContext):
    prefix = ctx.branch_prefix
    if prefix:
        st.caption(f"Showing the branch (what if step {len(prefix)} had been “{escape_md(prefix[-1], 40)}”): "
                   "every number below is the branch's own, its pieces forced through the model.")
    return attribution_view(ctx.result, ctx.display, ctx.display.explain_note, ctx.attribution,
                            ctx.attribution_average, len(ctx.example_texts()))


VIEW = View(
    name="Attribution", title="Which source pieces mattered, by method",
    explains="For each output piece, how much each source piece mattered according to raw attention, "
             "norm-weighted attention, ALTI+ and gradients, and a test of which of them is right.",
    render=render, needs_explain=True, steps=True)
