"""Follow the speaker (issue 52): presenter mode starts a room; every tab on the room's link follows.

The room's state is the presenter's share-link fields (what the page writes into its URL), held by
atlas_ui/server/rooms.py's store, one per process through st.cache_resource. The presenter's run
publishes them at its end; a follower's fragment polls the room's version every POLL_S seconds and
reruns the page when it changed, and the page's first act is then to take the presenter's fields
(state.seed(..., replace=True)). The presenter's key lives in its session and its own URL only,
never in a link the page shows. Public Streamlit API only: st.cache_resource, st.fragment.
"""
from __future__ import annotations

import os
import re
import secrets

import streamlit as st

from ..ui import state
from ..ui.branch import STATE as BRANCH_STATE
from .landing import LANDED
from .share import markdown_safe_url, qr_svg, share_url
from ..server.rooms import NotPresenter, RoomClosed, RoomStore, valid_id

ROOM, KEY, FOLLOWING = "room_id", "room_key", "room_following"     # session keys
APPLIED, BASELINE, ME, NOTE, BOOTED = "_room_applied", "_room_baseline", "_room_me", "_room_note", "_room_booted"
LAST = "_room_last"             # this session's link fields at the end of its last run
ROUTE_COOKIE = "atlas_route"    # serving.proxy's sticky-session cookie (serving/proxy.py ROUTE_COOKIE)
ROUTE_PATTERN = re.compile(r"^[0-9a-f]{32}$")
ENDED = "This room has ended, or its link is not right. Here is the normal app; ask the speaker for the link."


def seconds(name: str, default: float, low: float, high: float) -> float:
    try:
        return min(high, max(low, float(os.environ.get(name, default))))
    except ValueError:
        return default


# ATLAS_ROOM_POLL_S: how often a follower asks whether the presenter moved (a move reaches it within
# this plus one page run); ATLAS_ROOM_HEARTBEAT_S: how often a presenter's open page keeps its room
# alive (rooms.DEFAULT_IDLE_S is the idle time after which a room goes)
POLL_S = seconds("ATLAS_ROOM_POLL_S", 0.5, 0.1, 10.0)
HEARTBEAT_S = seconds("ATLAS_ROOM_HEARTBEAT_S", 60.0, 1.0, 3600.0)


@st.cache_resource(show_spinner=False)
def rooms() -> RoomStore:
    """This process's rooms: the one deliberate piece of state shared between sessions."""
    return RoomStore()


def link_fields(params: dict) -> dict:
    """The fields a room shares: the link's, as text (what the URL holds), without presenter mode
    (a follower's screen is its own: a phone reads the normal page)."""
    return {name: str(value) for name, value in params.items() if value not in (None, "") and name != "present"}


def _drop(note: str = "") -> None:
    for key in (ROOM, KEY, FOLLOWING, APPLIED, BASELINE):
        st.session_state.pop(key, None)
    if note:
        st.session_state[NOTE] = note


def boot() -> None:
    """Once per session: a link's `room=` (and the presenter's `key=`) joins its room."""
    if st.session_state.get(BOOTED):
        return
    st.session_state[BOOTED] = True
    params = st.query_params
    room_id, key = params.get("room"), params.get("key")
    if room_id is None:
        return
    if not valid_id(room_id):
        _drop(ENDED)
        return
    try:
        if key:
            rooms().touch(room_id, key)
            st.session_state[ROOM], st.session_state[KEY] = room_id, key
            return
    except RoomClosed:
        _drop(ENDED)
        return
    except NotPresenter:
        st.session_state[NOTE] = "That key does not drive this room: you follow it like everyone else."
    st.session_state[ROOM], st.session_state[FOLLOWING] = room_id, True


def me() -> str:
    """This session's follower id (counts it as present; never shown)."""
    if ME not in st.session_state:
        st.session_state[ME] = secrets.token_hex(8)
    return st.session_state[ME]


def follow(extra_fields=()) -> None:
    """At the start of a follower's run, before any widget: take the presenter's view when it moved."""
    if not st.session_state.get(FOLLOWING):
        return
    try:
        version, params = rooms().read(st.session_state[ROOM], me())
    except (RoomClosed, KeyError):
        _drop(ENDED)
        return
    if version == st.session_state.get(APPLIED):
        return
    state.seed(params, extra_fields, replace=True)
    st.session_state.pop(BRANCH_STATE, None)       # the presenter's branch, read from its fields
    st.session_state[LANDED] = True                # the presenter chose the head: no first screen
    st.session_state[APPLIED], st.session_state[BASELINE] = version, None


def _detach() -> None:
    st.session_state[FOLLOWING] = False


def _follow_again() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state.pop(APPLIED, None)


@st.fragment(run_every=POLL_S)
def _poll() -> None:
    """A follower's question every POLL_S s: did the room move? Then the whole page reruns. It draws
    nothing: every element a run draws is a message to that tab, and a room of 100 followers asks
    200 times a second (benchmarks/bench_room.py), so a room that stayed put costs a dict lookup
    and Streamlit's own run. The bar and its Detach button belong to the page's run."""
    try:
        version = rooms().version(st.session_state[ROOM], me())
    except (RoomClosed, KeyError):
        version = None
    if not st.session_state.get(FOLLOWING) or version is None or version != st.session_state.get(APPLIED):
        st.rerun()


@st.fragment(run_every=HEARTBEAT_S)
def _heartbeat() -> None:
    """The presenter's page is still open: the room stays (rooms.RoomStore.touch)."""
    try:
        rooms().touch(st.session_state[ROOM], st.session_state[KEY])
    except (RoomClosed, NotPresenter, KeyError):
        st.rerun()                      # the run's publish says what happened


def bar() -> None:
    """Above the page: a note on a room link that failed, and the follower's switch."""
    note = st.session_state.pop(NOTE, None)
    if note:
        st.warning(note)
    if ROOM not in st.session_state:
        return
    if KEY in st.session_state:
        _heartbeat()
    elif st.session_state.get(FOLLOWING):
        with st.container(key="room_bar", horizontal=True, vertical_alignment="center"):
            st.markdown(":green[●] **Following the speaker**", width="content")
            st.button("Detach", key="room_detach", on_click=_detach, help="Explore on your own; the speaker "
                      "moves on without you until you follow again.")
            _poll()
    else:
        with st.container(key="room_bar", horizontal=True, vertical_alignment="center"):
            st.markdown(":gray[○] **Exploring alone**", width="content")
            st.button("Follow again", key="room_follow", on_click=_follow_again, type="primary",
                      help="Back to what the speaker shows, and on with them.")


def after_run(params: dict) -> dict:
    """At the end of every run: the presenter publishes its view; a follower who changed the view
    itself is detached (it never drives). Returns the room's fields for this session's own URL."""
    fields = link_fields(params)
    st.session_state[LAST] = fields
    room_id = st.session_state.get(ROOM)
    if room_id is None:
        return {}
    key = st.session_state.get(KEY)
    if key is not None:
        try:
            rooms().publish(room_id, key, fields)
        except (RoomClosed, NotPresenter):
            _drop("The room has ended (nobody drove it for a long time). Start a new one from the Share menu.")
            return {}
        return {"room": room_id, "key": key}
    if st.session_state.get(FOLLOWING):
        baseline = st.session_state.get(BASELINE)
        if baseline is None:
            st.session_state[BASELINE] = fields
        elif baseline != fields:                  # the follower moved: it explores alone from here
            st.session_state[FOLLOWING] = False
            st.rerun()                            # once: the bar above says so
    return {"room": room_id, "route": route()}


def route() -> str | None:
    """This tab's serving.proxy route (nginx's $request_id, 32 hex digits), or None without a proxy."""
    try:
        value = st.context.cookies.get(ROUTE_COOKIE)
    except Exception:          # no request behind this run (AppTest)
        return None
    return value if isinstance(value, str) and ROUTE_PATTERN.match(value) else None


def room_link(room_id: str) -> str:
    """The link the room opens: the room id and, behind serving.proxy, the route to the process
    that owns the room (nginx hashes it as it hashes the route cookie). Never the key."""
    return markdown_safe_url(share_url(st.context.url, {"room": room_id, "route": route()}))


def _start() -> None:
    room_id, key = rooms().create(st.session_state.get(LAST, {}))
    st.session_state[ROOM], st.session_state[KEY] = room_id, key
    st.session_state.pop(FOLLOWING, None)


def _end() -> None:
    try:
        rooms().end(st.session_state.get(ROOM, ""), st.session_state.get(KEY, ""))
    except (RoomClosed, NotPresenter):
        pass
    _drop()


def panel() -> None:
    """The presenter's room, in the Share menu: start one, or its link, QR code and followers."""
    room_id = st.session_state.get(ROOM)
    with st.container(key="room_panel"):
        if room_id is None or KEY not in st.session_state:
            st.button("Start a room", key="room_start", on_click=_start, type="primary",
                      help="Every phone that opens the room's link follows what you show, live.")
            return
        url = room_link(room_id)
        try:
            count = rooms().following(room_id)
        except RoomClosed:
            count = 0
        st.markdown(f"**Room** · {count} following · [room link]({url})")
        st.image(qr_svg(url), caption="Scan to follow the speaker", width=300)
        st.code(url, language=None, wrap_lines=True)
        st.button("End the room", key="room_end", on_click=_end)
