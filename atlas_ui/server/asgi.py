"""The app as an ASGI application: Streamlit's own server, with the page's HTML asking for the
chart library from its first bytes.

Every view of ours opens with a plotly chart, and plotly.js (Streamlit's PlotlyChart chunk,
4.6 MB) is what a fresh tab waits for: Streamlit imports it only once a chart element arrives,
after the page has booted, opened its websocket and the script has run, so its download and its
~0.6 s evaluation came last. The page's HTML now imports that chunk itself, while the page
boots and waits for the websocket (benchmarks/bench_first_paint.py: app / hello world 1.30x ->
1.08x). The URL is resolved against Streamlit's own index script, so it is the very module
Streamlit imports later: fetched and evaluated once.

`st.App` is Streamlit's public ASGI entry; `streamlit run app.py` finds it (see app.py).
"""
from __future__ import annotations

import glob
import importlib
import logging
import os
import re

LOG = logging.getLogger("atlas_ui")
INDEX_SCRIPT = b'src="./static/js/index.'     # the tag of Streamlit's index script in its index.html
CHUNK_NAME = re.compile(r"^PlotlyChart\.[A-Za-z0-9_-]+\.js$")
MAX_HTML_BYTES = 1 << 20                        # Streamlit's index.html is ~10 KB; larger pages pass untouched


def chart_chunk(static_dir: str | None = None) -> str | None:
    """The file name of the installed Streamlit's plotly chunk (its hash changes with each
    release), or None when there is not exactly one."""
    if static_dir is None:
        import streamlit
        static_dir = os.path.join(os.path.dirname(streamlit.__file__), "static")
    names = [os.path.basename(path) for path in glob.glob(os.path.join(static_dir, "static", "js", "PlotlyChart.*.js"))]
    names = [name for name in names if CHUNK_NAME.match(name)]
    return names[0] if len(names) == 1 else None


def early_import_script(chunk: str) -> bytes:
    """A classic inline script (it runs while the HTML is parsed, before Streamlit's deferred
    module script) that imports the chunk by the URL Streamlit's own lazy import resolves to."""
    if not CHUNK_NAME.match(chunk):
        raise ValueError(f"not a plotly chunk name: {chunk!r}")
    return ("<script>import(new URL(\"./" + chunk + "\", document.querySelector("
            "'script[type=module][src*=\"/static/js/index.\"]').src).href).catch(function () {});</script>").encode()


def with_early_import(html: bytes, script: bytes) -> bytes:
    """The page with `script` right after Streamlit's index script tag; unchanged without one."""
    start = html.find(INDEX_SCRIPT)
    end = html.find(b"</script>", start) if start >= 0 else -1
    if end < 0:
        return html
    end += len(b"</script>")
    return html[:end] + script + html[end:]


class EarlyChartLibrary:
    """ASGI middleware: uncompressed HTML answers to GET get `early_import_script`; everything
    else (websocket, static files, health, HEAD, compressed or oversized bodies) passes through."""

    def __init__(self, app, chunk: str | None = None):
        self.app = app
        chunk = chunk or chart_chunk()
        if chunk is None:
            LOG.warning("no single PlotlyChart chunk in this Streamlit: pages load plotly.js the usual way")
        self.script = early_import_script(chunk) if chunk else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or self.script is None:
            return await self.app(scope, receive, send)
        held: dict = {}                     # the response start and the body so far, for an HTML page

        async def send_page(message):
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    held.update(start=message, body=b"")
                    return None
                return await send(message)
            if message["type"] != "http.response.body" or "start" not in held:
                return await send(message)
            held["body"] += message.get("body", b"")
            if message.get("more_body") and len(held["body"]) <= MAX_HTML_BYTES:
                return None
            start, body = held.pop("start"), held.pop("body")
            if not message.get("more_body"):
                body = with_early_import(body, self.script)
                headers = [(name, value) for name, value in start.get("headers", []) if name != b"content-length"]
                start = {**start, "headers": headers + [(b"content-length", str(len(body)).encode())]}
            await send(start)                # an oversized page goes on as it came, streamed
            return await send({**message, "body": body})

        return await self.app(scope, receive, send_page)


def import_page_modules() -> None:
    """Import the page's modules once, in the server's thread, before any session runs: the first
    sessions' script runs, on threads of their own, then never import them at the same time (a
    package and one of its submodules imported by two threads at once can deadlock in importlib;
    a crowd on a cold server did). The first visitor no longer waits for the imports either.
    `transformers` too, whose lazy names are not thread-safe (transformer/hf/runtime.py)."""
    importlib.import_module("atlas_ui.page.main")
    importlib.import_module("transformer.hf.runtime").runtime()
    importlib.import_module("transformer.hf.engine")           # what Translator.load opens HF models with


def page_middleware() -> list:
    """The middleware list for st.App."""
    from starlette.middleware import Middleware
    return [Middleware(EarlyChartLibrary)]
