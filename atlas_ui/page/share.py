"""Share links, downloads and presenter mode: what lets a view leave the browser tab."""
from __future__ import annotations

import functools
import re
from urllib.parse import quote, urlencode

import segno
import streamlit as st

from viz import figure_html, trace_json, trace_npz, trace_payload

# Constants only (no user text): larger type, no Streamlit header or toolbar, wider page.
# The chart is the slide: no header or sidebar, little padding, a slim bar of controls, the
# translation strip at reading size (style.COMPACT_CSS comes first; these win). The view's first chart
# comes before its controls (the step buttons of a walk through the steps stay above it).
PRESENTER_CSS = """<style>
html { font-size: 19px; }
[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"],
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] { display: none; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 0.7rem 1.5rem 1rem; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.4rem; }
[data-testid="stMarkdownContainer"] .aa-tokens { font-size: 1.15rem; }
[data-testid="stWidgetLabel"] { min-height: 0; margin-bottom: 0; }
[data-testid="stWidgetLabel"] p { font-size: 0.8rem; }
.stSelectbox, .stRadio { display: flex; flex-direction: row; align-items: center; gap: 0.45rem; }
.stSelectbox > [data-testid="stWidgetLabel"], .stRadio > [data-testid="stWidgetLabel"] { flex: 0 0 auto; width: auto; }
.stSelectbox > div:not([data-testid="stWidgetLabel"]) { flex: 1 1 auto; min-width: 0; }
.stRadio [role="radiogroup"] { flex-wrap: nowrap; gap: 0.2rem 0.6rem; }
[data-testid="stCaptionContainer"] { font-size: 0.7rem; }
.st-key-view_body > :nth-child(1 of :has([data-testid="stPlotlyChart"])) { order: -1; }
.st-key-view_body > :has(.st-key-step_prev) { order: -2; }
.st-key-view_body > :has(.st-key-step_prev) h3 { padding: 0; }
</style>"""


def share_url(base: str | None, params: dict) -> str:
    """The page's address with the view in its query string (relative when the base is unknown)."""
    query = urlencode({name: str(value) for name, value in params.items() if value not in (None, "")})
    return f"{base or ''}?{query}" if query else (base or "?")


def markdown_safe_url(url: str) -> str:
    """The URL with every character that could end or reshape a Markdown link destination
    percent-encoded (URL delimiters and existing escapes kept). The query is urlencoded already, but
    the page path comes from the browser's address, where ( ) [ ] are left as typed: a crafted link
    must not put its own link in the box."""
    return quote(url, safe=":/?#&=%+,;@!$*'~")


def share_box(box, params: dict) -> None:
    """The link to this exact view. A plain link, not st.code: st.code's highlighter script cost
    every new tab 0.7-1.3 s before its first chart (benchmarks/bench_first_paint.py); the copy
    button and the QR code for a room are in an expander drawn only while it is open."""
    url = markdown_safe_url(share_url(st.context.url, params))
    with box, st.container(key="share_link"):
        # one element, not a heading, a link and a caption: every element is a message per run and
        # per session, on every page (the sidebar is drawn while folded too)
        st.markdown(f"### Share\n\n[Link to this view]({url})\n\n:gray[:small[It opens exactly this view: model, "
                    "sentence, decoding, view, attention kind, layer, head and step. The address bar holds the "
                    "same.]]")
        room = st.expander("Copy the link, or show its QR code", key="share_open", on_change="rerun")
        if room.open:
            with room:
                st.code(url, language=None, wrap_lines=True)      # has a copy button
                st.image(qr_svg(url), caption="Scan to open this view", width="stretch")


PRESENTER_SHARE_OPEN = "presenter_share_open"     # session key: presenter mode's Share popover is open


def presenter_share(box, params: dict, room_running: bool = False) -> None:
    """Presenter mode's Share popover (drawn only while open): the link and a large QR code for the
    room. The link opens the plain page (no presenter mode): the audience reads it on a phone. While
    a room runs, its QR code is the one to show: the view's link is then one line under it."""
    if not box.open:
        return
    url = markdown_safe_url(share_url(st.context.url, {**params, "present": None}))
    if room_running:
        with box, st.container(key="share_link"):
            st.markdown(f"[Link to this view]({url}) :gray[:small[· opens this view without following the room]]")
        return
    with box, st.container(key="share_link"):
        # the link beside its QR code: below it, a long link ran past the bottom of a 720-px window
        code, link = st.columns([1, 1.2])
        code.image(qr_svg(url), caption="Scan to open this view", width=300)
        link.markdown(f"[Link to this view]({url})\n\n:gray[:small[It opens the plain page (no presenter "
                      "mode), for a phone.]]")
        link.code(url, language=None, wrap_lines=True)      # has a copy button


@functools.lru_cache(maxsize=256)
def qr_svg(url: str) -> str:
    """The link as a QR code (SVG text, black on white, with the quiet zone scanners need)."""
    return segno.make(url, error="m").svg_inline(scale=8, dark="#000", light="#fff", border=4)


def file_stem(text: str) -> str:
    """A safe file name from the sentence: letters, digits and dashes, at most 40 characters."""
    stem = re.sub(r"[^0-9A-Za-z]+", "-", text).strip("-")[:40].strip("-")
    return f"attention-atlas-{stem or 'sentence'}"


def result_payload(result, meta: dict) -> dict:
    return trace_payload(
        source_tokens=result.source_tokens, target_tokens=result.target_tokens,
        output_tokens=result.output_tokens, attention=result.attention, step_probs=result.probs(),
        source_padding=result.source_padding, target_causal=result.target_causal,
        positional_encoding=result.positional_encoding, source_embeddings=result.source_embeddings,
        meta=meta)


def export_buttons(result, figure, meta: dict, stem: str) -> None:
    """Downloads of the whole trace (JSON, NPZ) and of this view's figure (standalone HTML).

    The files are built only when a button is clicked (callable data), not on every rerun.
    """
    columns = st.columns(3)
    columns[0].download_button("Trace (JSON)", data=lambda: trace_json(result_payload(result, meta)),
                               file_name=f"{stem}.json", mime="application/json", key="export_json",
                               on_click="ignore", help="Every head's weights, tokens, masks, probabilities "
                                                       "and a schema note.")
    columns[1].download_button("Trace (NPZ)", data=lambda: trace_npz(result_payload(result, meta)),
                               file_name=f"{stem}.npz", mime="application/octet-stream", key="export_npz",
                               on_click="ignore", help="The same as numpy arrays: np.load(path) works "
                                                       "without allow_pickle.")
    if figure is not None:
        columns[2].download_button("This figure (HTML)", data=lambda: figure_html(figure),
                                   file_name=f"{stem}-figure.html", mime="text/html", key="export_html",
                                   on_click="ignore", help="A standalone page with plotly.js inside; "
                                                           "works offline. The camera icon on every chart "
                                                           "saves a PNG.")
