"""What the encoder's input is made of: positional encodings and token embeddings."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import DIVERGING_COLORSCALE, as_array, matrix_heatmap, symmetric_range
from ._labels import display_tokens


def position_labels(count: int, tokens: Sequence[str] | None, name: str) -> list[str] | None:
    """Escaped '3 ▁man' tick labels for positions, or None to let Plotly pick numbers."""
    if tokens is None:
        return None
    if isinstance(tokens, str) or len(tokens) != count:
        raise ValueError(f"{name} has {count} positions but {len(tokens)} tokens were given")
    return [f"{i} {lab}" for i, lab in enumerate(display_tokens(tokens))]


def row_customdata(labels: Sequence[str] | None, shape: tuple[int, int]) -> np.ndarray:
    """(rows, cols) object array repeating each row's label, for the hover."""
    rows = labels if labels is not None else [str(i) for i in range(shape[0])]
    return np.repeat(np.asarray(rows, dtype=object)[:, None], shape[1], axis=1)


def positional_encoding_figure(pe, tokens: Sequence[str] | None = None,
                               title: str = "", *, sentence: Sequence[str] | None = None) -> go.Figure:
    """(P, D) encodings added to the embeddings; sinusoids span -1..1, fixed colour range.

    `sentence`: the pieces of a sentence shorter than P (the classic picture shows many more
    positions than one sentence has): its positions 0..S-1 are outlined and their ticks name
    its pieces; the other rows are labelled every 8th position."""
    pe = as_array(pe, "positional encoding", ndim=2)                  # (P, D)
    if sentence is None:
        labels = position_labels(pe.shape[0], tokens, "positional encoding")
        return _encoding_heatmap(pe, labels, title)
    if tokens is not None:
        raise ValueError("give the sentence's pieces as `sentence` or `tokens`, not both")
    if isinstance(sentence, str) or not 0 < len(sentence) <= pe.shape[0]:
        raise ValueError(f"a sentence of {len(sentence)} pieces does not fit {pe.shape[0]} positions")
    S = len(sentence)
    labels = [f"{i} {lab}" for i, lab in enumerate(display_tokens(sentence))] + [str(i) for i in range(S, pe.shape[0])]
    fig = _encoding_heatmap(pe, labels, title, row_hover=False)     # P x D cells: no label per cell to send
    shown = [i for i in range(pe.shape[0]) if i < S or i % 8 == 0]
    fig.update_yaxes(tickvals=shown, ticktext=[labels[i] for i in shown])
    fig.add_shape(type="rect", xref="paper", yref="y", x0=0, x1=1, y0=-0.5, y1=S - 0.5,
                  line=dict(color="#111", width=2), fillcolor="rgba(0,0,0,0)")
    fig.add_annotation(xref="paper", yref="y", x=1.0, y=S - 0.5, xanchor="right", yanchor="top", showarrow=False,
                       text=f"this sentence: positions 0–{S - 1}", bgcolor="rgba(255,255,255,0.85)")
    return fig


def _encoding_heatmap(pe: np.ndarray, labels: list[str] | None, title: str, row_hover: bool = True) -> go.Figure:
    """`row_hover`: the hover names each row's label (one string per cell, sent to the browser);
    without it the position number (%{y}), and the axis names the sentence's pieces."""
    return matrix_heatmap(
        pe, y_labels=labels, x_labels=None, y_title="Position", x_title="Dimension",
        zmin=-1.0, zmax=1.0, colorscale=DIVERGING_COLORSCALE, title=title,
        customdata=row_customdata(labels, pe.shape) if row_hover else None, colorbar_title="value",
        hovertemplate=f"Position {'%{customdata}' if row_hover else '%{y}'}<br>Dimension %{{x}}<br>value %{{z:.3f}}"
                      "<extra></extra>")


def position_similarity_figure(pe, tokens: Sequence[str] | None = None,
                               title: str = "") -> go.Figure:
    """(P, P) dot products pe @ pe.T: near positions look alike, far ones less so."""
    pe = as_array(pe, "positional encoding", ndim=2)                  # (P, D)
    sim = pe.astype(np.float64) @ pe.T.astype(np.float64)             # (P, P)
    labels = position_labels(pe.shape[0], tokens, "positional encoding")
    zmin, zmax = symmetric_range(sim)
    if labels is None:                # plain position numbers: the axes' own values, no string per cell
        cd, hover = None, "Position %{y}<br>Position %{x}"
    else:
        cd = np.stack([row_customdata(labels, sim.shape), row_customdata(labels, sim.shape).T], -1)
        hover = "Position %{customdata[0]}<br>Position %{customdata[1]}"
    return matrix_heatmap(
        sim, y_labels=labels, x_labels=labels, y_title="Position", x_title="Position",
        zmin=zmin, zmax=zmax, colorscale=DIVERGING_COLORSCALE, title=title,
        customdata=cd, colorbar_title="dot product", hovertemplate=hover + "<br>pe·pe %{z:.3f}<extra></extra>")


def embedding_figure(embeddings, tokens: Sequence[str], title: str = "", *,
                     show_space: bool = False) -> go.Figure:
    """(S, D) token embeddings (× √d_model, before PE); symmetric colour range around 0."""
    emb = as_array(embeddings, "embeddings", ndim=2)                  # (S, D)
    if isinstance(tokens, str) or len(tokens) != emb.shape[0]:
        raise ValueError(f"embeddings has {emb.shape[0]} rows but {len(tokens)} tokens were given")
    labels = display_tokens(tokens, show_space=show_space)
    zmin, zmax = symmetric_range(emb)
    hover_rows = [f"{i} {lab}" for i, lab in enumerate(labels)]
    return matrix_heatmap(
        emb, y_labels=labels, x_labels=None, y_title="Token", x_title="Dimension",
        zmin=zmin, zmax=zmax, colorscale=DIVERGING_COLORSCALE, title=title,
        customdata=row_customdata(hover_rows, emb.shape), colorbar_title="value",
        hovertemplate="Token %{customdata}<br>Dimension %{x}<br>value %{z:.3f}<extra></extra>")


def position_bias_figure(bias, tokens: Sequence[str], title: str = "") -> go.Figure:
    """(S, S) relative position bias of one head (T5): added to that head's attention logits
    before the softmax, by query-key distance; symmetric colour range around 0."""
    bias = as_array(bias, "position bias", ndim=2)                    # (S, S)
    if isinstance(tokens, str) or bias.shape != (len(tokens), len(tokens)):
        raise ValueError(f"position bias has shape {bias.shape} but {len(tokens)} tokens were given")
    labels = display_tokens(tokens)
    hover = [f"{i + 1} {lab}" for i, lab in enumerate(labels)]      # query and key positions count from 1
    zmin, zmax = symmetric_range(bias)
    cd = np.stack([row_customdata(hover, bias.shape), row_customdata(hover, bias.shape).T], -1)
    return matrix_heatmap(
        bias, y_labels=labels, x_labels=labels, y_title="Query", x_title="Key",
        zmin=zmin, zmax=zmax, colorscale=DIVERGING_COLORSCALE, title=title,
        customdata=cd, colorbar_title="bias (logit)",
        hovertemplate="Query %{customdata[0]}<br>Key %{customdata[1]}<br>bias %{z:.3f}<extra></extra>")
