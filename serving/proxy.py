"""More than one app process behind nginx, with sticky sessions and websockets proxied.

Streamlit is one process bound by the GIL; N processes behind a reverse proxy serve N times the
script runs. A session must stay on one process: its websocket does (one connection), and the page
and its later requests follow a cookie. Open-source nginx has no `sticky` directive, so the
upstream is chosen by `hash $route consistent`, where $route is the `atlas_route` cookie, or a new
random request id that the response then sets as that cookie. Rooms (issue 52) live in a folder
every process reads (ATLAS_ROOM_DIR, set here), so a room's followers spread over the processes by
their own cookies. With `shared_rooms=False` a room lives in its presenter's process: its link
(`?room=...&route=R`) names that process's route, which then wins over the cookie.

    python -m serving.proxy --processes 2 --port 8501      # app processes on 8601, 8602, ...

`ProxiedApp` does the same from Python (benchmarks/bench_serving.py --via-proxy, tests).
"""
from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from atlas_ui.server.room_store import ROOM_DIR_ENV

from .servers import AppServer, PortTaken, free_port, wait_healthy

ROUTE_COOKIE = "atlas_route"

NGINX_CONF = """\
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;

    # Sticky sessions: the route cookie, or a fresh random id that becomes the cookie.
    map $cookie_{cookie} $cookie_route {{
        ""      $request_id;
        default $cookie_{cookie};
    }}
    # A room's link names the route of the process that owns the room (atlas_ui/page/room.py): a
    # follower's page goes there, and its websocket follows by the cookie that response sets.
    map $arg_route $route {{
        "~^[0-9a-f]{{32}}$" $arg_route;
        default            $cookie_route;
    }}
    # Websocket upgrade: pass the client's Upgrade header on, and close otherwise.
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ""      close;
    }}
    upstream atlas {{
        hash $route consistent;
{servers}
    }}
    server {{
        listen {host}:{port};
        location / {{
            proxy_pass http://atlas;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_read_timeout 86400s;       # a websocket stays open as long as the tab does
            proxy_buffering off;
            add_header Set-Cookie "{cookie}=$route; Path=/; HttpOnly; SameSite=Lax" always;
            add_header X-Atlas-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def nginx_config(prefix: Path, upstream_ports: list[int], port: int, host: str = "127.0.0.1") -> str:
    """nginx.conf for `upstream_ports` on localhost, listening on host:port, files under prefix."""
    if not upstream_ports:
        raise ValueError("at least one app process is needed behind the proxy")
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstream_ports)
    return NGINX_CONF.format(prefix=prefix, servers=servers, host=host, port=port, cookie=ROUTE_COOKIE)


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None:
        raise FileNotFoundError("nginx is not installed (Debian: apt-get install -y nginx-light)")
    return found


class ProxiedApp:
    """`processes` app servers and nginx in front of them, as a context manager (`.url`, `.pids()`)."""

    def __init__(self, processes: int = 2, port: int | None = None, app: str = "app.py",
                 extra_args: tuple = (), env: dict | None = None, log_dir: Path | None = None,
                 shared_rooms: bool = True):
        self.processes, self.port, self.app = processes, port or free_port(), app
        self.fixed_port = port is not None
        self.prefix = Path(tempfile.mkdtemp(prefix="atlas-nginx-"))
        # rooms in a folder every process reads: a room's followers spread over the processes
        # (atlas_ui/server/room_store.py); without it, a room lives in its presenter's process
        # and its link's route brings every follower there
        rooms = {ROOM_DIR_ENV: str(self.prefix / "rooms")} if shared_rooms else {}
        self.extra_args, self.env = extra_args, {**rooms, **(env or {})}
        self.log_dir = log_dir or self.prefix
        self.servers: list[AppServer] = []
        self.nginx: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ProxiedApp":
        try:
            for _ in range(self.processes):
                server = AppServer(self.app, extra_args=self.extra_args, env=self.env, log_dir=self.log_dir)
                server.start()
                self.servers.append(server)
            for server in self.servers:
                server.wait()
            for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
                (self.prefix / sub).mkdir(exist_ok=True)
            for attempt in range(AppServer.PORT_TRIES):
                try:
                    self._start_nginx()
                    break
                except PortTaken:      # another process took the port meanwhile: a new one, unless given
                    if self.fixed_port or attempt == AppServer.PORT_TRIES - 1:
                        raise
                    self.port = free_port()
                    self.url = f"http://127.0.0.1:{self.port}"
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_nginx(self) -> None:
        """nginx in front of the app servers; healthy only once nginx itself listens on the port."""
        conf = self.prefix / "nginx.conf"
        conf.write_text(nginx_config(self.prefix, [s.port for s in self.servers], self.port))
        self.nginx = subprocess.Popen([nginx_binary(), "-p", str(self.prefix), "-c", str(conf),
                                       "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                                      stderr=open(self.prefix / "nginx.stderr", "wb"), start_new_session=True)
        wait_healthy(self.url, self.nginx, timeout=30, port=self.port)

    def pids(self) -> list[int]:
        return [s.process.pid for s in self.servers if s.process is not None]

    def __exit__(self, *exc) -> None:
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.terminate()
            try:
                self.nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
        for server in self.servers:
            server.stop()
        shutil.rmtree(self.prefix, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run N app processes behind nginx with sticky sessions.")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--port", type=int, default=8501, help="the proxy's port")
    parser.add_argument("--app", default="app.py")
    args = parser.parse_args(argv)
    with ProxiedApp(args.processes, args.port, args.app) as proxy:
        print(f"Attention Atlas on {proxy.url} ({args.processes} processes behind nginx); Ctrl+C stops.", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass

if __name__ == "__main__":
    main()
