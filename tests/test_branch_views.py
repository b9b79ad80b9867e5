"""AppTest: with a what-if branch on screen (issue 23), the Attribution and Ablation views describe
the branch, not the original translation: the attribution is the branch's pieces forced through the
model, and ablation decodes the branch again (same forced prefix) with the heads off. With the
switch on "Original", both describe the original again. Numbers are recomputed from the API."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from test_app import MODELS, check_clean, new_app, opened_on_a_branch, specs, z_array

EN = "A man in a blue shirt is riding a bike down the street."
STEP = 2            # 0-based: the first step whose inputs differ between the original and the branch
MASK = sorted(("cross", 2, h) for h in range(8))
pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")


def opened(view: str, **params):
    at = new_app()
    at.query_params.update({"model": "en-de", "view": view, "sentence": EN, **params})
    at.run()
    check_clean(at, view)
    return at


def opened_on_the_branch(translator, view: str, **params):
    """`view` opened by the link with the what-if branch (test_app.opened_on_a_branch): (AppTest,
    original, prefix, branch), the branch's inputs differing from the original's before STEP."""
    at, original, prefix, branch = opened_on_a_branch(translator, EN, partial(opened, view, **params))
    assert branch.output_tokens[:STEP] != original.output_tokens[:STEP]
    return at, original, prefix, branch


def frame_with(at, *columns):
    frames = [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]
    assert frames, f"no table with {columns}: {[list(d.value.columns) for d in at.dataframe]}"
    return frames[0]


def method_chart(at) -> dict:
    found = [s for s in specs(at) if "Which source pieces mattered" in s["layout"]["title"]["text"]]
    assert len(found) == 1
    return found[0]


def check_attribution(at, translator, run) -> None:
    """The method chart of step STEP and its perturbation rows are `run`'s own (forced on its pieces)."""
    from transformer.explain.explanation import method_scores
    forced = translator.translate(EN, target=list(run.output_tokens), explain=True)
    assert forced.output_tokens == run.output_tokens
    scores = method_scores(forced)
    np.testing.assert_allclose(z_array(method_chart(at)["data"][0]), np.stack([scores[m][STEP] for m in scores]),
                               atol=1e-5)
    at.session_state["attr_step_open"] = True       # the step's rows are drawn only while open (lazy)
    at.run()
    check_clean(at, "step detail open")
    here = frame_with(at, "method", "k", "p_before", "p_after")
    np.testing.assert_allclose(here["p_before"], run.steps[STEP].prob, atol=1e-5)
    summary = frame_with(at, "method", "pieces dropped", "steps")
    assert set(summary["steps"]) == {len(run.output_tokens)}


def test_attribution_describes_the_branch_on_screen_and_the_original_after_the_switch(translator):
    at, original, _, branch = opened_on_the_branch(translator, "Attribution", step=str(STEP))
    assert at.radio(key="branch_view").value == "Branch" and at.text[0].value == branch.text
    check_attribution(at, translator, branch)
    assert any(c.value.startswith("Showing the branch") for c in at.caption)
    # not the original's numbers: they differ at this step
    assert abs(original.steps[STEP].prob - branch.steps[STEP].prob) > 1e-3
    at.radio(key="branch_view").set_value("Original").run()
    check_clean(at, "original")
    assert at.text[0].value == original.text
    assert at.slider(key="step").value == STEP             # the switch keeps the step (the slider's range changed)
    check_attribution(at, translator, original)
    assert not any(c.value.startswith("Showing the branch") for c in at.caption)


def check_ablation(at, translator, run, ablated) -> None:
    codes = [code.value for code in at.code]
    assert codes[:2] == [run.text, ablated.text]
    table = frame_with(at, "step", "piece", "original", "ablated")
    assert list(table["piece"]) == list(run.output_tokens)
    np.testing.assert_allclose(table["original"], [s.prob for s in run.steps], atol=1e-5)
    forced = translator.translate(EN, target=list(run.output_tokens), head_mask=set(MASK))
    np.testing.assert_allclose(table["ablated"], [s.prob for s in forced.steps], atol=1e-5)


def test_ablation_decodes_the_branch_again_with_the_heads_off(translator):
    ablate = ",".join(f"{k}:{layer}:{h}" for k, layer, h in MASK)
    at, original, prefix, branch = opened_on_the_branch(translator, "Ablation", ablate=ablate)
    ablated_branch = translator.translate(EN, prefix=prefix, head_mask=set(MASK))
    ablated_original = translator.translate(EN, head_mask=set(MASK))
    assert ablated_branch.output_tokens[:len(prefix)] == prefix and ablated_branch.text != ablated_original.text
    assert at.radio(key="branch_view").value == "Branch"
    check_ablation(at, translator, branch, ablated_branch)
    assert any("**Branch**" == md.value for md in at.markdown)
    at.radio(key="branch_view").set_value("Original").run()
    check_clean(at, "original")
    check_ablation(at, translator, original, ablated_original)
    assert any("**Original**" == md.value for md in at.markdown)
