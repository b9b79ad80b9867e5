"""A room over Streamlit's websocket protocol (issue 52): a presenter that drives and followers that
poll, each one tab as a browser runs it, without a browser (benchmarks/bench_room.py, tests).

A tab sends what Streamlit's frontend sends: one rerun of its link, then a widget's new value when
it is used, and for each `st.fragment(run_every=...)` the server announces (ForwardMsg.auto_rerun) a
rerun of that fragment every interval, the timers cancelled when a full run starts (the frontend's
handleAutoRerun / cleanupAutoReruns). A follower's poll is such a fragment (atlas_ui/page/room.py).
Widget states go with a rerun only for the widget used: the server keeps the others' last values.
Every chart that arrives is kept with its arrival time and title, which says the state it shows
("Cross-attention · layer 1 · head 7").
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect

from serving.client import ERROR_ALERT, stream_url

FULL_RUN_DONE = ForwardMsg.FINISHED_SUCCESSFULLY


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
    polls: int = 0                            # fragment reruns this tab asked for
    received: int = 0                         # messages
    last_received: float = 0.0                # perf_counter of the last one

    def __post_init__(self):
        self._socket = self._reader = None
        self._timers: dict[str, tuple[float, asyncio.Task]] = {}
        self._run_ended = asyncio.Event()

    async def open(self, timeout: float = 120.0) -> "Tab":
        ws_url, origin = stream_url(self.base_url)
        self.started = time.perf_counter()
        self._socket = await connect(ws_url, subprotocols=["streamlit"], origin=origin, max_size=None,
                                     compression=None, open_timeout=timeout)
        self._reader = asyncio.create_task(self._read())
        await self.send()
        return self

    async def close(self) -> None:
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
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
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        if kind == "delta":
            self._note_delta(msg, now)
        elif kind == "new_session" and not msg.metadata.run.fragment_ids:
            self.run_started = now
            self._run_ended.clear()
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
        elif kind == "exception":
            self.errors.append(f"exception: {element.exception.type}: {element.exception.message[:200]}")
        elif kind == "alert" and element.alert.format == ERROR_ALERT:
            self.errors.append(f"error alert: {element.alert.body[:200]}")
        elif kind is not None:
            self._note_widget(getattr(getattr(element, kind), "id", ""))

    def _note_widget(self, widget_id: str) -> None:
        if widget_id.startswith("$$ID-") and widget_id.count("-") >= 2:
            self.widgets[widget_id.split("-", 2)[2]] = widget_id

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


async def join(base_url: str, query: str, count: int, timeout: float = 120.0) -> list[Tab]:
    """`count` tabs open `query` at once (an audience opening a link); returns them once each has
    drawn a chart, or timed out (its errors say so). They stay open."""
    tabs = [Tab(base_url, query) for _ in range(count)]

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
        sent = time.perf_counter()
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
        results.append(result)
        before = set(titles)
    return results
