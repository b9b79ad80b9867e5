"""Rooms behind serving.proxy (issue 52). By default the rooms live in a folder every process reads
(ATLAS_ROOM_DIR): a room's followers spread over the processes by their own cookies, and each
follows from whichever process it reached. With shared_rooms=False a room lives in one process's
memory, and its link names that process's route, so nginx sends every follower there; the
follower's own cookie then follows, and so do its page's polls of the room's version route (same
origin, same cookie)."""
from __future__ import annotations

import json
import secrets
import shutil
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlencode

import pytest

from atlas_ui.server.rooms import new_follower
from benchmarks.bench_room import LINK, MOVES
from browser_utils import REQUIRED, drive
from serving.proxy import ROUTE_COOKIE, ProxiedApp, nginx_config
from serving.room_clients import Presenter, join, play

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


def route_wins_over_the_cookie(proxy) -> None:
    """A route= argument (a room link in one-process mode) reaches its process whatever the follower's
    cookie, and sets the cookie, so the websocket follows; a malformed one is ignored."""
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


def version_through(url: str, room: str, cookie: str) -> tuple[int, str, dict]:
    """(status, upstream, body) of a version poll through the proxy with this route cookie."""
    request = urllib.request.Request(f"{url}/_atlas/room/{room}/version?me={new_follower()}",
                                     headers={"Cookie": f"{ROUTE_COOKIE}={cookie}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers["X-Atlas-Upstream"], json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers["X-Atlas-Upstream"], json.loads(error.read())


async def room_followed(url: str, presenter_route: str, link: dict, count: int, moves: int,
                        cookies: list[str] | None = None):
    """A presenter whose browser holds `presenter_route` starts a room; `count` followers open its
    link (the room id plus `link`), with `cookies` in turn if given, follow the first `moves` moves
    through their pollers, and leave."""
    presenter = await Presenter(url, urlencode(LINK), cookie=presenter_route).open()
    try:
        room = await presenter.start_room()
        followers = await join(url, urlencode({"room": room, **link}), count, cookies=cookies)
        try:
            results = await play(presenter, followers, MOVES[:moves], gap=lambda: 0.6, timeout=60)
        finally:
            for follower in followers:
                await follower.close()
        return presenter, room, followers, results
    finally:
        await presenter.close()


def route_to_each(proxy) -> dict:
    """{upstream: a route cookie nginx sends there}, for both processes."""
    health, routes = f"{proxy.url}/_stcore/health", {}
    for _ in range(40):
        route = secrets.token_hex(16)
        routes.setdefault(upstream(health, route)[0], route)
        if len(routes) == 2:
            break
    return routes


@pytest.mark.slow
@NEEDS_NGINX
def test_a_followers_version_polls_reach_the_rooms_process_through_the_proxy(tmp_path):
    # the fallback fragment never fires: the move must come through the pollers' requests
    with ProxiedApp(processes=2, log_dir=tmp_path, env={"ATLAS_ROOM_FALLBACK_S": "3600"},
                    shared_rooms=False) as proxy:
        (owner, route), (other, other_route) = route_to_each(proxy).items()
        # two followers open the room link: the room id and the owner's route
        presenter, room, followers, results = drive(room_followed(proxy.url, route, {"route": route}, 2, 1))
        assert parse_qs(presenter.query)["room"] == [room] and not presenter.errors
        assert results[0].missed == 0 and results[0].wrong == 0, results[0]
        for follower in followers:
            assert not follower.errors and follower.cookie == route
            assert follower.http_polls >= 1 and follower.triggers >= 1 and follower.polls == 0
        status, served_by, body = version_through(proxy.url, room, route)
        assert (status, served_by, body) == (200, owner, {"version": 2})
        # the other process holds no such room: the cookie is what brings a poll to the right one
        assert version_through(proxy.url, room, other_route) == (404, other, {"error": "no such room"})
        route_wins_over_the_cookie(proxy)            # what brings those followers to the owner


@pytest.mark.slow
@NEEDS_NGINX
def test_with_shared_rooms_the_followers_of_one_room_spread_over_the_processes(tmp_path):
    with ProxiedApp(processes=2, log_dir=tmp_path, env={"ATLAS_ROOM_FALLBACK_S": "3600"}) as proxy:
        (first, first_route), (second, second_route) = route_to_each(proxy).items()
        # four followers open the link (no route: rooms are shared), their cookies sending them to
        # both processes in turn, and follow two moves
        presenter, room, followers, results = drive(room_followed(
            proxy.url, first_route, {}, 4, 2, cookies=[first_route, second_route]))
        assert not presenter.errors and [(r.missed, r.wrong) for r in results] == [(0, 0), (0, 0)], results
        assert sorted(f.cookie for f in followers) == sorted([first_route, second_route] * 2)
        for follower in followers:
            assert not follower.errors and follower.http_polls >= 1 and follower.triggers >= 2 and follower.polls == 0
        # both processes answer the room's version: the one that holds the presenter and the other
        assert version_through(proxy.url, room, first_route)[:3] == (200, first, {"version": 3})
        assert version_through(proxy.url, room, second_route)[:3] == (200, second, {"version": 3})
        assert sorted(p.name for p in (proxy.prefix / "rooms").glob("*.json")) == [f"{room}.json"]
