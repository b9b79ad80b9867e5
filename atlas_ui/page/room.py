"""Follow the speaker (issue 52): presenter mode starts a room; every tab on the room's link follows.

The room's state is the presenter's share-link fields (what the page writes into its URL), held by
atlas_ui/server/rooms.py's store, one per process. The presenter's run publishes them at its end. A
follower's page holds a poller that draws nothing (an st.components.v2 component, inline JS): every
POLL_S seconds it asks the room's version over plain HTTP (atlas_ui/server/room_http.py, no script
run) and, only when it differs from the version this page applied or the room is gone, sends a
trigger, so the page reruns; the page's first act is then to take the presenter's fields
(state.seed(..., replace=True)). A slow st.fragment poll (FALLBACK_S) does the same through a script
run, for a page whose poller cannot run (no JS, a blocked request; AppTest). The presenter's key lives
in its session and its own URL only, never in a link the page shows. Public Streamlit API only.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import threading

import streamlit as st

from ..ui import state
from ..ui.branch import STATE as BRANCH_STATE
from .landing import LANDED
from .share import markdown_safe_url, qr_svg, share_url
from ..server.room_http import version_url
from ..server.room_store import store
from ..server.settings import follower_runs
from ..server.rooms import NotPresenter, RoomClosed, RoomStore, new_follower, valid_id

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


# ATLAS_ROOM_POLL_S: how often a follower's page asks (over HTTP) whether the presenter moved (a move
# reaches it within this plus one page run); ATLAS_ROOM_FALLBACK_S: how often its script asks too, in
# case the page's poller does not run (under rooms.FOLLOWER_SEEN_S, so such a follower still counts
# as present); ATLAS_ROOM_HEARTBEAT_S: how often a presenter's open page keeps its room alive
# (rooms.DEFAULT_IDLE_S is the idle time after which a room goes)
POLL_S = seconds("ATLAS_ROOM_POLL_S", 0.5, 0.1, 10.0)
FALLBACK_S = seconds("ATLAS_ROOM_FALLBACK_S", 8.0, 0.1, 86400.0)
HEARTBEAT_S = seconds("ATLAS_ROOM_HEARTBEAT_S", 60.0, 1.0, 3600.0)
POLLER_NAME, POLLER_KEY, POLLER_EVENT = "atlas_room_poller", "room_poller", "moved"

# The follower's poller. Streamlit calls the default export again with each run's data, and the
# cleanup it returns only when the element goes (and at once for a call that arrived too late), so
# one poll per mounted element lives in `polls`, and only the newest call's cleanup stops it. It
# asks only while the tab is visible (at once when it shows again), and sends one trigger per new
# version. The page's run hands the poller the version it applied early (the bar comes before the
# view), but a busy server may not start that run for seconds, and a second request would restart
# it: the same trigger goes again only after RETRY_MS, a safety net for a rerun that never came
# (5 s re-asked for 10% of the moves at 100 followers on a loaded machine, adding to the load).
POLLER_JS = """
const polls = new Map();
const RETRY_MS = 30000;

function ask(poll, value) {
  const now = Date.now();
  if (poll.stopped || (poll.asked === value && now - poll.askedAt < RETRY_MS)) return;
  poll.asked = value;
  poll.askedAt = now;
  poll.trigger('%(event)s', value);
}

async function tick(poll) {
  if (poll.busy || poll.stopped || document.visibilityState === 'hidden') return;
  poll.busy = true;
  try {
    const response = await fetch(poll.data.url, {cache: 'no-store', credentials: 'same-origin'});
    if (response.status === 404 || response.status === 410) {
      ask(poll, 'ended');                       // the page reruns and says the room has ended
    } else if (response.ok) {
      const body = await response.json();
      if (Number.isInteger(body.version) && body.version !== poll.data.applied) ask(poll, body.version);
    }
  } catch (error) {
    // offline for a moment: the next tick asks again (and the page's slow fragment poll meanwhile)
  } finally {
    poll.busy = false;
  }
}

export default function (component) {
  const {key, data, setTriggerValue} = component;
  let poll = polls.get(key);
  const fresh = !poll;
  if (fresh) {
    poll = {timer: null, every: 0, busy: false, stopped: false, asked: null, askedAt: 0, calls: 0};
    poll.onVisible = () => { if (document.visibilityState === 'visible') tick(poll); };
    document.addEventListener('visibilitychange', poll.onVisible);
    polls.set(key, poll);
  }
  const call = ++poll.calls;
  poll.data = data;
  poll.trigger = setTriggerValue;
  if (poll.every !== data.every_ms) {
    clearInterval(poll.timer);
    poll.every = data.every_ms;
    poll.timer = setInterval(() => tick(poll), poll.every);
  }
  if (fresh) tick(poll);                        // the first ask at once: it also counts this tab present
  return () => {
    if (call !== poll.calls) return;            // a newer call of this element owns the poll
    poll.stopped = true;
    clearInterval(poll.timer);
    document.removeEventListener('visibilitychange', poll.onVisible);
    polls.delete(key);
  };
}
""" % {"event": POLLER_EVENT}

# zero height and no text: the element is hidden by its key (style.COMPACT_CSS), its script still runs
_poller = st.components.v2.component(POLLER_NAME, js=POLLER_JS)


def rooms() -> RoomStore:
    """This process's rooms (room_store.store(): the same store the HTTP route reads)."""
    return store()


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
        st.session_state[ME] = new_follower()
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


@functools.lru_cache(maxsize=None)
def _follower_slots(count: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(count)


def following_moves() -> bool:
    """A follower that has joined (its first run applied the room's state): its runs follow moves, which
    come to every follower at once. A joining follower's first run does not wait (followers join over
    seconds, and a first run that waited for turns doubled the joining p95)."""
    return bool(st.session_state.get(FOLLOWING)) and st.session_state.get(APPLIED) is not None


@contextlib.contextmanager
def follower_turn(follower: bool, count: int | None = None, wait: float = 30.0):
    """A follower's run waits for its turn (follower_runs() at once in this process): a move starts one
    run per follower at once, and runs that all share the GIL all end late, while runs that take turns end
    one after another, so the first followers see the move early and the crowd's CPU goes to runs, not to
    switching between threads. Other runs (the presenter's, a visitor's) never wait, and a follower waits
    at most `wait` s (then it runs anyway: a stuck run must not stop the room)."""
    if not follower:
        yield
        return
    slots = _follower_slots(count or follower_runs())
    turn = slots.acquire(timeout=wait)
    try:
        yield
    finally:
        if turn:
            slots.release()


def _detach() -> None:
    st.session_state[FOLLOWING] = False


def _follow_again() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state.pop(APPLIED, None)


def _moved() -> None:
    """The poller's trigger has a callback only so that its value reaches the run (_poll_http)."""


def _poll_http() -> bool:
    """The page's poller (POLLER_JS): asks the room's version every POLL_S s over HTTP and reruns
    the page when it moved. A poll that finds no move is one HTTP request, not a script run: a
    fragment's run costs at least 4 websocket messages through Streamlit's one runtime loop, and
    100 followers polling that way every 0.5 s held the server at 100% of a core
    (benchmarks/bench_room.py, docs/serving.md). The trigger's rerun is a full run: the poller is
    on the page, not in a fragment."""
    result = _poller(key=POLLER_KEY, data={"url": version_url(st.session_state[ROOM], me()),
                                           "applied": st.session_state.get(APPLIED), "every_ms": round(POLL_S * 1000)},
                     on_moved_change=_moved)
    return getattr(result, POLLER_EVENT, None) is not None


@st.fragment(run_every=FALLBACK_S)
def _poll() -> None:
    """The slow fallback: a follower's question every FALLBACK_S s through a script run, for a page
    whose poller does not run. It draws nothing: every element a run draws is a message to that
    tab. The bar and its Detach button belong to the page's run."""
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
            # a run the page's poller started proves the poller runs: no fallback fragment this run
            # (a fragment's registration is a few percent of a follower's run, and a move starts
            # one run per follower at once); any other run draws it again
            if not _poll_http():
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
    """The link the room opens: the room id and, behind serving.proxy with rooms in one process's
    memory, the route to the process that owns the room (nginx hashes it as it hashes the route
    cookie). Rooms in a shared folder (ATLAS_ROOM_DIR) need no route: any process serves a follower,
    so the followers spread over them. Never the key."""
    owner = None if rooms().shared else route()
    return markdown_safe_url(share_url(st.context.url, {"room": room_id, "route": owner}))


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
        # the QR code beside the words, as the view's link below it: stacked, the two ran past the
        # bottom of a 720-px window and "End the room" sat behind the popover's scroll
        code, words = st.columns([1, 1.2])
        code.image(qr_svg(url), caption="Scan to follow the speaker", width=300)
        words.markdown(f"**Room** · {count} following · [room link]({url})")
        words.code(url, language=None, wrap_lines=True)
        words.button("End the room", key="room_end", on_click=_end)
