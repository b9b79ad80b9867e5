"""Rooms behind serving.proxy (issue 52): a room lives in one process's memory, and its link names
that process's route, so nginx sends every follower there; the follower's own cookie then follows."""
from __future__ import annotations

import secrets
import shutil
import urllib.request

import pytest

from browser_utils import REQUIRED
from serving.proxy import ROUTE_COOKIE, ProxiedApp, nginx_config

NEEDS_NGINX = pytest.mark.skipif(shutil.which("nginx") is None and not REQUIRED,
                                 reason="nginx is not installed (apt-get install -y nginx-light)")


def test_the_app_and_the_proxy_name_the_same_cookie():
    from atlas_ui.page.room import ROUTE_COOKIE as APP_COOKIE, ROUTE_PATTERN
    assert APP_COOKIE == ROUTE_COOKIE
    assert ROUTE_PATTERN.match(secrets.token_hex(16)) and not ROUTE_PATTERN.match("route-1")
    conf = nginx_config("/tmp/unused", [8601, 8602], 8501)
    assert '"~^[0-9a-f]{32}$" $arg_route;' in conf and "hash $route consistent;" in conf


def upstream(url: str, cookie: str | None) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Cookie": f"{ROUTE_COOKIE}={cookie}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        routes = [c for c in response.headers.get_all("Set-Cookie") or [] if c.startswith(f"{ROUTE_COOKIE}=")]
        return response.headers["X-Atlas-Upstream"], routes[0].split(";")[0].split("=", 1)[1]


@pytest.mark.slow
@NEEDS_NGINX
def test_a_room_links_route_reaches_the_owners_process_whatever_the_followers_cookie(tmp_path):
    with ProxiedApp(processes=2, log_dir=tmp_path) as proxy:
        health = f"{proxy.url}/_stcore/health"
        owners = {}
        for _ in range(40):                                  # presenters' routes on both processes
            route = secrets.token_hex(16)
            owners[route] = upstream(health, route)[0]
            if len(set(owners.values())) == 2 and len(owners) >= 6:
                break
        assert len(set(owners.values())) == 2
        for route, owner in owners.items():
            for cookie in (None, secrets.token_hex(16), "route-7"):
                got, set_cookie = upstream(f"{health}?room=x&route={route}", cookie)
                assert got == owner and set_cookie == route      # the websocket then goes there too
        # a malformed route is ignored: the follower's own cookie decides, as without a room
        mine = secrets.token_hex(16)
        assert upstream(f"{health}?route=..%2Fx", mine) == (owners.get(mine) or upstream(health, mine)[0], mine)
