"""A room's version over plain HTTP (issue 52): what a follower's page polls instead of a script run.

    GET /_atlas/room/<room id>/version?me=<follower id>   ->   200 {"version": n}

A follower's page (atlas_ui/page/room.py's poller) asks this every ATLAS_ROOM_POLL_S seconds and
reruns itself only when the answer differs from the version it applied, or when the room is gone
(404). An answer is a dict lookup under the store's lock on Streamlit's own event loop: no session,
no script run, no websocket message. The route is mounted on the same st.App (its public `routes=`,
app.py), so behind serving.proxy the page's same-origin request carries the same `atlas_route`
cookie as its websocket and reaches the process that holds the room. Nothing from the request is
echoed: the answers are fixed texts and a number.
"""
from __future__ import annotations

from .room_store import store
from .rooms import RoomClosed, valid_follower, valid_id

PATH = "/_atlas/room/{room_id}/version"
# never cached (a version is stale at once), never sniffed as anything but JSON
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def base_path() -> str:
    """Streamlit's server.baseUrlPath as a path prefix ('' or '/prefix'): the page and the route
    both live under it (user routes are mounted at the root, so the prefix is ours to add)."""
    import streamlit as st
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def version_url(room_id: str, follower: str) -> str:
    """The path a follower's page polls (same origin). Both ids are checked, so nothing else can
    reach the page's script through it."""
    if not valid_id(room_id) or not valid_follower(follower):
        raise ValueError("not a room id or follower id")
    return f"{base_path()}{PATH.format(room_id=room_id)}?me={follower}"


async def room_version(request):
    from starlette.responses import JSONResponse
    room_id, follower = request.path_params.get("room_id"), request.query_params.get("me")
    if follower is not None and not valid_follower(follower):
        return JSONResponse({"error": "bad follower id"}, status_code=400, headers=HEADERS)
    if not valid_id(room_id):             # a malformed id names no room: the same answer as a gone one
        return JSONResponse({"error": "no such room"}, status_code=404, headers=HEADERS)
    try:
        version = store().version(room_id, follower)
    except RoomClosed:
        return JSONResponse({"error": "no such room"}, status_code=404, headers=HEADERS)
    return JSONResponse({"version": version}, headers=HEADERS)


def room_routes() -> list:
    """The routes for st.App(routes=...)."""
    from starlette.routing import Route
    return [Route(base_path() + PATH, room_version, methods=["GET"])]
