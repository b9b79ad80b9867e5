"""Serving many people: sessions over Streamlit's websocket protocol (serving/client.py), bad input
under load, and two app processes behind nginx with sticky sessions (serving/proxy.py).

The timings live in benchmarks/bench_serving.py; these tests check behaviour only."""
from __future__ import annotations

import os
import shutil
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest
import streamlit

from atlas_ui.server.asgi import chart_chunk, early_import_script
from browser_utils import REQUIRED, drive
from serving.client import bad_input_crowd, crowd, open_link
from serving.proxy import ROUTE_COOKIE, ProxiedApp, nginx_config

LINK = {"model": "en-de", "sentence": "Two dogs play in the snow.", "view": "Heatmap"}
NEEDS_NGINX = pytest.mark.skipif(shutil.which("nginx") is None and not REQUIRED,
                                 reason="nginx is not installed (apt-get install -y nginx-light)")


def server_log(server) -> str:
    """The server's log. conftest's app_server is the browser tests' server too, so its log holds
    every test's runs, and none may leave a traceback there."""
    return server.log_path.read_text(errors="replace")


def test_a_session_gets_the_links_chart_over_the_websocket(app_server):
    record = drive(open_link(app_server.url, urlencode(LINK)))
    assert record.ok, record.errors
    assert record.first_chart <= record.finished
    assert record.charts == 1                      # the Heatmap view draws one chart


def test_the_served_page_imports_the_chart_library_at_once(app_server):
    """`streamlit run app.py` serves app.py's st.App: its pages carry atlas_ui/server/asgi.py's import,
    after Streamlit's index script; the script files themselves are served as they are."""
    script = early_import_script(chart_chunk())
    for path in ("/", "/?" + urlencode(LINK)):
        with urllib.request.urlopen(app_server.url + path, timeout=30) as response:
            html = response.read()
            assert int(response.headers["Content-Length"]) == len(html)
        assert html.count(script) == 1
        assert html.index(b'src="./static/js/index.') < html.index(script)
    with urllib.request.urlopen(f"{app_server.url}/static/js/{chart_chunk()}", timeout=30) as response:
        assert response.read() == (Path(streamlit.__file__).parent / "static" / "static" / "js"
                                   / chart_chunk()).read_bytes()


def test_bad_input_under_load_leaves_everyone_else_their_chart(app_server):
    grouped = drive(bad_input_crowd(app_server.url, urlencode(LINK), normal=10, long_sessions=10, leavers=10, flood=20))
    assert all(r.ok for r in grouped["normal"]), [r.errors for r in grouped["normal"]]
    assert all(r.ok for r in grouped["long"]), [r.errors for r in grouped["long"]]   # 1,000 characters
    flood = grouped["flood"][0]
    assert not flood.errors and flood.finished is not None, flood.errors
    after = drive(crowd(app_server.url, [urlencode(LINK)] * 5))
    assert all(r.ok for r in after), [r.errors for r in after]
    log = server_log(app_server)
    assert "Traceback" not in log and "Unexpected" not in log, log[-3000:]


def test_nginx_config_names_every_process_and_proxies_websockets(tmp_path):
    conf = nginx_config(tmp_path, [8601, 8602], 8501)
    assert "server 127.0.0.1:8601;" in conf and "server 127.0.0.1:8602;" in conf
    assert "hash $route consistent;" in conf and f"$cookie_{ROUTE_COOKIE}" in conf
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert "listen 127.0.0.1:8501;" in conf
    with pytest.raises(ValueError, match="at least one"):
        nginx_config(tmp_path, [], 8501)


def upstream_of(url: str, cookie: str | None) -> tuple[str, str | None]:
    request = urllib.request.Request(f"{url}/_stcore/health",
                                     headers={"Cookie": f"{ROUTE_COOKIE}={cookie}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.read().decode().strip() == "ok"
        # Streamlit sets its own xsrf cookie too: pick the route cookie nginx adds
        routes = [c for c in response.headers.get_all("Set-Cookie") or [] if c.startswith(f"{ROUTE_COOKIE}=")]
        return response.headers["X-Atlas-Upstream"], routes[0] if routes else None


@NEEDS_NGINX
def test_two_processes_behind_nginx_keep_each_session_on_one(tmp_path):
    with ProxiedApp(processes=2, log_dir=tmp_path) as proxy:
        # a first request gets a route cookie; with it, every request goes to the same process
        first, set_cookie = upstream_of(proxy.url, None)
        assert set_cookie and set_cookie.startswith(f"{ROUTE_COOKIE}=")
        route = set_cookie.split(";")[0].split("=", 1)[1]
        assert {upstream_of(proxy.url, route)[0] for _ in range(10)} == {first}
        # different routes spread over both processes (consistent hashing over the cookie)
        seen = set()
        for index in range(200):
            seen.add(upstream_of(proxy.url, f"route-{index}")[0])
            if len(seen) == 2:
                break
        assert seen == {f"127.0.0.1:{server.port}" for server in proxy.servers}
        # the websocket goes through too: a session gets its chart via the proxy
        records = drive(crowd(proxy.url, [urlencode(LINK)] * 4))
        assert all(r.ok for r in records), [r.errors for r in records]


def test_the_bench_opens_every_views_share_link():
    """bench_serving --views all: one link per view of the registry, with what its chart needs."""
    import importlib.util
    from urllib.parse import parse_qs

    from atlas_ui.views import VIEWS
    spec = importlib.util.spec_from_file_location("bench_serving", Path(__file__).parents[1] / "benchmarks" / "bench_serving.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    links = dict(bench.view_links(["all"], norm=True))
    assert [parse_qs(links[name])["view"] for name in VIEWS] == [[name] for name in VIEWS]
    assert parse_qs(links["Beam"])["beam"] == ["4"] and parse_qs(links["Ablation"])["ablate"] == ["cross:2:3"]
    normed = {label for label in links if label.endswith(" norm=1")}
    assert normed == {f"{name} norm=1" for name, view in VIEWS.items() if view.norm_switch} and normed
    assert all(parse_qs(links[label])["norm"] == ["1"] for label in normed)
    with pytest.raises(SystemExit, match="unknown view"):
        bench.view_links(["Heatmap", "Nope"], norm=False)


def test_a_server_whose_port_another_process_took_starts_on_a_new_one(tmp_path, monkeypatch):
    """free_port() only finds a port free: another worker's server may take it before ours listens,
    and answer our health checks in its place. The impostor here answers "ok" on the first port; our
    server must not count that as its own, and starts again on a new port."""
    import http.server
    import threading

    from serving import servers

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self):                                   # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    taken = impostor.server_address[1]
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    ports = iter([taken])
    real_free_port = servers.free_port
    monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or real_free_port())
    try:
        assert servers.listening(os.getpid(), taken) and not servers.listening(os.getpid(), real_free_port())
        with servers.AppServer("serving/hello_app.py", log_dir=tmp_path) as server:
            assert server.port != taken and servers.listening(server.process.pid, server.port)
            with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=30) as response:
                assert response.read() == b"ok"
        assert "is not available" in (tmp_path / f"server-hello_app-{taken}.log").read_text(errors="replace")
        with pytest.raises(servers.PortTaken):               # a port given is kept: no new one
            with servers.AppServer("serving/hello_app.py", log_dir=tmp_path, port=taken):
                pass
    finally:
        impostor.shutdown()
