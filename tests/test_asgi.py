"""atlas_ui/server/asgi.py: the page's HTML imports the chart library at once; nothing else changes.

The middleware is driven here as ASGI (a fake app and a recording `send`); the served page and
the browser side (one download, started before the websocket) are in tests/test_serving.py and
tests/test_browser.py."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit

from atlas_ui.server import asgi
from atlas_ui.server.asgi import MAX_HTML_BYTES, EarlyChartLibrary, chart_chunk, early_import_script, with_early_import
from browser_utils import drive

ROOT = Path(__file__).resolve().parent.parent
CHUNK = "PlotlyChart.Ab_1-x.js"
PAGE = (b'<html><head><script type="module" crossorigin src="./static/js/index.Q1.js"></script>'
        b'<link rel="modulepreload" href="./static/js/x.js"></head><body></body></html>')


def respond(body_parts: list[bytes], content_type: bytes = b"text/html", encoding: bytes | None = None):
    """A fake inner app answering with these body parts (more_body on all but the last)."""
    async def inner(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(sum(map(len, body_parts))).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for index, part in enumerate(body_parts):
            await send({"type": "http.response.body", "body": part, "more_body": index < len(body_parts) - 1})
    return inner


def call(middleware, scope: dict) -> list[dict]:
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    drive(middleware(scope, receive, send))
    return sent


def body_of(sent: list[dict]) -> bytes:
    return b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")


def content_length(sent: list[dict]) -> int:
    return int(dict(sent[0]["headers"])[b"content-length"])


GET = {"type": "http", "method": "GET", "path": "/"}


def test_the_page_gets_the_import_right_after_streamlits_index_script():
    sent = call(EarlyChartLibrary(respond([PAGE[:30], PAGE[30:70], PAGE[70:]]), chunk=CHUNK), GET)
    body = body_of(sent)
    script = early_import_script(CHUNK)
    assert body == with_early_import(PAGE, script)
    assert body.index(b"index.Q1.js") < body.index(script) < body.index(b"modulepreload")
    assert body.count(script) == 1
    assert content_length(sent) == len(body) == len(PAGE) + len(script)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]


@pytest.mark.parametrize("scope, responder", [
    ({**GET, "method": "HEAD"}, respond([PAGE])),
    (GET, respond([b"console.log(1)"], b"text/javascript")),
    (GET, respond([PAGE], encoding=b"gzip")),                      # a compressed page is left alone
    (GET, respond([b"<html><body>component</body></html>"])),     # HTML without Streamlit's index script
])
def test_everything_else_passes_through_unchanged(scope, responder):
    sent = call(EarlyChartLibrary(responder, chunk=CHUNK), scope)
    plain = call(responder, scope)
    assert sent == plain


def test_a_websocket_scope_goes_straight_to_the_app():
    seen = []

    async def inner(scope, receive, send):
        seen.append((scope["type"], send))

    async def send(message):
        pass

    drive(EarlyChartLibrary(inner, chunk=CHUNK)({"type": "websocket", "path": "/_stcore/stream"}, None, send))
    assert seen == [("websocket", send)]


def test_an_oversized_page_is_streamed_on_as_it_came():
    parts = [PAGE] + [b"x" * 65536] * (MAX_HTML_BYTES // 65536 + 2)
    sent = call(EarlyChartLibrary(respond(parts), chunk=CHUNK), GET)
    assert body_of(sent) == b"".join(parts)
    assert content_length(sent) == sum(map(len, parts))


def test_the_installed_streamlit_has_one_plotly_chunk_and_the_script_names_it():
    static = Path(streamlit.__file__).parent / "static"
    chunk = chart_chunk()
    assert chunk is not None and (static / "static" / "js" / chunk).is_file()
    index = (static / "index.html").read_bytes()
    assert early_import_script(chunk) in with_early_import(index, early_import_script(chunk))
    # Streamlit's index script imports the chunk by this relative name, which the script resolves against
    scripts = re.findall(rb'src="\./static/js/(index\.[\w-]+\.js)"', index)
    assert len(scripts) == 1
    assert chunk.encode() in (static / "static" / "js" / scripts[0].decode()).read_bytes()


def test_no_chunk_no_script(tmp_path, monkeypatch):
    assert chart_chunk(str(tmp_path)) is None
    (tmp_path / "static" / "js").mkdir(parents=True)
    for name in ("PlotlyChart.a.js", "PlotlyChart.b.js"):          # two: which one is ambiguous
        (tmp_path / "static" / "js" / name).write_text("")
    assert chart_chunk(str(tmp_path)) is None
    with pytest.raises(ValueError):
        early_import_script('PlotlyChart.x.js"</script><script>alert(1)//')
    monkeypatch.setattr(asgi, "chart_chunk", lambda: None)          # a Streamlit with another layout
    page = respond([PAGE])
    assert call(EarlyChartLibrary(page), GET) == call(page, GET)


# app.py imported in the server's role (no script run context), in a fresh interpreter since an st.App
# pins process-wide config, after a socket was bound by Streamlit's own code; then one connection
# accepted from that socket, as uvicorn would (server_process.send_without_delay, Linux: /proc/self/fd).
SERVER_ROLE = """
import runpy, socket, sys
sys.path.insert(0, {root!r})
from streamlit.web.server.starlette.starlette_server import _bind_socket
listener = _bind_socket("127.0.0.1", 0, 8)
listener.setblocking(True)
app = runpy.run_path("app.py")["app"]
print(type(app).__name__, [m.cls.__name__ for m in app._user_middleware], [r.path for r in app._user_routes],
      all(name in sys.modules for name in ("atlas_ui.page.main", "transformer.hf.load", "transformer.explain.faithfulness",
                                           "transformers.models.t5.modeling_t5", "transformers.models.marian.tokenization_marian")))
with socket.create_connection(listener.getsockname()[:2]):
    connection, _ = listener.accept()
    print(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
"""


def test_app_py_is_the_servers_application_when_imported_and_the_page_in_a_script_run():
    """Imported outside a script run (as `streamlit run` and uvicorn do), app.py is an st.App with
    the middleware and the rooms' version route, has imported the page's modules, and has turned
    Nagle off on Streamlit's listening socket (tests/test_server_process.py tests how). One
    interpreter checks both: each import of the app costs seconds."""
    out = subprocess.run([sys.executable, "-c", SERVER_ROLE.format(root=str(ROOT))], cwd=ROOT, capture_output=True,
                         text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    app, nodelay = out.stdout.strip().splitlines()[-2:]
    # the page's modules are imported here, in the server's thread, never by concurrent first runs
    assert app == "App ['EarlyChartLibrary'] ['/_atlas/room/{room_id}/version'] True"
    if sys.platform.startswith("linux"):          # the listening sockets are found through /proc/self/fd
        assert nodelay == "1"
