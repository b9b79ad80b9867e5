"""Small helpers shared by the views: safe text, charts, the kind/layer/head pickers and the
decoding-step navigator."""
from __future__ import annotations

import re
from functools import partial
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import streamlit as st

from viz import MAIN_WIDTH, PLOTLY_CONFIG, phone_figure, presenter_figure, svg_config
from viz.heatmaps import visible_positions
from viz.words import merge_attention

from . import state
from .figures import figure_cache, shared_version
from ..server.settings import FIGURE_CACHE_ENTRIES, KIND_LABELS, KINDS

_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")     # every ASCII punctuation character


@dataclass(frozen=True)
class Display:
    hide_special: bool = False
    show_space: bool = False
    normalize: bool = False
    words: bool = False
    presenter: bool = False
    norm: bool = False            # norm-weighted ‖α·f(x)‖ instead of raw weights (the run has them)
    explain_note: str = ""        # why norm-weighted/contributions are unavailable for this model, if so


NORM_TITLE = "‖α·f(x)‖"
WEIGHT_CHOICES = {False: "raw α", True: "‖α·f(x)‖"}


def escape_md(text: str, limit: int = 300) -> str:
    """Text that st.markdown/st.warning show literally (no HTML, Markdown or Streamlit directives)."""
    text = str(text)
    if len(text) > limit:                 # first: an error's message can be thousands of characters
        text = text[:limit] + "…"
    text = "".join(ch if ch.isprintable() or ch == " " else "\N{REPLACEMENT CHARACTER}" for ch in text)
    return _MD_SPECIAL.sub(r"\\\1", text)     # CommonMark: a backslash makes punctuation literal


# Presenter mode on a 720-px projector: a view's main chart (any figure at least PRESENTER_MAIN_FROM
# px tall; small multiples and strips are shorter) is drawn at least PRESENTER_MIN_HEIGHT px tall, so
# that a short sentence still fills the slide, and at most PRESENTER_MAX_HEIGHT px, what is left of
# the window under the presenter's bar and the translation (its labels then get smaller type, or every
# k-th label: viz.presenter_figure).
PRESENTER_MAIN_FROM, PRESENTER_MIN_HEIGHT, PRESENTER_MAX_HEIGHT = 300, 470, 480
STEP_SLIDE_HEIGHT = 440         # under the step buttons and the "Step t of T" heading as well


def chart(fig, key: str, max_height: int = PRESENTER_MAX_HEIGHT, **kwargs):
    """Draw a plotly figure with the project's toolbar config and the figure's own colours
    (readable on light and dark pages alike); larger fonts in presenter mode, the figure at most
    `max_height` px tall there (what the slide has left for it)."""
    image_format = state.kept("image_format", "png")
    config = PLOTLY_CONFIG if image_format == "png" else svg_config()
    if state.kept("presenter", False):
        fig = shared_version(fig, ("slide", max_height), partial(slide, max_height=max_height))
    elif on_a_phone():
        fig = shared_version(fig, "phone", phone_figure)
        # a touch screen has no hover, so plotly.js keeps its tool bar up for good, over the chart's
        # title on a 390-px screen; Streamlit's own full-screen button stays
        config = {**config, "displayModeBar": False}
    return st.plotly_chart(fig, key=key, config=config, theme=None, width="stretch", **kwargs)


def slide(fig, max_height: int):
    """The figure as presenter mode draws it: large type, at most `max_height` px tall, a main chart
    at least PRESENTER_MIN_HEIGHT."""
    fig = presenter_figure(fig, max_height=max_height)
    height, lowest = fig.layout.height, min(PRESENTER_MIN_HEIGHT, max_height)
    if height is not None and PRESENTER_MAIN_FROM <= height < lowest:
        fig.update_layout(height=lowest)      # a copy already: the slide's picture
    return fig


def on_a_phone() -> bool:
    """Is this session's browser a phone's? Its User-Agent says "Mobi" (MDN's advice for telling
    phones from tablets and desktops). There every chart is refit for ~360 px (viz.phone_figure);
    a narrow desktop window gets COMPACT_CSS's thinned tick labels instead."""
    try:
        return "Mobi" in (st.context.headers.get("User-Agent") or "")
    except Exception:             # no request behind this run (AppTest)
        return False


def phone_layout(display) -> bool:
    """Are this page's charts refit for a phone (viz.phone_figure)? A phone's browser, unless in
    presenter mode, whose slides are built for 1280 px like chart()'s."""
    return on_a_phone() and not display.presenter


COLUMN_GAP = 16                 # px between Streamlit's columns


def column_width(weights, index: int) -> float:
    """The px width of column `index` of st.columns(weights) in a 1280 px window: a chart there is
    built for it (viz.matrix_heatmap's `width`), so its labels get their room in one pass."""
    return (MAIN_WIDTH - COLUMN_GAP * (len(weights) - 1)) * weights[index] / sum(weights)


def shared_figure(result, key: tuple, build):
    """`build()`, or the figure it made before for the same run (`result.key`) and `key`, in any
    session of this process. `key` must name everything the figure depends on besides the run."""
    if not getattr(result, "key", ""):
        return build()
    return figure_cache(FIGURE_CACHE_ENTRIES).get((result.key, *key), build)


def shared_table(result, key: tuple, build):
    """`build()`'s DataFrame as an Arrow table, converted once per run and `key` in any session:
    st.dataframe converts a pandas frame again on every call (a tenth of an Attribution page's
    server time), an Arrow table it only writes out."""
    return shared_figure(result, key, lambda: pa.Table.from_pandas(build(), preserve_index=False))


def as_arrow(result, key: tuple, frame):
    """A shared DataFrame (made once per run and `key`) as its Arrow table, converted once too."""
    return shared_table(result, (*key, "arrow"), lambda: frame)


def heat_height(rows: int, low: int = 360, high: int = 900) -> int:
    """A large map's height: 15 px a row (11 px labels) plus its title and key labels, so that the
    first screen's map (a 17-piece sentence) holds both axes inside a 1280x720 window."""
    return int(min(high, max(low, 94 + 15 * rows)))


def n_layers(result, kind: str) -> int:
    return int(result.attention[kind].shape[0])


def n_heads(result) -> int:
    return int(result.attention["encoder_self"].shape[1])


def pick_kind(key: str = "kind", kinds=KINDS) -> str:
    return state.selectbox("Attention", kinds, key, format_func=KIND_LABELS.get,
                           help="Which attention to show: rows are queries, columns are keys.")


def pick_layer(result, kind: str, key: str = "layer", **kwargs) -> int:
    return state.selectbox("Layer", range(n_layers(result, kind)), key, **kwargs)


def pick_head(result, key: str = "head", **kwargs) -> int:
    return state.selectbox("Head", range(n_heads(result)), key, **kwargs)


def pick_cross_head(result, toggle_label: str, toggle_key: str) -> tuple[int, int, bool]:
    """Layer and head pickers for a decoder view, with a toggle (all or mean of heads) that
    disables the head picker; returns (layer, head, toggled)."""
    columns = st.columns(3)
    with columns[0]:
        layer = pick_layer(result, "cross")
    with columns[2]:
        toggled = state.toggle(toggle_label, toggle_key)
    with columns[1]:
        head = pick_head(result, disabled=toggled)
    return layer, head, toggled


def norm_switch(display, where=None) -> bool:
    """The "raw weights / norm-weighted" switch of an attention view (one key, kept in the share
    link); True when this view shows norm-weighted values. Says so when they are unavailable.
    `where`: the container to draw it in (an expert control: the end of the view's control row)."""
    if where is None:
        return _norm_switch(display)
    with where:
        return _norm_switch(display)


def _norm_switch(display) -> bool:
    wanted = state.radio("Weights", list(WEIGHT_CHOICES), "norm", horizontal=True, format_func=WEIGHT_CHOICES.get,
                         help="Raw attention weights α (rows sum to 1), or ‖α·f(x)‖: each weight times the "
                              "size of the vector that key actually passes on (Kobayashi et al., 2020).")
    if wanted and display.explain_note:
        st.info(escape_md(display.explain_note, 400) + " Showing the raw weights.")
    return bool(wanted and display.norm)


def shows_norm(result, display) -> bool:
    return bool(display.norm and getattr(result, "norm", None) is not None)


def value_options(result, display, kind: str, weights=None) -> dict:
    """attention_heatmap/overview keywords for the values shown: nothing extra for raw weights;
    for norm-weighted, one 0..max colour scale over every head of the kind, and the value's name."""
    if not shows_norm(result, display):
        return {}
    top = float(np.max(result.norm[kind] if weights is None else weights)) if result.norm[kind].size else 0.0
    return dict(zmax=max(top, 1e-12), value_title=NORM_TITLE)


def norm_caption(norm: bool, fig, normalize: bool) -> None:
    """What a norm-weighted map shows, under it (nothing for raw weights); the scale is read from
    the figure's first trace."""
    if not norm:
        return
    zmax = fig.data[0].zmax if fig is not None and fig.data else None
    if normalize:
        scale = "each map's own range (Normalise each map)"
    elif zmax is None:
        scale = "0 to the largest value of any head and layer of the map's kind in its sentence (see its colour bar)"
    else:
        scale = f"0 to {zmax:.3g}, the largest value of any head and layer of this kind here"
    st.caption(f"Norm-weighted: each cell is ‖α·f(x)‖ (Kobayashi et al., 2020), the length of what the key "
               f"actually adds to the query through this head, not a probability (rows do not sum to 1). "
               f"Colour scale: {scale}.")


def weights_for(result, kind: str, words: bool, hide_special: bool = False, norm: bool = False):
    """(weights (layers, heads, Q, K), query tokens, key tokens), pieces merged into words if asked,
    and `<s>`/`</s>` rows and columns left out if asked (for the tiled views, which draw every cell).
    norm: the norm-weighted values ‖α·f(x)‖ (Result.norm) instead of the weights."""
    weights = result.norm[kind] if norm else result.attention[kind]
    queries, keys = result.axes(kind)
    if words:
        weights, queries, keys = merge_attention(weights, queries, keys)
    weights, queries, keys = np.asarray(weights), list(queries), list(keys)
    if hide_special:
        rows = visible_positions(queries, True) or list(range(len(queries)))
        cols = visible_positions(keys, True) or list(range(len(keys)))
        weights = weights[..., rows, :][..., cols]
        queries, keys = [queries[i] for i in rows], [keys[j] for j in cols]
    return weights, queries, keys


def head_title(kind: str, layer: int, head: int | None) -> str:
    who = "mean of heads" if head is None else f"head {head}"
    return f"{KIND_LABELS[kind]} · layer {layer} · {who}"


def step_nav(step_count: int, presenter: bool = False, describe=None) -> int:
    """Slider plus previous/next buttons over the decoding steps; returns the 0-based step.
    `describe(step)`, if given, draws what the step is beside them (one row, not two).

    In presenter mode the slider gives way to big buttons bound to the ← and → keys (a focused
    slider would take the arrow keys too, and move twice).
    """
    if step_count <= 1:
        state.put("step", 0)
        st.caption("This output has a single step.")
        return 0
    state.restore("step", 0, lambda v: isinstance(v, int) and 0 <= v < step_count)
    current = st.session_state["step"]
    keys = dict(prev=dict(shortcut="Left"), next=dict(shortcut="Right")) if presenter else dict(prev={}, next={})
    columns = st.columns([1, 1, 3.5, 5] if describe else [1, 1, 6], vertical_alignment="center")
    columns[0].button("◀ Prev", key="step_prev", on_click=move_step, args=(-1, step_count),
                      disabled=current <= 0, **keys["prev"])
    columns[1].button("Next ▶", key="step_next", on_click=move_step, args=(1, step_count),
                      disabled=current >= step_count - 1, **keys["next"])
    with columns[2]:
        if presenter:
            state.remember("step", current)
            st.markdown(f"### Step {current + 1} of {step_count}")
            return current
        # the slider's own numbers are 0-based and hidden (page/style.COMPACT_CSS): steps are counted from 1
        # everywhere a person reads them, in the "Step t of T" line `describe(t)` writes beside it
        step = state.int_slider("Decoding step", 0, step_count - 1, "step", 0, label_visibility="collapsed")
    if describe:
        with columns[3]:
            describe(step)
    return step


def move_step(delta: int, step_count: int) -> None:
    current = state.kept("step", 0)
    state.put("step", int(min(max(current + delta, 0), step_count - 1)))
