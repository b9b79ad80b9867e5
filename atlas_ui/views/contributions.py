"""ALTI+ under the view: where each output piece came from (source vs prefix), for the whole
translation (below every view) and for one decoding step (Decoding steps)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz import contribution_figure, merge_keys, source_share_figure

from ..common import chart


def source_share_bar(result, display) -> None:
    """One bar per output piece: the share of that step that came from the source (ALTI+)."""
    if getattr(result, "source_share", None) is None:
        return
    share = np.clip(np.asarray(result.source_share, dtype=float), 0.0, 1.0)
    chart(source_share_figure(share, result.output_tokens, "Source vs prefix: where each output piece came from",
                              show_space=display.show_space, height=260), "source_share")
    st.caption(f"ALTI+ (Ferrando et al., 2022): blue is the share of each step's prediction that came from the "
               f"source sentence, orange the share from the target prefix fed so far. Mean source share: "
               f"{share.mean():.2f}.")


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
    chart(contribution_figure(np.clip(source, 0, 1), np.clip(prefix, 0, 1), [result.output_tokens[t]],
                              source_tokens, prefix_tokens, f"ALTI+ contributions to step {t + 1}",
                              show_space=display.show_space, height=230), "step_contributions")
    st.caption("Left: each source piece's contribution; right: each prefix piece's. Together the row sums to 1.")
