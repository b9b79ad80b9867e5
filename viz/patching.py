"""Activation patching (issue 53, Compare's "What carries the difference"): where copying one part
of the original run into the edited run brings the original's preference back.

Pure: numpy and plotly only. The inputs are `tr.patch`'s arrays (docs/api.md, "Activation
patching"): `encoder` (encoder layers, S) and `heads` {kind: (layers, heads)}, each a restored
fraction (0 = no effect, 1 = fully back; NaN where the two runs agree). Colours are diverging and
centred at 0, so a copy that pushes the other way shows blue. Rows are layers, layer 0 on top.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ._base import DIVERGING_COLORSCALE, MAIN_WIDTH, as_array, head_markers, matrix_heatmap
from ._labels import display_tokens, escape_label, show_piece

KINDS = ("encoder_self", "decoder_self", "cross")
KIND_NAMES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
              "cross": "cross-attention"}
SMALL = 0.1                   # below this restored fraction nothing is said to carry the change
TEXT_CELLS = 400              # cell numbers are written only on maps this small


def _fraction_range(z: np.ndarray) -> tuple[float, float]:
    """(-m, m), m at least 1: a full restore is always the same red, and 0 the scale's middle."""
    finite = z[np.isfinite(z)]
    m = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    return -m, m


def position_labels(clean_tokens: Sequence, corrupt_tokens: Sequence, *, show_space: bool = False) -> list[str]:
    """Raw (unescaped) label of each source position: the piece, or "original→edited" where they differ."""
    if isinstance(clean_tokens, str) or isinstance(corrupt_tokens, str):
        raise ValueError("tokens must be lists of pieces, not strings")
    if len(clean_tokens) != len(corrupt_tokens):
        raise ValueError(f"the sources differ in piece count ({len(clean_tokens)} vs {len(corrupt_tokens)}), "
                         "so positions do not correspond")
    labels = []
    for a, b in zip(clean_tokens, corrupt_tokens):
        a, b = show_piece(a, show_space=show_space), show_piece(b, show_space=show_space)
        labels.append(a if a == b else f"{a}→{b}")
    return labels


def encoder_patch_figure(encoder, clean_tokens: Sequence, corrupt_tokens: Sequence, *, title: str = "",
                         show_space: bool = False, height: int | None = None, width: float = MAIN_WIDTH) -> go.Figure:
    """Encoder layers × source positions: the restored fraction when that layer's output at that
    position alone is taken from the original run. ValueError when the shapes disagree."""
    z = as_array(encoder, "encoder", ndim=2, finite=False).astype(float)
    labels = position_labels(clean_tokens, corrupt_tokens, show_space=show_space)
    if z.shape[1] != len(labels):
        raise ValueError(f"encoder has {z.shape[1]} positions but the sources have {len(labels)} pieces")
    layers = z.shape[0]
    zmin, zmax = _fraction_range(z)
    cd = np.stack(np.meshgrid(np.arange(layers), np.arange(z.shape[1]), indexing="ij"), axis=-1)   # (L, S, 2)
    hover = np.array([[escape_label(label) for label in labels]] * layers, dtype=object)
    extra = dict(texttemplate="%{z:.0%}", textfont=dict(size=10)) if z.size <= TEXT_CELLS else {}
    return matrix_heatmap(
        z, y_labels=[str(layer) for layer in range(layers)], x_labels=[escape_label(t) for t in labels],
        y_title="Encoder layer", x_title="Source position", zmin=zmin, zmax=zmax, colorscale=DIVERGING_COLORSCALE,
        customdata=cd, text=hover, colorbar_title="restored",
        hovertemplate="Encoder layer %{customdata[0]} · position %{customdata[1]} (%{text})<br>"
                      "restored %{z:.1%}<extra></extra>",
        title=title or "Encoder layer output at one source position, copied from the original",
        height=height or 150 + 40 * layers, width=width, xgap=1, ygap=1, **extra)


def head_patch_figure(values, kind: str, *, n_heads: int | None = None, title: str = "",
                      height: int | None = None, width: float = MAIN_WIDTH) -> go.Figure:
    """Layers × heads of one kind: the restored fraction when that head's output is taken from the
    original run at every position. A click reports [layer, head] (head_markers' customdata), as
    the Overview's tiles do. ValueError for an unknown kind or a shape other than (layers, n_heads)."""
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown kind {kind!r}; expected one of {list(KIND_NAMES)}")
    z = as_array(values, f"heads[{kind!r}]", ndim=2, finite=False).astype(float)
    if n_heads is not None and z.shape[1] != n_heads:
        raise ValueError(f"heads[{kind!r}] has {z.shape[1]} heads, expected {n_heads}")
    layers, heads = z.shape
    zmin, zmax = _fraction_range(z)
    cd = np.stack(np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij"), axis=-1)        # (L, H, 2)
    ys, xs = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    notes = ["restored " + ("–" if not np.isfinite(v) else f"{v:.1%}") for v in z.ravel()]
    markers = head_markers(xs.ravel(), ys.ravel(), cd[..., 0].ravel(), cd[..., 1].ravel(),
                           kind_label=KIND_NAMES[kind].capitalize(), notes=notes)
    fig = matrix_heatmap(
        z, y_labels=[str(layer) for layer in range(layers)], x_labels=[str(head) for head in range(heads)],
        y_title="Layer", x_title="Head", zmin=zmin, zmax=zmax, colorscale=DIVERGING_COLORSCALE, customdata=cd,
        colorbar=dict(thickness=10, len=0.9, tickformat=".0%", tickfont=dict(size=10)),
        hovertemplate="Layer %{customdata[0]} · head %{customdata[1]}<br>restored %{z:.1%}<extra></extra>",
        title=title or KIND_NAMES[kind].capitalize(), texttemplate="%{z:.0%}", textfont=dict(size=11),
        height=height or 130 + 48 * layers, width=width, xgap=1, ygap=1, extra_traces=[markers])
    fig.layout.xaxis.tickangle = 0
    return fig


def _best(z: np.ndarray):
    """(index tuple, value) of the largest finite value (the first such, so the earliest layer), or None."""
    if z is None or not np.isfinite(z).any():
        return None
    flat = np.where(np.isfinite(z), z, -np.inf)
    index = np.unravel_index(int(np.argmax(flat)), z.shape)
    return tuple(int(i) for i in index), float(z[index])


def carrier_sentence(encoder, heads: dict, clean_tokens: Sequence, corrupt_tokens: Sequence) -> str:
    """The one sentence that answers "what carries the difference", from the arrays alone: the
    encoder (layer, position) and the head (of any kind) whose copy restores most. Plain text
    (the caller escapes it). ValueError when the arrays and pieces disagree."""
    if not isinstance(heads, dict) or set(heads) - set(KINDS):
        raise ValueError(f"heads must map kinds {list(KINDS)} to (layers, heads) arrays")
    arrays = {k: as_array(v, f"heads[{k!r}]", ndim=2, finite=False).astype(float)
              for k, v in heads.items() if v is not None}
    if len({a.shape[1] for a in arrays.values()}) > 1:
        raise ValueError("the head maps disagree on the number of heads: "
                         + ", ".join(f"{k} {a.shape}" for k, a in arrays.items()))
    parts, encoder_best = [], None
    if encoder is not None:
        z = as_array(encoder, "encoder", ndim=2, finite=False).astype(float)
        labels = position_labels(clean_tokens, corrupt_tokens)
        if z.shape[1] != len(labels):
            raise ValueError(f"encoder has {z.shape[1]} positions but the sources have {len(labels)} pieces")
        encoder_best = _best(z)
        if encoder_best is not None and encoder_best[1] >= SMALL:
            (layer, position), value = encoder_best
            word = labels[position].replace("\u2581", "").replace("\u0120", "").strip() or labels[position]
            parts.append(f"'{word}' in encoder layer {layer} ({value:.0%})")
    candidates = [(found[1], kind, found[0]) for kind in KINDS if kind in arrays
                  and (found := _best(arrays[kind])) is not None]
    best = max(candidates, key=lambda c: c[0]) if candidates else None
    if best is not None and best[0] >= SMALL:
        value, kind, (layer, head) = best
        parts.append(f"{KIND_NAMES[kind]} layer {layer} head {head} ({value:.0%})")
    if not parts and best is None and encoder_best is None:
        return "Both runs prefer the two pieces equally here, so there is no difference to carry."
    if not parts:
        sentence = f"No single encoder position or head carries the change: none restores {SMALL:.0%} of it alone."
    else:
        sentence = "The change is carried by " + " and ".join(parts) + "."
    if encoder is None:
        sentence += " (The sources differ in piece count, so encoder positions are not compared.)"
    return sentence
