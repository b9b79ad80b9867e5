"""What if the model had taken another piece at some step (issue 23): branches, their small tree,
the original / branch switch every view obeys, and the side-by-side of the two translations.

A branch is a prefix: the pieces of the run on screen before a step, then another candidate; the
model decodes on from there (runs/branch.translate_prefix; the page makes that run: page/whatif.py).
The branches of one sentence form a tree (a branch of a branch); the share link holds the current
one (`branch=` pieces, and `whatif=original` while the switch shows the original). A click never
flips the switch by itself, so what was clicked (the candidates, the beam tree) stays put; the
comparison appears below it. Here: what the views and the page read and draw of it (no run is made
here: ui/ is below runs/). State lives in st.session_state (per session), never in module globals."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from viz.branch import branch_compare_html, branch_tree, parting_step, total_log_prob

from . import state
from .common import escape_md, shared_figure

STATE = "branch_state"        # {"run": signature, "prefixes": [tuple], "current": int | None}
RUN = "_branch_run"           # this run's Shown (set by page/whatif.shown(), read by the views and panel())
SWITCH = "branch_view"        # "Original" | "Branch"
LINK = "branch_link"          # the share link's branch pieces (state.URL_FIELDS), read once
SEPARATOR = " "               # pieces never hold a space (sentencepiece ▁, byte-level BPE Ġ)


@dataclass(frozen=True)
class Shown:
    """This run's original and current branch (None when there is none)."""
    original: object
    branch: object | None
    prefix: tuple
    on_branch: bool               # the switch shows the branch: views draw `branch`


def current() -> Shown | None:
    """This run's Shown, or None (no translation yet)."""
    return st.session_state.get(RUN)


def create(prefix) -> None:
    """Callback of a click on a candidate: a new branch (or the same one again), made current."""
    kept = st.session_state.get(STATE)
    if kept is None:
        return
    prefix = tuple(str(p) for p in prefix)
    if prefix not in kept["prefixes"]:
        kept["prefixes"].append(prefix)
    kept["current"] = kept["prefixes"].index(prefix)


def _pick(key: str) -> None:
    kept = st.session_state.get(STATE)
    value = st.session_state.get(key)
    if kept is not None and isinstance(value, int) and 0 <= value < len(kept["prefixes"]):
        kept["current"] = value


def url_params() -> dict:
    """The share link's what-if fields: the current branch's pieces, and the switch when it shows
    the original."""
    run = current()
    if run is None or run.branch is None:
        return {"branch": None, "whatif": None}
    return {"branch": SEPARATOR.join(run.prefix), "whatif": None if run.on_branch else "original"}


def panel(display, key: str = "branch") -> None:
    """The switch, the tree of what-ifs and the side-by-side; nothing without a branch. Views
    with candidates draw it below them; the page draws it below any other view (once a run)."""
    run = current()
    if run is None or run.branch is None or st.session_state.get("_branch_drawn"):
        return
    st.session_state["_branch_drawn"] = True
    kept = st.session_state[STATE]
    prefixes = kept["prefixes"]
    switch, tree = st.columns([1.2, 3], vertical_alignment="center")
    with switch:
        state.radio("Show", ["Original", "Branch"], SWITCH, horizontal=True,
                    help="Every view draws the run chosen here: the model's own translation, or the branch.")
    with tree:
        if len(prefixes) > 1:
            shape = branch_tree(prefixes)
            st.session_state[f"{key}_tree"] = kept["current"]
            st.selectbox("What-ifs", list(range(len(prefixes))), key=f"{key}_tree",
                         format_func=lambda i: tree_label(prefixes[i], shape[i][0]),
                         on_change=_pick, args=(f"{key}_tree",),
                         help="Every branch of this sentence; a branch of a branch is indented.")
    original, branch = run.original, run.branch
    part = parting_step(original.output_tokens, branch.output_tokens)
    # the same for every session on this pair of runs: built once (a room opening a link with a branch);
    # a table, not a chart: a new plotly chart was a third of a candidate click's time in the browser
    table = shared_figure(branch, ("branch_compare", original.key, display.show_space), lambda: branch_compare_html(
        original.output_tokens, original.probs(), branch.output_tokens, branch.probs(), forced=len(run.prefix),
        show_space=display.show_space, title=f"What if step {len(run.prefix)} had been “{run.prefix[-1]}”?"))
    st.markdown(table, unsafe_allow_html=True)              # every piece escaped (viz.branch)
    note = length_note(branch.output_tokens, len(run.prefix))
    if note:
        st.info(note)
    gap = total_log_prob(original.probs()) - total_log_prob(branch.probs())
    st.caption(f"Original: {escape_md(original.text or ' ', 160)}  \nBranch: {escape_md(branch.text or ' ', 160)}  \n"
               f"They part at step {part + 1}; the original is {gap:+.2f} in total log-probability.")


def length_note(pieces: list, forced: int) -> str:
    """Why a branch stops where it does, when that needs saying ("" when it ended on its own): the
    chosen piece ended the sentence, the forced pieces already fill the length limit (max_len: no
    room is left to decode on), or decoding ran into that limit."""
    ended = bool(pieces) and pieces[-1] == "</s>"
    if len(pieces) == forced:
        return ("This branch ends the sentence at the chosen piece: there is nothing left to decode." if ended
                else f"This branch's {forced} forced pieces already fill the length limit of a translation of "
                     "this sentence: there is no room left to decode on, so the branch is just those pieces.")
    return "" if ended else "The branch reached the length limit before ending the sentence."


def tree_label(prefix: tuple, depth: int) -> str:
    """One tree row (a selectbox option: plain text, never Markdown): indentation by depth, the step
    and the piece that was swapped in."""
    return "· " * depth + ("└ " if depth else "") + f"step {len(prefix)}: {prefix[-1][:40]}"
