"""Compare's cached parts: a source piece's embedding neighbours, the edited sentence a swap makes,
and the pair of runs (original, edited) with the same model and decoding. Results are plain data."""
from __future__ import annotations

import streamlit as st

# at module level (see translation.py: two threads importing one package at once can deadlock)
from transformer.analysis.neighbours import nearest_pieces, source_ids, source_side_ids, swap_word

from .translation import ExplainFailed, get_translator, translate, translate_explained
from .warm import RunKey
from .explain import explain_unavailable
from .catalogue import ModelRef
from .result import Result

NEIGHBOURS = 8               # swap candidates offered for one word


# cache_resource, not cache_data: an immutable tuple handed out as it is, where cache_data pickles a
# copy for every call (Compare asks for it twice a run, in every session of an audience)
@st.cache_resource(max_entries=256, show_spinner=False)
def word_neighbours(model: ModelRef, device: str, pieces: tuple, k: int = NEIGHBOURS) -> tuple[tuple[str, float], ...]:
    """((piece, cosine), ...) nearest to a word (its pieces' mean source embedding), pieces that start a
    word only, so the swap replaces a whole word by a whole word; empty pieces (a bare ▁) left out.
    A model with a joint vocabulary that ships source_pieces.json offers pieces of its source side
    only (the German "▁zerrissene" was a neighbour of "horse")."""
    translator = get_translator(model, device)
    ids = source_ids(translator, list(pieces))
    try:
        side = source_side_ids(model.path)
    except ValueError:               # a broken list: every piece, as before there was one
        side = None
    found = nearest_pieces(translator, ids, k + 4, word_start=True, among=side)
    return tuple((n.piece, n.similarity) for n in found if n.piece.lstrip("\u2581\u0120").strip())[:k]


@st.cache_resource(max_entries=256, show_spinner=False)
def default_swap(model: ModelRef, device: str, source_tokens: tuple, words: tuple) -> str:
    """The edit a fresh Compare link shows: the first of `words` ((start, stop) spans, longest first)
    that has a neighbour, swapped for its nearest one; "" when none has. Made once per sentence for
    every session (an audience on one Compare link)."""
    for start, stop in words:
        found = word_neighbours(model, device, source_tokens[start:stop])
        if found:
            return swapped_text(model, device, source_tokens, start, stop, found[0][0])
    return ""


def swapped_text(model: ModelRef, device: str, source_tokens, start: int, stop: int, piece: str) -> str:
    """The sentence with source pieces [start, stop) replaced by `piece`, as text."""
    return swap_word(get_translator(model, device), list(source_tokens), start, stop, piece)


def pair_runs(model: ModelRef, device: str, text: str, edited: str, beam: int, slots: int,
              contributions: bool) -> tuple[Result, Result, str]:
    """(original run, edited run, note): both decoded freely with the same beam (no reference), with
    ALTI+ when `contributions` and the model allows it; the note says why not, else ""."""
    note = ""
    if contributions:
        note = explain_unavailable(get_translator(model, device)) or ""
    if contributions and not note:
        runs = [translate_explained(RunKey(model, device, sentence, beam, explain=True), slots)
                for sentence in (text, edited)]
        if not any(isinstance(run, ExplainFailed) for run in runs):
            return runs[0], runs[1], ""
        note = "ALTI+ contributions could not be computed for one of the sentences."
    return (translate(RunKey(model, device, text, beam), slots), translate(RunKey(model, device, edited, beam), slots),
            note)
