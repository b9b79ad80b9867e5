"""ALTI+ under the view: where each output piece came from (source vs prefix), for the whole
translation (below every view) and for one decoding step (Decoding steps)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz import contribution_figure, merge_keys, source_share_figure

from viz.branch import contrast_figure

from ..runs.branch import contrast
from ..ui.common import chart, escape_md, shared_figure


def source_share_bar(result, display) -> None:
    """One bar per output piece: the share of that step that came from the source (ALTI+)."""
    if getattr(result, "source_share", None) is None:
        return
    share = np.clip(np.asarray(result.source_share, dtype=float), 0.0, 1.0)
    chart(shared_figure(result, ("source_share", display.show_space), lambda: source_share_figure(
        share, result.output_tokens, "Source vs prefix: where each output piece came from",
        show_space=display.show_space, height=260)), "source_share")       # once per run for every session
    st.caption(f"ALTI+ (Ferrando et al., 2022): blue is the share of each step's prediction that came from the "
               f"source sentence, orange the share from the target prefix fed so far. Mean source share: "
               f"{share.mean():.2f}.")


def step_explanations(ctx, t: int) -> None:
    """Step t's ALTI+ contributions beside "why this piece rather than that one" (side by side
    when both are there; the contrast needs no explained run)."""
    result, display = ctx.result, ctx.display
    if getattr(result, "source_contribution", None) is None:
        step_contrast(ctx, t)
        return
    left, right = st.columns(2)
    with left:
        step_contributions(result, display, t)
    with right:
        step_contrast(ctx, t)


def step_contrast(ctx, t: int) -> None:
    """Pick another candidate of step t: the source and prefix pieces that favour the chosen piece
    over it, by contrastive gradient × input (Yin and Neubig, 2022; transformer/explain/contrastive.py)."""
    result, display = ctx.result, ctx.display
    token, _, top_k = result.steps[t]
    others = [piece for piece, _ in top_k if piece != token]
    if not others:
        return
    key = "step_contrast_alt"
    if st.session_state.get(key) not in others:
        st.session_state.pop(key, None)
    alternative = st.selectbox(f"Why “{escape_md(token, 40)}” rather than…", others, index=None, key=key,
                               placeholder="pick another candidate",
                               help="Contrastive saliency (Yin and Neubig, 2022): the gradient of "
                                    "log p(chosen) − log p(alternative) times each input piece's embedding.")
    if alternative is None:
        return
    try:
        scores = contrast(ctx.model, ctx.device, tuple(result.source_tokens), tuple(result.target_tokens),
                          tuple(result.output_tokens), t, alternative, tuple(result.head_mask))
    except ValueError as exc:
        st.info("Contrastive saliency is not available here: " + escape_md(str(exc), 200))
        return
    chart(contrast_figure(scores["source"], scores["prefix"], result.source_tokens, result.target_tokens[: t + 1],
                          token, alternative, show_space=display.show_space), "step_contrast")
    st.caption(f"log p(chosen) − log p(alternative) = {scores['margin']:.2f}. Red pieces push the model "
               "towards the chosen piece and away from the alternative, blue ones the other way.")


def step_contributions(result, display, t: int) -> None:
    """The step's source share and its token-level source and prefix contributions (ALTI+)."""
    if getattr(result, "source_contribution", None) is None:
        return
    share = float(result.source_share[t])
    source = np.asarray(result.source_contribution[t:t + 1], dtype=float)              # (1, S)
    prefix = np.asarray(result.prefix_contribution[t:t + 1, : t + 1], dtype=float)      # (1, t + 1)
    source_tokens, prefix_tokens = list(result.source_tokens), list(result.target_tokens[: t + 1])
    if display.words:
        source, source_tokens = merge_keys(source, source_tokens)
        prefix, prefix_tokens = merge_keys(prefix, prefix_tokens)
    st.markdown(f"**Source vs prefix at step {t + 1} (ALTI+):** {share:.0%} of this prediction came from the "
                f"source, {1 - share:.0%} from the prefix.")
    chart(shared_figure(result, ("step_contributions", t, display.words, display.show_space), lambda: contribution_figure(
        np.clip(source, 0, 1), np.clip(prefix, 0, 1), [result.output_tokens[t]], source_tokens, prefix_tokens,
        f"ALTI+ contributions to step {t + 1}", show_space=display.show_space, height=230)), "step_contributions")
    st.caption("Left: each source piece's contribution; right: each prefix piece's. Together the row sums to 1.")
