"""The room store (atlas_ui/server/rooms.py): versions, expiry, the presenter's key, and that nobody
else drives. Pure Python: no Streamlit run."""
from __future__ import annotations

import threading

import pytest

from atlas_ui.server import rooms as rooms_module
from atlas_ui.server.rooms import NotPresenter, RoomClosed, RoomStore, valid_id


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_room_starts_at_version_1_and_moves_only_when_the_view_changed():
    store = RoomStore(idle_s=60)
    room, key = store.create({"view": "Heatmap"})
    assert store.read(room) == (1, {"view": "Heatmap"})
    assert store.publish(room, key, {"view": "Heatmap"}) == 1          # the same view: no new version
    assert store.publish(room, key, {"view": "Beam"}) == 2
    assert store.version(room) == 2 and store.read(room)[1] == {"view": "Beam"}


def test_what_a_reader_gets_is_a_copy():
    store = RoomStore(idle_s=60)
    params = {"view": "Heatmap"}
    room, key = store.create(params)
    params["view"] = "changed by the caller"
    _, read = store.read(room)
    read["view"] = "changed by a follower"
    assert store.read(room) == (1, {"view": "Heatmap"})


def test_ids_and_keys_cannot_be_guessed_and_the_key_is_not_kept():
    store = RoomStore(idle_s=60)
    made = [store.create({}) for _ in range(50)]
    ids, keys = {r for r, _ in made}, {k for _, k in made}
    assert len(ids) == len(keys) == 50
    assert all(valid_id(r) and len(r) >= 22 for r in ids)          # token_urlsafe(18): 144 bits
    assert all(len(k) >= 43 for k in keys)                           # 256 bits
    room, key = made[0]
    assert key not in repr(vars(store._rooms[room]))                 # only its digest


def test_only_the_key_holder_drives():
    store = RoomStore(idle_s=60)
    room, key = store.create({"view": "Heatmap"})
    other_room, other_key = store.create({})
    for wrong in ("", "x", other_key, key[:-1], None, key + "x"):
        with pytest.raises(NotPresenter):
            store.publish(room, wrong, {"view": "Beam"})
        with pytest.raises(NotPresenter):
            store.end(room, wrong)
    assert store.read(room) == (1, {"view": "Heatmap"})
    store.end(room, key)
    with pytest.raises(RoomClosed):
        store.read(room)


def test_a_wrong_or_malformed_id_is_closed():
    store = RoomStore(idle_s=60)
    for wrong in ("", "nope", "a" * 24, "../../etc/passwd", None, 5, "a" * 200):
        with pytest.raises(RoomClosed):
            store.version(wrong)
    assert not valid_id("a b" * 10) and not valid_id("<script>aaaaaaaaaaaaaaaaaaaa")


def test_an_idle_room_expires_and_the_presenter_keeps_it_alive():
    clock = Clock()
    store = RoomStore(idle_s=100, clock=clock)
    room, key = store.create({"view": "Heatmap"})
    clock.now += 90
    store.touch(room, key)                  # the presenter's heartbeat
    clock.now += 90
    assert store.version(room, "a follower") == 1       # a follower's poll does not keep it alive
    clock.now += 11
    with pytest.raises(RoomClosed):
        store.version(room)
    with pytest.raises(RoomClosed):
        store.publish(room, key, {})
    assert len(store) == 0


def test_the_store_is_bounded_the_least_recently_driven_room_goes():
    clock = Clock()
    store = RoomStore(idle_s=1000, max_rooms=3, clock=clock)
    rooms = []
    for _ in range(3):
        rooms.append(store.create({}))
        clock.now += 1
    store.touch(*rooms[0])                   # the first is driven again: the second is the oldest
    store.create({})
    assert len(store) == 3
    with pytest.raises(RoomClosed):
        store.version(rooms[1][0])
    assert store.version(rooms[0][0]) == 1


def test_followers_are_counted_while_they_poll():
    clock = Clock()
    store = RoomStore(idle_s=1000, clock=clock)
    room, key = store.create({})
    for name in ("a", "b", "c"):
        store.version(room, name)
    store.version(room, "a")
    assert store.following(room) == 3
    clock.now += 8
    store.version(room, "a")
    clock.now += 5                     # b and c stopped polling 13 s ago
    assert store.following(room) == 1


def test_made_up_follower_ids_cannot_grow_a_room_for_ever(monkeypatch):
    monkeypatch.setattr(rooms_module, "MAX_FOLLOWERS", 50)
    clock = Clock()
    store = RoomStore(idle_s=1000, clock=clock)
    room, key = store.create({})
    for n in range(200):                       # anyone with the link can poll under any id
        store.version(room, f"{n:016x}")
    assert len(store._rooms[room].followers) == 50 and store.following(room) == 50
    clock.now += 11                            # those went quiet: newcomers take their places
    store.read(room, "f" * 16)
    assert store._rooms[room].followers == {"f" * 16: clock.now} and store.following(room) == 1


def test_concurrent_publishes_and_reads_keep_versions_consistent():
    store = RoomStore(idle_s=1000)
    room, key = store.create({"n": "0"})
    seen, errors = [], []

    def presenter():
        for n in range(1, 501):
            store.publish(room, key, {"n": str(n)})

    def follower():
        last = 0
        for _ in range(2000):
            version, params = store.read(room)
            if version < last or int(params["n"]) != version - 1:
                errors.append((version, params))
            last = version
        seen.append(last)

    threads = [threading.Thread(target=presenter)] + [threading.Thread(target=follower) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.read(room) == (501, {"n": "500"})
