"""The room's version route (atlas_ui/server/room_http.py), driven as ASGI: what a follower's page polls
instead of a script run. It reads the process's one store (the pages' too), answers a number or a
fixed text, is never cached, and echoes nothing of the request."""
from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

import pytest

from atlas_ui.page.room import rooms
from atlas_ui.server.room_http import room_routes, version_url
from atlas_ui.server.room_store import store
from atlas_ui.server.rooms import new_follower


def get(path: str, query: str = "", method: str = "GET") -> tuple[int, dict, bytes]:
    from starlette.routing import Router
    router, sent = Router(routes=room_routes()), []
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": query.encode(), "headers": [], "scheme": "http", "server": ("127.0.0.1", 80),
             "http_version": "1.1"}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(router(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_the_pages_and_the_route_share_one_store():
    assert rooms() is store() is store()


def test_a_live_room_answers_its_version_and_counts_the_follower():
    room, key = store().create({"view": "Heatmap"})
    me = new_follower()
    status, headers, body = get(f"/_atlas/room/{room}/version", f"me={me}")
    assert (status, json.loads(body)) == (200, {"version": 1})
    assert headers["cache-control"] == "no-store" and headers["content-type"].startswith("application/json")
    assert store().following(room) == 1
    store().publish(room, key, {"view": "Beam"})
    assert json.loads(get(f"/_atlas/room/{room}/version", f"me={me}")[2]) == {"version": 2}
    assert json.loads(get(f"/_atlas/room/{room}/version")[2]) == {"version": 2}     # without me: not counted
    assert store().following(room) == 1
    store().end(room, key)
    status, headers, body = get(f"/_atlas/room/{room}/version", f"me={me}")
    assert status == 404 and headers["cache-control"] == "no-store" and room.encode() not in body


@pytest.mark.parametrize("room_id", ["A" * 24, "short", "<script>alert(1)<-script>aaaaaaaaaaaa", "a" * 65])
def test_a_wrong_or_malformed_room_is_404_and_nothing_is_echoed(room_id):
    status, headers, body = get(f"/_atlas/room/{room_id}/version", f"me={new_follower()}")
    assert status == 404 and json.loads(body) == {"error": "no such room"}
    assert headers["cache-control"] == "no-store" and headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("me", ["", "x", "<b>" + "a" * 13, "A" * 16, "a" * 17])
def test_a_malformed_follower_id_is_refused_and_not_counted(me):
    room, key = store().create({})
    status, _, body = get(f"/_atlas/room/{room}/version", f"me={quote(me)}")
    assert status == 400 and json.loads(body) == {"error": "bad follower id"}
    assert store().following(room) == 0
    store().end(room, key)


def test_only_get_and_no_other_path():
    room, key = store().create({})
    assert get(f"/_atlas/room/{room}/version", method="POST")[0] == 405
    assert get(f"/_atlas/room/{room}/version/x")[0] == 404 and get(f"/_atlas/room/{room}")[0] == 404
    store().end(room, key)


def test_the_pages_url_is_the_routes_path_and_takes_checked_ids_only():
    room, key = store().create({})
    me = new_follower()
    assert version_url(room, me) == f"/_atlas/room/{room}/version?me={me}"
    for bad in (("../x" * 8, me), (room, "../" * 6), (room, None)):
        with pytest.raises(ValueError):
            version_url(*bad)
    store().end(room, key)
