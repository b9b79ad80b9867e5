"""Token labels: the one place where pieces are escaped for display.

Plotly renders labels as pseudo-HTML, so a raw `<s>` would start a strikethrough
and `</s>` would end it: both would vanish. Streamlit renders `st.markdown(...,
unsafe_allow_html=True)` as Markdown + HTML, so a piece like `<script>` must come
out inert there too. Everything that shows a piece goes through this module.
"""
from __future__ import annotations

from typing import Iterable

# sentencepiece's fixed special pieces (ids 0..3)
PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIAL_PIECES = frozenset({PAD, UNK, BOS, EOS})
# Specials that carry no content and may be hidden; <unk> stands for real text.
STRUCTURAL_PIECES = frozenset({PAD, BOS, EOS})
# Specials that statistics count as "attention parked on a boundary token".
BOUNDARY_PIECES = frozenset({BOS, EOS})

WORD_START = "\u2581"       # ▁, sentencepiece's word-start marker
VISIBLE_SPACE = "\u2423"    # ␣, what show_space=True draws instead

# Named entities for &, <, > (readable, and what tests and users expect); decimal
# references for the rest, because plotly.js only decodes a few named entities
# (not &quot;) but decodes every numeric one.
_PLOTLY_TABLE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                               '"': "&#34;", "'": "&#39;"})
# For HTML that Streamlit also runs through Markdown: html.escape(quote=True)
# plus Markdown/LaTeX/emoji syntax characters as numeric references, which
# CommonMark never reads as structure.
_MARKDOWN_SYNTAX = "\\`*_[]()$~|:#!{}"
_HTML_TABLE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                             '"': "&quot;", "'": "&#x27;",
                             **{c: f"&#{ord(c)};" for c in _MARKDOWN_SYNTAX}})


def escape_label(text: object) -> str:
    """Escape text for a Plotly label, hover text or title (HTML-safe)."""
    return str(text).translate(_PLOTLY_TABLE)


def escape_html(text: object) -> str:
    """Escape text for HTML that will pass through Markdown (st.markdown)."""
    return str(text).translate(_HTML_TABLE)


def is_special(piece: str) -> bool:
    """True for sentencepiece's special pieces <pad>, <unk>, <s>, </s>."""
    return piece in SPECIAL_PIECES


def show_piece(piece: object, *, show_space: bool = False) -> str:
    """The raw (unescaped) display form of one piece."""
    text = str(piece)
    return text.replace(WORD_START, VISIBLE_SPACE) if show_space else text


def display_tokens(tokens: Iterable[object], *, show_space: bool = False) -> list[str]:
    """Escaped Plotly labels for pieces; `show_space` draws ▁ as ␣."""
    return [escape_label(show_piece(t, show_space=show_space)) for t in tokens]
