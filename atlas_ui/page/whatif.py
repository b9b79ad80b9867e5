"""The page's what-if step (issue 23): the branch this session is on for the page's run, decoded
(runs/branch.translate_prefix under the key derived from the page's run), a link's branch checked
against the sentence, and the Result the views then draw. The branches' state, the switch and the
side-by-side panel are ui/branch.py (the views read them too). State lives in st.session_state
(per session), never in module globals."""
from __future__ import annotations

import streamlit as st

from ..runs.branch import branch_key, translate_prefix
from ..runs.warm import RunKey
from ..server.settings import MAX_CHARS, max_concurrent
from ..ui import state
from ..ui.branch import LINK, RUN, SEPARATOR, STATE, SWITCH, Shown
from ..ui.common import escape_md


def signature(model, text: str, beam: int) -> str:
    return repr((model, text[:MAX_CHARS], beam))


def _state(sig: str) -> dict:
    """The session's branches for this sentence; a new sentence (or model, or beam) starts empty.
    A share link's branch is taken once, for the first sentence this session shows."""
    kept = st.session_state.get(STATE)
    if kept is None:
        link = state.kept(LINK) or ""
        prefixes = [tuple(link.split(SEPARATOR))] if isinstance(link, str) and link.strip() else []
        kept = {"run": sig, "prefixes": prefixes, "current": 0 if prefixes else None, "from_link": bool(prefixes)}
        if prefixes:                               # a link opens on its branch unless it says otherwise
            state.put(SWITCH, "Original" if state.kept("branch_whatif") == "original" else "Branch")
    elif kept.get("run") != sig:
        kept = {"run": sig, "prefixes": [], "current": None, "from_link": False}
    st.session_state[STATE] = kept
    return kept


def unfit(result, prefix: tuple) -> str:
    """Why a link's branch does not belong to this sentence ("" when it does): every forced piece
    must be one of the model's own candidates at its step, as a click would have made it."""
    for t, piece in enumerate(prefix[:-1] if len(prefix) > 1 else ()):
        candidates = {p for p, _ in result.steps[t][2]}
        if piece not in candidates:
            return f"its piece {piece!r} at step {t + 1} is not among the model's candidates there"
    last = len(prefix) - 1
    if last >= 0 and prefix[last] not in {p for p, _ in result.steps[last][2]}:
        return f"its piece {prefix[last]!r} at step {last + 1} is not among the model's candidates there"
    return ""


def branch_run(run: RunKey, prefix: tuple):
    """The page's run (page/translation.page_run) decoded on from `prefix`, under the branch key derived
    from it; when the run is explained and explaining fails, the plain branch (or the real error)."""
    key = branch_key(run, prefix)
    if key.explain:
        try:
            return translate_prefix(key, max_concurrent())
        except (ValueError, RuntimeError):
            pass                                   # explaining failed: the plain branch (or the real error)
    return translate_prefix(key.but(explain=False), max_concurrent())


def shown(result, run: RunKey | None):
    """The Result the views draw: the original, or the current branch when the switch says so.
    Called by the page right after the translation of `run` (None: nothing to translate); bad or
    stale branches are dropped with a short message and the original is shown."""
    st.session_state.pop(RUN, None)
    st.session_state["_branch_drawn"] = False
    if result is None:
        return None
    if run.target is not None or result.forced:       # a forced reference: nothing to branch from
        st.session_state[RUN] = Shown(result, None, (), False)
        return result
    kept = _state(signature(run.model, run.text, run.beam_size))
    index = kept.get("current")
    branch, prefix = None, ()
    if index is not None and 0 <= index < len(kept["prefixes"]):
        prefix = tuple(kept["prefixes"][index])
        try:
            branch = branch_run(run, prefix)
            why = unfit(branch, prefix) if kept.get("from_link") else ""
        except ValueError as exc:
            why = str(exc)
        if why:
            where = "The share link's branch" if kept.get("from_link") else "That branch"
            st.warning(f"{where} does not fit this sentence ({escape_md(why, 200)}); showing the plain "
                       "translation.")
            kept["prefixes"].pop(index)
            kept["current"], branch, prefix = None, None, ()
        kept["from_link"] = False
    on_branch = branch is not None and state.kept(SWITCH, "Original") == "Branch"
    st.session_state[RUN] = Shown(result, branch, prefix, on_branch)
    return branch if on_branch else result
