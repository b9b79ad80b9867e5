"""A room over Streamlit's websocket protocol (issue 52): a presenter that drives and followers that
poll, each one tab as a browser runs it, without a browser (benchmarks/bench_room.py, tests).

A tab sends what Streamlit's frontend sends: one rerun of its link, then a widget's new value when
it is used, and for each `st.fragment(run_every=...)` the server announces (ForwardMsg.auto_rerun) a
rerun of that fragment every interval, the timers cancelled when a full run starts (the frontend's
handleAutoRerun / cleanupAutoReruns): a follower's slow fallback poll is such a fragment. Its real
poll is the page's poller (atlas_ui/page/room.py, an st.components.v2 component), which a tab runs
as the browser runs its script: from the element's data (the version route, the version the page
applied, the interval) it GETs the route every interval over one kept-alive HTTP connection and,
when the version differs or the room is gone, sends the rerun the component's trigger sends (a
rerun_script whose widget states hold the trigger, as captured from Chromium); the poll stops when a
full run ends without the element (the frontend unmounts it). Cookies go as a browser sends them:
a link's `route=` becomes the `atlas_route` cookie (what serving.proxy answers a page with), and any
`Set-Cookie` of that name the server sends is kept, on the websocket and the polls alike.
Widget states go with a rerun only for the widget used: the server keeps the others' last values.
Every chart that arrives is kept with its arrival time and title, which says the state it shows
("Cross-attention · layer 1 · head 7").
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect

from serving.client import ERROR_ALERT, stream_url

FULL_RUN_DONE = ForwardMsg.FINISHED_SUCCESSFULLY
POLLER = "atlas_room_poller"            # the follower's poller component (atlas_ui/page/room.py)
POLLER_EVENT = "moved"                  # the event its trigger sends
TRIGGER_ID = "$$STREAMLIT_INTERNAL_KEY_{}__events"      # the frontend's id for a component's triggers
RETRY_S = 30.0                          # the poller's RETRY_MS: the same trigger again only after this
ROUTE_COOKIE = "atlas_route"            # serving.proxy's sticky-session cookie


def chart_title(spec: str) -> str:
    """The first line of the title of a plotly_chart element's figure JSON ('' without one): what
    the chart shows, the same for the presenter and a follower (presenter mode adds a second line)."""
    title = (json.loads(spec).get("layout") or {}).get("title") if spec else None
    text = (title.get("text") or "") if isinstance(title, dict) else str(title or "")
    return text.split("<br>")[0]


@dataclass
class Move:
    """One thing the presenter does: `value` into the widget keyed `key` (a selectbox's option text),
    or a click on the button keyed `key` when value is None."""
    key: str
    value: str | None = None

    def state(self, widget_id: str) -> WidgetState:
        state = WidgetState(id=widget_id)
        if self.value is None:
            state.trigger_value = True
        else:
            state.string_value = self.value
        return state


@dataclass
class Tab:
    """One browser tab on the app at `base_url`, opened with `query` (no leading '?')."""
    base_url: str
    query: str
    started: float = 0.0                      # perf_counter at connect
    first_chart: float | None = None          # seconds after `started`
    charts: list = field(default_factory=list)      # (perf_counter, title) of every chart received
    errors: list = field(default_factory=list)
    widgets: dict = field(default_factory=dict)     # a widget's key -> its id ("$$ID-<hash>-<key>")
    full_runs: int = 0                        # full runs ended successfully
    run_started: float = 0.0                  # perf_counter of the last full run's start
    polls: int = 0                            # fragment reruns this tab asked for (the fallback poll)
    http_polls: int = 0                       # version requests its poller made
    triggers: int = 0                         # reruns its poller asked for (a version moved, the room went)
    received: int = 0                         # messages
    bytes_received: int = 0                   # their bytes, as the websocket delivered them
    last_received: float = 0.0                # perf_counter of the last one
    poller: bool = True                       # False: a page whose poller never runs (JS failed)
    cookie: str | None = None                 # the atlas_route cookie this tab sends

    def __post_init__(self):
        self._socket = self._reader = None
        self._timers: dict[str, tuple[float, asyncio.Task]] = {}
        self._run_ended = asyncio.Event()
        self._poll_task: asyncio.Task | None = None
        self._poller_data: dict = {}          # the poller element's data, as the last run sent it
        self._poller_id = ""
        self._poller_seen = False             # the poller element came in the current full run
        self._asked: tuple = (None, 0.0)      # (the last trigger's value, perf_counter)
        self._http = None                     # (reader, writer) of the kept-alive poll connection
        route = parse_qs(self.query).get("route", [""])[-1]
        if self.cookie is None and len(route) == 32 and all(c in "0123456789abcdef" for c in route):
            self.cookie = route               # a proxied room link: the page's answer sets this cookie

    def _headers(self) -> dict:
        return {"Cookie": f"{ROUTE_COOKIE}={self.cookie}"} if self.cookie else {}

    def _keep_cookie(self, values) -> None:
        for value in values:
            name, _, rest = value.partition("=")
            if name.strip() == ROUTE_COOKIE:
                self.cookie = rest.split(";")[0].strip() or self.cookie

    async def open(self, timeout: float = 120.0) -> "Tab":
        ws_url, origin = stream_url(self.base_url)
        self.started = time.perf_counter()
        self._socket = await connect(ws_url, subprotocols=["streamlit"], origin=origin, max_size=None,
                                     compression=None, open_timeout=timeout, additional_headers=self._headers())
        if self._socket.response is not None:
            self._keep_cookie(self._socket.response.headers.get_all("Set-Cookie"))
        self._reader = asyncio.create_task(self._read())
        await self.send()
        return self

    async def close(self) -> None:
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._stop_poller()
        if self._socket is not None:
            await self._socket.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def send(self, states=(), fragment_id: str = "") -> None:
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string, rerun.page_script_hash = self.query, ""
        rerun.context_info.timezone, rerun.context_info.locale = "UTC", "en-US"
        rerun.context_info.url = f"{self.base_url}/?{self.query}"
        rerun.widget_states.widgets.extend(states)
        if fragment_id:
            rerun.fragment_id, rerun.is_auto_rerun = fragment_id, True
        await self._socket.send(msg.SerializeToString())

    async def until_full_run(self, timeout: float) -> None:
        """Wait for the next full run of this tab to end successfully; a closed connection or
        `timeout` seconds raise ConnectionError / TimeoutError saying so."""
        ended = asyncio.ensure_future(self._run_ended.wait())
        done, _ = await asyncio.wait({ended, self._reader}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if ended not in done:
            ended.cancel()
            if self._reader in done:
                raise ConnectionError(f"the server closed the tab ({'; '.join(self.errors) or 'no error'})")
            raise TimeoutError(f"no full run ended within {timeout:.0f} s ({self.received} messages, the last "
                               f"{time.perf_counter() - self.last_received:.1f} s ago)")

    def chart_since(self, title: str, since: float) -> float | None:
        """perf_counter of the first chart titled `title` that arrived after `since`, or None."""
        return next((at for at, got in self.charts if got == title and at >= since), None)

    async def _read(self) -> None:
        try:
            async for raw in self._socket:
                self._note(raw)
        except Exception as exc:  # noqa: BLE001 - websockets' own errors: recorded, never raised into the room
            self.errors.append(f"connection: {type(exc).__name__}: {exc}")

    def _note(self, raw: bytes) -> None:
        now = self.last_received = time.perf_counter()
        self.received += 1
        self.bytes_received += len(raw)
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        if kind == "delta":
            self._note_delta(msg, now)
        elif kind == "new_session" and not msg.metadata.run.fragment_ids:
            self.run_started = now
            self._run_ended.clear()
            self._poller_seen = False
            for _, timer in self._timers.values():       # a full run starts: the frontend stops every timer
                timer.cancel()
            self._timers.clear()
        elif kind == "auto_rerun":
            fragment, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            if fragment and self._timers.get(fragment, (None,))[0] != interval:
                if fragment in self._timers:
                    self._timers[fragment][1].cancel()
                self._timers[fragment] = (interval, asyncio.create_task(self._poll(fragment, interval)))
        elif kind == "stop_auto_rerun":
            for fragment in msg.stop_auto_rerun.fragment_ids:
                self._timers.pop(fragment, (0, asyncio.Future()))[1].cancel()
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string     # the address bar, as the frontend keeps it
        elif kind == "script_finished":
            if msg.script_finished == FULL_RUN_DONE:
                self.full_runs += 1
                if not self._poller_seen:          # the run drew no poller: the frontend unmounts it
                    self._stop_poller()
                self._run_ended.set()
            elif msg.script_finished not in (ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
                                             ForwardMsg.FINISHED_EARLY_FOR_RERUN):
                self.errors.append(f"script finished with status {msg.script_finished}")

    def _note_delta(self, msg: ForwardMsg, now: float) -> None:
        delta = msg.delta
        if delta.WhichOneof("type") == "add_block":
            block = delta.add_block
            self._note_widget(block.id)
            return
        if delta.WhichOneof("type") != "new_element":
            return
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind == "plotly_chart":
            self.charts.append((now, chart_title(element.plotly_chart.spec)))
            if self.first_chart is None:
                self.first_chart = now - self.started
        elif kind == "bidi_component" and element.bidi_component.component_name == POLLER:
            self._note_poller(element.bidi_component)
        elif kind == "exception":
            self.errors.append(f"exception: {element.exception.type}: {element.exception.message[:200]}")
        elif kind == "alert" and element.alert.format == ERROR_ALERT:
            self.errors.append(f"error alert: {element.alert.body[:200]}")
        elif kind is not None:
            self._note_widget(getattr(getattr(element, kind), "id", ""))

    def _note_widget(self, widget_id: str) -> None:
        if widget_id.startswith("$$ID-") and widget_id.count("-") >= 2:
            self.widgets[widget_id.split("-", 2)[2]] = widget_id

    # ---- the page's poller, as its script runs in a browser ----------------------------------------
    def _note_poller(self, element) -> None:
        self._poller_seen = True
        self._poller_data = json.loads(element.json) if element.json else {}
        self._poller_id = element.id
        if self.poller and self._poll_task is None:
            self._poll_task = asyncio.create_task(self._http_poll())

    def _stop_poller(self) -> None:
        if self._poll_task is not None:
            self._poll_task.cancel()
            self._poll_task = None
        if self._http is not None:
            self._http[1].close()
            self._http = None

    async def _http_poll(self) -> None:
        """setInterval(tick, every_ms), its first tick at once; a tick still waiting is not doubled."""
        while True:
            started = time.perf_counter()
            try:
                await self._tick()
            except (OSError, asyncio.IncompleteReadError, ValueError):
                pass                              # the page's catch: the next tick asks again
            every = self._poller_data.get("every_ms", 500) / 1000
            await asyncio.sleep(max(0.0, started + every - time.perf_counter()))

    async def _tick(self) -> None:
        data = self._poller_data
        status, body = await self.http_get(data["url"])
        self.http_polls += 1
        if status in (404, 410):
            await self._ask("ended")
        elif status == 200:
            version = json.loads(body).get("version")
            if isinstance(version, int) and version != data.get("applied"):
                await self._ask(version)

    async def _ask(self, value) -> None:
        now = time.perf_counter()
        if self._asked[0] == value and now - self._asked[1] < RETRY_S:
            return
        self._asked = (value, now)
        self.triggers += 1
        await self.send([self.trigger_state(value)])

    def trigger_state(self, value) -> WidgetState:
        """The widget state Chromium sends for the poller's setTriggerValue('moved', value)."""
        state = WidgetState(id=TRIGGER_ID.format(self._poller_id))
        state.json_trigger_value = json.dumps([{"event": POLLER_EVENT, "value": value}], separators=(",", ":"))
        return state

    async def http_get(self, path: str) -> tuple[int, bytes]:
        """GET `path` on this tab's server over one kept-alive HTTP/1.1 connection, with its cookie, as
        a page's fetch does; (status, body). A connection the server closed is opened again once."""
        parts = urlsplit(self.base_url)
        if parts.scheme != "http":
            raise ValueError("the tabs' poller speaks plain http only")
        headers = {"Host": parts.netloc, "Accept": "*/*", "Cache-Control": "no-store", **self._headers()}
        request = (f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                   + "\r\n").encode("latin-1")
        for attempt in (1, 2):
            if self._http is None:
                self._http = await asyncio.open_connection(parts.hostname, parts.port or 80)
            reader, writer = self._http
            try:
                writer.write(request)
                await writer.drain()
                return await self._response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                writer.close()
                self._http = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _response(self, reader) -> tuple[int, bytes]:
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length, chunked, close, cookies = None, False, False, []
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif name == "connection":
                close = value.lower() == "close"
            elif name == "set-cookie":
                cookies.append(value)
        self._keep_cookie(cookies)
        if chunked:
            body = b""
            while (size := int((await reader.readline()).split(b";")[0], 16)):
                body += await reader.readexactly(size)
                await reader.readline()
            await reader.readline()
        elif length is not None:
            body = await reader.readexactly(length)
        else:
            body, close = await reader.read(), True
        if close:
            self._http[1].close()
            self._http = None
        return status, body

    async def _poll(self, fragment: str, interval: float) -> None:
        """The frontend's setInterval: a rerun of the fragment every interval, running or not."""
        while True:
            await asyncio.sleep(interval)
            self.polls += 1
            try:
                await self.send(fragment_id=fragment)
            except Exception:  # noqa: BLE001 - a closed socket: the reader records it
                return


class Presenter(Tab):
    """The presenter's tab: presenter mode, its room started from the Share popover."""

    async def act(self, *states: WidgetState, timeout: float = 120.0) -> tuple[float, list[str]]:
        """Send these widget states; wait for the full run they start to end. Returns (its end,
        perf_counter; the titles of the charts that run drew)."""
        self._run_ended.clear()
        await self.send(states)
        await self.until_full_run(timeout)
        return time.perf_counter(), [title for at, title in self.charts if at >= self.run_started]

    async def start_room(self, timeout: float = 120.0) -> str:
        """Open the Share popover, press Start a room, close the popover again (the presenter's
        Escape). Returns the room id (its link's room=)."""
        if not self.full_runs:
            await self.until_full_run(timeout)
        share = self.widgets["presenter_share_open"]
        await self.act(WidgetState(id=share, bool_value=True), timeout=timeout)
        await self.act(Move("room_start").state(self.widgets["room_start"]), timeout=timeout)
        await self.act(WidgetState(id=share, bool_value=False), timeout=timeout)
        fields = parse_qs(self.query)
        if "room" not in fields or "key" not in fields:
            raise RuntimeError(f"no room in the presenter's address after Start a room: {self.query!r}")
        return fields["room"][0]

    async def move(self, move: Move, timeout: float = 120.0) -> tuple[float, list[str]]:
        if move.key not in self.widgets:
            raise KeyError(f"the presenter's page has no widget keyed {move.key!r} (has {sorted(self.widgets)})")
        return await self.act(move.state(self.widgets[move.key]), timeout=timeout)


@dataclass
class MoveResult:
    """One move as the room saw it. Times are perf_counter seconds."""
    move: Move
    sent: float
    done: float                          # the presenter's run that made the move ended
    titles: list                         # the charts that run drew
    new: set                             # their titles the run before did not draw: what tells the move
    arrived: list = field(default_factory=list)      # per follower: its first chart of `new`, or None
    wrong: int = 0                       # followers whose charts after it missed one of `titles`
    bytes_each: float = 0.0              # websocket bytes a follower received from the move to the next

    @property
    def delays(self) -> list[float]:
        """Seconds from the presenter's run's end to each follower's chart (missed ones left out)."""
        return [at - self.done for at in self.arrived if at is not None]

    @property
    def from_click(self) -> list[float]:
        """Seconds from the presenter's action (its rerun request) to each follower's chart: the
        presenter's run's end is itself a message, as late as the server's flush of it."""
        return [at - self.sent for at in self.arrived if at is not None]

    @property
    def missed(self) -> int:
        return sum(at is None for at in self.arrived)


async def join(base_url: str, query: str, count: int, timeout: float = 120.0, poller: bool = True,
               cookies: list[str] | None = None) -> list[Tab]:
    """`count` tabs open `query` at once (an audience opening a link); returns them once each has
    drawn a chart, or timed out (its errors say so). They stay open. `poller`: False for pages
    whose poller never runs (they follow by the fallback fragment only). `cookies`: each tab's
    serving.proxy route cookie, in turn (None: what the proxy gives it)."""
    tabs = [Tab(base_url, query, poller=poller, cookie=cookies[n % len(cookies)] if cookies else None)
            for n in range(count)]

    async def arrive(tab: Tab) -> None:
        try:
            await tab.open(timeout)
            await tab.until_full_run(timeout)
        except (TimeoutError, OSError) as exc:                  # ConnectionError is an OSError
            tab.errors.append(f"{type(exc).__name__}: {exc}")
    await asyncio.gather(*(arrive(tab) for tab in tabs))
    return tabs


async def play(presenter: Presenter, followers: list[Tab], moves: list[Move], gap=lambda: 0.5,
               timeout: float = 60.0, results: list | None = None) -> list[MoveResult]:
    """The presenter makes each move in turn; after each, wait until every follower drew the new
    state (or `timeout`), then `gap()` seconds (a speaker talks; the followers' polls fall anywhere).
    Each move's MoveResult is appended to `results` as it ends (those before a failure stay there)."""
    results = [] if results is None else results
    before = set(title for at, title in presenter.charts if at >= presenter.run_started)
    for move in moves:
        sent, received = time.perf_counter(), sum(f.bytes_received for f in followers)
        done, titles = await presenter.move(move)
        new = set(titles) - before
        if not new:
            raise ValueError(f"{move} draws the same charts as the move before it ({titles}): a follower "
                             "could not tell them apart; choose another move")
        result = MoveResult(move, sent, done, titles, new)
        deadline = time.perf_counter() + timeout
        while True:
            result.arrived = [min((at for at, title in f.charts if at >= sent and title in new), default=None)
                              for f in followers]
            if result.missed == 0 or time.perf_counter() > deadline:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(gap())
        for follower, at in zip(followers, result.arrived):    # the whole new state, not one chart of it
            shown = {title for got, title in follower.charts if got >= sent}
            result.wrong += at is not None and not set(titles) <= shown
        result.bytes_each = (sum(f.bytes_received for f in followers) - received) / max(len(followers), 1)
        results.append(result)
        before = set(titles)
    return results
