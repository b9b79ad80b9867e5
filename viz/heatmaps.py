"""One attention head as a heatmap: rows are queries, columns are keys."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import (DEFAULT_COLORSCALE, MAIN_WIDTH, auto_height, check_attention, color_range, fixed_range,
                    matrix_heatmap)
from ._labels import STRUCTURAL_PIECES, display_tokens, escape_label

HIDDEN_NOTE = "special tokens hidden: rows may not sum to 1"


def visible_positions(tokens: Sequence[str], hide_special: bool) -> list[int]:
    """Positions kept on an axis; <s>, </s>, <pad> dropped when hiding specials."""
    return [i for i, t in enumerate(tokens) if not (hide_special and t in STRUCTURAL_PIECES)]


def pair_customdata(query_labels: Sequence[str], key_labels: Sequence[str]) -> np.ndarray:
    """(Q, K, 2) object array [query label, key label] for the hover of each cell."""
    cd = np.empty((len(query_labels), len(key_labels), 2), dtype=object)
    cd[..., 0] = np.asarray(query_labels, dtype=object)[:, None]
    cd[..., 1] = np.asarray(key_labels, dtype=object)[None, :]
    return cd


def attention_heatmap(weights, query_tokens, key_tokens, title: str = "", *,
                      normalize: bool = False, show_space: bool = False,
                      hide_special: bool = False, colorscale=None,
                      query_title: str = "Query", key_title: str = "Key",
                      height: int | None = None, zmax: float | None = None,
                      value_title: str = "weight", width: float = MAIN_WIDTH) -> go.Figure:
    """Heatmap of one head's weights (Q, K); row 0 (the first query) at the top.

    `normalize=False` fixes the colour scale to 0..1 so heads compare at a glance.
    `normalize=True` keeps `z` as the raw weights and sets zmin/zmax to this map's
    own min/max, so a diffuse head still shows structure; the hover stays exact.
    `hide_special=True` drops rows and columns of <s>, </s>, <pad>; `z` is then
    the remaining sub-matrix and its rows need not sum to 1 (the title says so).
    `zmax` sets a fixed 0..zmax colour scale for values that are not probabilities (e.g. the
    norm-weighted ‖α·f(x)‖ of a whole kind); `value_title` names the value in hover and colour bar.
    `width`: the figure's width in a 1280 px window when it sits in a column (matrix_heatmap).
    """
    w, query, key = check_attention(weights, query_tokens, key_tokens, ndim=2)   # (Q, K)
    rows, cols = visible_positions(query, hide_special), visible_positions(key, hide_special)
    z = w[np.ix_(rows, cols)] if hide_special else w
    q_labels = display_tokens([query[i] for i in rows], show_space=show_space)
    k_labels = display_tokens([key[j] for j in cols], show_space=show_space)
    zmin, zmax = fixed_range(zmax) if zmax is not None and not normalize else color_range(z, normalize)
    # Hover names each cell by original position, counted from 1 as steps are, and escaped piece.
    customdata = pair_customdata([f"{i + 1} {lab}" for i, lab in zip(rows, q_labels)],
                                 [f"{j + 1} {lab}" for j, lab in zip(cols, k_labels)])
    return matrix_heatmap(
        z, y_labels=q_labels, x_labels=k_labels, y_title=query_title, x_title=key_title,
        zmin=zmin, zmax=zmax, colorscale=colorscale or DEFAULT_COLORSCALE,
        customdata=customdata, title=title,
        note=HIDDEN_NOTE if hide_special else "",
        colorbar_title=f"{value_title} (rescaled)" if normalize else value_title,
        hovertemplate="Query %{customdata[0]}<br>Key %{customdata[1]}"
                      f"<br>{escape_label(value_title)} %{{z:.4f}}<extra></extra>",
        height=height if height is not None else auto_height(len(rows)), width=width,
        annotations=[] if z.size else [dict(text="nothing left to show", showarrow=False,
                                            xref="paper", yref="paper", x=0.5, y=0.5)],
    )
