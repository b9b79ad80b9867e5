"""Text written in a grid's cells (the Logit lens's top pieces): whole where it can be.

A piece wider than its cell is broken over two lines, and the grid's type shrinks (one size for
every cell: plotly.js gives a heatmap's text one font) until each piece fits its cell's width in at
most two lines and two lines fit a row's height; "ju…" and "bl…" told a room nothing. A piece loses
its word-start ▁ (a glyph 1 em wide) before it is broken; only one that no size down to `smallest`
holds is cut with ….
"""
from __future__ import annotations

from typing import Sequence

from ._base import LETTER_EM, text_width

WIDE_GLYPHS = "\u2581\u2026"    # ▁ and …: about 1 em wide in the fonts browsers pick, not text_width's 0.62
WORD_STARTS = "\u2581\u2423"    # ▁, and ␣ where spaces are shown
TWO_LINES = 2.2                 # px of row height two lines need, in font sizes
SMALLEST_CELL_TEXT = 9
# a trace's meta flag: its cells' text size was fitted here (presenter type keeps it)
FITTED_TEXT = "fitted_text"


def cell_width(text: str, size: float) -> float:
    wide = sum(text.count(c) for c in WIDE_GLYPHS)
    return text_width(text, size) + wide * size * (1 - LETTER_EM)


def cut(text: str, size: float, room: float) -> str:
    """`text` cut (with …) to what `room` px hold at font size `size`; a piece that must be cut loses its
    word-start ▁ first (a glyph 1 em wide: in a narrow cell it left room for nothing else)."""
    if cell_width(text, size) <= room:
        return text
    if len(text) > 1 and text[0] in WORD_STARTS:
        text = text[1:]
        if cell_width(text, size) <= room:
            return text
    while len(text) > 1 and cell_width(text + "…", size) > room:
        text = text[:-1]
    return text + "…"


def two_lines(text: str, size: float, room: float) -> tuple[str, str] | None:
    """`text` broken where both halves are narrowest, if each then fits `room` px (keeping its ▁ when
    it can); None when no break makes both fit."""
    for whole in ((text, text[1:]) if len(text) > 2 and text[0] in WORD_STARTS else (text,)):
        if len(whole) < 2:
            continue
        # the narrowest pair; of equals, the longer first line ("Fahr" / "rad")
        at = min(range(1, len(whole)), key=lambda k: (max(cell_width(whole[:k], size), cell_width(whole[k:], size)), -k))
        if max(cell_width(whole[:at], size), cell_width(whole[at:], size)) <= room:
            return whole[:at], whole[at:]
    return None


def fit_cell_texts(texts: Sequence[str], size: float, room: float, row_px: float,
                   smallest: float = SMALLEST_CELL_TEXT) -> tuple[list[list[str]], int]:
    """(lines of each text, font size): the largest size from `size` down to `smallest` at which every
    text fits `room` px in one line, or in two where `row_px` holds two. A text that not even
    `smallest` holds is cut (with …) at the size the others get, and does not make them smaller."""
    def lines(text: str, font: int) -> list[str] | None:
        for line in (text, text[1:]) if len(text) > 1 and text[0] in WORD_STARTS else (text,):
            if cell_width(line, font) <= room:           # one line, without its ▁ if it must
                return [line]
        return list(two_lines(text, font, room) or ()) or None if row_px >= TWO_LINES * font else None

    texts, lowest = list(texts), int(smallest)
    whole = [lines(text, lowest) is not None for text in texts]
    font = next((font for font in range(int(size), lowest, -1)
                 if all(lines(text, font) for text, ok in zip(texts, whole) if ok)), lowest)
    return [lines(text, font) if ok else [cut(text, font, room)] for text, ok in zip(texts, whole)], font
