"""Follow the speaker (issue 52), in AppTest: presenter mode starts a room; a tab on the room's link
takes the presenter's view on its next run; Detach and Follow again; a follower never drives; a
wrong or expired room gets a message and the normal app. AppTest runs no JS: a following page's
poller is checked by the data it is given (the version route, the version applied), its polling in
tests/test_browser_follow.py; the store itself, tests/test_rooms.py; the route, tests/test_room_http.py."""
from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest

from atlas_ui.page.room import rooms
from test_app import MODELS, check_clean, new_app

pytestmark = pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")


def url(at) -> dict:
    return {name: (value[-1] if isinstance(value, list) else value) for name, value in at.query_params.items()}


def started_room(**params):
    """A presenter's page with a room started from its Share menu: (AppTest, room id, room link)."""
    at = new_app()
    at.query_params.update({"model": "en-de", "present": "1", "view": "Heatmap", **params})
    at.run()
    at.session_state["presenter_share_open"] = True            # what a click on Share does
    at.run()
    at.button(key="room_start").click().run()
    check_clean(at, "room started")
    panel = [md.value for md in at.markdown if "room link" in md.value]
    assert len(panel) == 1, "the Share menu shows the room"
    link = re.findall(r"\]\(([^)]*)\)", panel[0])[0]
    return at, url(at)["room"], link


def follower(link: str):
    at = new_app()
    at.query_params.update({name: values[-1] for name, values in parse_qs(urlparse(link).query).items()})
    at.run()
    check_clean(at, "follower")
    return at


def following(at) -> bool:
    return any("Following the speaker" in md.value for md in at.markdown)


def poller(at) -> dict | None:
    """The data the page gave its room poller (page/room.py), or None when it drew none."""
    found = [e.proto for e in at.get("bidi_component") if e.proto.component_name == "atlas_room_poller"]
    assert len(found) <= 1, "one poller a page"
    return json.loads(found[0].json) if found else None


def polls_its_room(at, room_id: str) -> bool:
    """The page's poller asks this room's version route and knows the version the page applied."""
    data = poller(at)
    route = rf"/_atlas/room/{re.escape(room_id)}/version\?me=[0-9a-f]{{16}}"
    return (data is not None and re.fullmatch(route, data["url"]) is not None
            and data["applied"] == rooms().version(room_id) and data["every_ms"] == 500)


def test_the_room_link_holds_the_room_only_and_the_key_stays_with_the_presenter():
    presenter, room_id, link = started_room()
    mine = url(presenter)
    assert mine["room"] == room_id and len(mine["key"]) >= 43       # the presenter's own address
    assert parse_qs(urlparse(link).query) == {"room": [room_id]}     # no key, no view: a short QR code
    assert mine["key"] not in "".join(md.value for md in presenter.markdown)
    assert [code.value for code in presenter.code if room_id in code.value] == [link]
    fan = follower(link)
    assert following(fan) and polls_its_room(fan, room_id)
    assert poller(presenter) is None, "the presenter drives: it polls nothing"
    assert "key" not in url(fan) and url(fan)["room"] == room_id
    for name in ("view", "kind", "layer", "head", "sentence", "model"):
        assert url(fan)[name] == mine[name], name
    assert "present" not in url(fan)                                # a follower reads the normal page


def test_a_follower_takes_each_move_detaches_and_follows_again():
    presenter, room_id, link = started_room()
    fan, alone = follower(link), follower(link)
    presenter.session_state["head"] = 2
    presenter.run()
    presenter.session_state["view"] = "Decoding steps"
    presenter.run()
    presenter.session_state["step"] = 3
    presenter.run()
    check_clean(presenter, "moves")
    alone.button(key="room_detach").click().run()
    assert not following(alone) and alone.button(key="room_follow") and poller(alone) is None
    assert poller(fan)["applied"] == 1 < rooms().version(room_id), "moved since: the poller asks a rerun"
    fan.run()
    alone.run()
    assert (url(fan)["view"], url(fan)["head"], url(fan)["step_no"]) == ("Decoding steps", "2", "4")
    assert polls_its_room(fan, room_id), "the version it applied, handed to its poller"
    assert url(alone)["view"] == "Heatmap" and url(alone)["head"] != "2", "a detached follower stays put"
    alone.button(key="room_follow").click().run()
    check_clean(alone, "follow again")
    assert following(alone) and polls_its_room(alone, room_id)
    assert (url(alone)["view"], url(alone)["head"], url(alone)["step_no"]) == ("Decoding steps", "2", "4")


def test_a_follower_who_moves_explores_alone_and_never_drives():
    presenter, room_id, link = started_room()
    fan, other = follower(link), follower(link)
    version = rooms().version(room_id)
    fan.session_state["head"] = 5               # the follower opens another head itself
    fan.run()
    check_clean(fan, "follower moved")
    assert url(fan)["head"] == "5" and not following(fan), "it explores alone from there"
    assert rooms().version(room_id) == version and rooms().read(room_id)[1]["head"] != "5"
    other.run()
    assert url(other)["head"] == url(presenter)["head"] != "5"
    presenter.session_state["view"] = "Overview"
    presenter.run()
    fan.run()
    assert url(fan)["view"] == "Heatmap", "detached: the presenter's move does not pull it back"


def test_a_wrong_or_ended_room_says_so_and_opens_the_normal_app():
    at = new_app()
    at.query_params.update(room="A" * 24)
    at.run()
    check_clean(at, "wrong room")
    assert any("This room has ended" in w.value for w in at.warning)
    assert "room" not in url(at) and at.get("plotly_chart"), "the normal app, with its chart"
    presenter, room_id, link = started_room()
    fan = follower(link)
    presenter.button(key="room_end").click().run()
    check_clean(presenter, "ended")
    assert "room" not in url(presenter) and "key" not in url(presenter)
    fan.run()
    assert any("This room has ended" in w.value for w in fan.warning)
    assert "room" not in url(fan) and not following(fan) and fan.get("plotly_chart") and poller(fan) is None


def test_a_wrong_key_follows_and_never_drives():
    presenter, room_id, link = started_room()
    version = rooms().version(room_id)
    at = new_app()
    at.query_params.update(room=room_id, key="not-the-key-" * 4, view="Overview")
    at.run()
    check_clean(at, "wrong key")
    assert any("does not drive this room" in w.value for w in at.warning)
    assert following(at) and "key" not in url(at) and url(at)["view"] == "Heatmap"
    assert rooms().version(room_id) == version


@pytest.mark.parametrize("shared", [False, True])
def test_the_room_link_names_the_owners_route_only_when_rooms_live_in_one_process(shared, monkeypatch, tmp_path):
    """Behind serving.proxy: rooms in one process's memory need the route to the owner in the link;
    rooms in a shared folder (ATLAS_ROOM_DIR) need none, and the followers spread over the processes."""
    from atlas_ui.page import room as room_page
    from atlas_ui.server import room_store
    from atlas_ui.server.room_store import SharedRoomStore
    route = "0123456789abcdef" * 2
    monkeypatch.setattr(room_page, "route", lambda: route)            # the proxy's cookie on this tab
    monkeypatch.setattr(room_store, "_store", SharedRoomStore(tmp_path) if shared else None)
    try:
        at, room_id, link = started_room()
        assert rooms().shared is shared
        fields = parse_qs(urlparse(link).query)
        assert fields["room"] == [room_id] and "key" not in fields
        assert fields.get("route") == (None if shared else [route])
        if shared:
            assert (tmp_path / f"{room_id}.json").exists()
        watcher = follower(link)
        assert following(watcher) and polls_its_room(watcher, room_id)
    finally:
        monkeypatch.setattr(room_store, "_store", None)
