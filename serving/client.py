"""A Streamlit session over the websocket protocol, the way a browser opens a share link.

The browser connects to /_stcore/stream, sends one `rerun_script` BackMsg with the link's query,
and draws what the ForwardMsgs carry. A `Session` does the same without drawing: it notes when
the first chart arrived and when the script run finished, so many sessions can be timed at once
from one asyncio loop (benchmarks/bench_serving.py, tests/test_serving.py).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}
ERROR_ALERT = 1            # Alert.Format.ERROR: what st.error draws (the app's "Something went wrong")


@dataclass
class RunRecord:
    """What one session saw. Times are seconds since the session started connecting."""
    query: str
    first_chart: float | None = None      # the first plotly_chart element arrived
    finished: float | None = None         # script_finished for the run we asked for
    charts: int = 0
    errors: list = field(default_factory=list)   # exception elements, st.error alerts, protocol trouble
    bytes_received: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors and self.finished is not None and self.first_chart is not None


def stream_url(base_url: str) -> tuple[str, str]:
    """(websocket URL, Origin) for an http(s) base URL such as http://127.0.0.1:8501."""
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = parts.path.rstrip("/")
    return f"{scheme}://{parts.netloc}{path}/_stcore/stream", f"{parts.scheme}://{parts.netloc}"


def rerun_message(query: str, url: str = "") -> bytes:
    """The BackMsg a browser sends first: run the main page with this query string."""
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_script_hash = ""
    msg.rerun_script.context_info.timezone = "UTC"
    msg.rerun_script.context_info.locale = "en-US"
    msg.rerun_script.context_info.url = url
    return msg.SerializeToString()


def note_message(record: RunRecord, raw: bytes, started: float) -> bool:
    """Record one ForwardMsg; True when the run we asked for has ended."""
    record.bytes_received += len(raw)
    msg = ForwardMsg()
    msg.ParseFromString(raw)
    kind = msg.WhichOneof("type")
    now = time.perf_counter() - started
    if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
        element = msg.delta.new_element
        element_type = element.WhichOneof("type")
        if element_type == "plotly_chart":
            record.charts += 1
            if record.first_chart is None:
                record.first_chart = now
        elif element_type == "exception":
            record.errors.append(f"exception: {element.exception.type}: {element.exception.message[:200]}")
        elif element_type == "alert" and element.alert.format == ERROR_ALERT:
            record.errors.append(f"error alert: {element.alert.body[:200]}")
    elif kind == "script_finished":
        if msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
            return False                  # another run follows (a rerun the app asked for)
        if msg.script_finished not in FINISHED:
            record.errors.append(f"script finished with status {msg.script_finished}")
        record.finished = now
        return True
    elif kind == "page_not_found":
        record.errors.append("page not found")
    return False


async def open_link(base_url: str, query: str, timeout: float = 120.0,
                    leave_after: float | None = None) -> RunRecord:
    """Open the app with `query` (no leading '?') and wait for its first script run to end.

    `leave_after`: disconnect that many seconds after connecting, mid-run (a closed tab)."""
    ws_url, origin = stream_url(base_url)
    record = RunRecord(query)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async with connect(ws_url, subprotocols=["streamlit"], origin=origin, max_size=None,
                               compression=None, open_timeout=timeout) as websocket:
                await websocket.send(rerun_message(query, f"{base_url}/?{query}"))
                if leave_after is not None:
                    await asyncio.sleep(leave_after)
                    return record
                async for raw in websocket:
                    if note_message(record, raw, started):
                        break
    except TimeoutError:
        record.errors.append(f"timed out after {timeout:.0f} s")
    except (OSError, ConnectionError) as exc:
        record.errors.append(f"connection: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - websockets' own errors: report, don't crash the crowd
        record.errors.append(f"{type(exc).__name__}: {exc}")
    return record


async def crowd(base_url: str, queries: list[str], timeout: float = 120.0) -> list[RunRecord]:
    """Every query opened by its own session, all at once (an audience opening a link)."""
    return list(await asyncio.gather(*(open_link(base_url, query, timeout) for query in queries)))


async def rerun_flood(base_url: str, query: str, reruns: int, timeout: float = 120.0) -> RunRecord:
    """One session that sends `reruns` rerun requests back to back (rapid clicks), then checks that
    the session still answers.

    Streamlit coalesces reruns that arrive while a run is going, so the flood is over when the
    session says its script stopped running after at least one finished run. A heartbeat can't mark
    that point: its ack is dropped when a new run clears the session's outgoing queue. The session
    then gets one more rerun; `finished` is set when a run that started after it ends, so a stuck
    session times out here instead of looking fine."""
    ws_url, origin = stream_url(base_url)
    record = RunRecord(query)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async with connect(ws_url, subprotocols=["streamlit"], origin=origin, max_size=None,
                               compression=None) as websocket:
                for _ in range(reruns):
                    await websocket.send(rerun_message(query))
                await until_runs_end(websocket, record, started)
                record.finished = None
                await websocket.send(rerun_message(query))
                await until_runs_end(websocket, record, started)
    except TimeoutError:
        record.errors.append(f"timed out after {timeout:.0f} s")
    except Exception as exc:  # noqa: BLE001
        record.errors.append(f"{type(exc).__name__}: {exc}")
    return record


async def until_runs_end(websocket, record: RunRecord, started: float) -> None:
    """Read until a run has finished and the session then says no script is running."""
    finished_one = False
    async for raw in websocket:
        finished_one |= note_message(record, raw, started)
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        if msg.WhichOneof("type") == "session_status_changed" and finished_one \
                and not msg.session_status_changed.script_is_running:
            return
    raise ConnectionError("the server closed the session")


async def bad_input_crowd(url: str, query: str, normal: int, long_sessions: int, leavers: int, flood: int) -> dict:
    """Bad input under load, all at once: `normal` sessions open `query`; `long_sessions` open it
    with a 1,000-character sentence; `leavers` disconnect mid-run; one session sends `flood`
    reruns back to back. Returns the records grouped by those names."""
    long_text = ("A man in a red jacket rides his bicycle down a narrow street near the old market. " * 13)[:1000]
    tasks = {
        "normal": [open_link(url, query) for _ in range(normal)],
        "long": [open_link(url, with_params(query, sentence=long_text)) for _ in range(long_sessions)],
        "leavers": [open_link(url, with_params(query, view="Overview"), leave_after=0.05 * (i % 10))
                    for i in range(leavers)],
        "flood": [rerun_flood(url, query, flood)],
    }
    flat = [(name, task) for name, group in tasks.items() for task in group]
    results = await asyncio.gather(*(task for _, task in flat))
    grouped: dict = {}
    for (name, _), record in zip(flat, results):
        grouped.setdefault(name, []).append(record)
    return grouped


def with_params(query: str, **params) -> str:
    """`query` with some parameters replaced."""
    fields = dict(parse_qsl(query))
    fields.update(params)
    return urlencode(fields)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 100)))
    return ordered[min(rank, len(ordered)) - 1]
