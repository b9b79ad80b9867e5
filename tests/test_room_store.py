"""Rooms in a folder shared by several app processes (atlas_ui/server/room_store.py): what one
process's store writes, another's reads; only the key drives; rooms expire and end for all; the
followers of every process are counted. Two stores on one folder stand for two processes, and one
test runs a second Python process for real."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from atlas_ui.server import room_store, rooms as rooms_module
from atlas_ui.server.room_store import ROOM_DIR_ENV, SharedRoomStore, store
from atlas_ui.server.rooms import NotPresenter, RoomClosed, RoomStore

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now


def pair(folder, clock=None, idle_s=60):
    """Two processes' stores over one folder."""
    make = (lambda: SharedRoomStore(folder, idle_s=idle_s, clock=clock)) if clock else \
        (lambda: SharedRoomStore(folder, idle_s=idle_s))
    return make(), make()


def test_what_one_process_publishes_every_other_reads(tmp_path):
    presenter_side, follower_side = pair(tmp_path)
    room, key = presenter_side.create({"view": "Heatmap"})
    assert follower_side.read(room) == (1, {"view": "Heatmap"}) and follower_side.version(room) == 1
    assert presenter_side.publish(room, key, {"view": "Heatmap"}) == 1       # the same view: no new version
    assert presenter_side.publish(room, key, {"view": "Beam", "head": "3"}) == 2
    assert follower_side.version(room) == 2 and follower_side.read(room) == (2, {"view": "Beam", "head": "3"})
    _, read = follower_side.read(room)
    read["view"] = "changed by a follower"
    assert follower_side.read(room)[1]["view"] == "Beam", "a reader gets a copy"
    assert presenter_side.shared and follower_side.shared and not RoomStore.shared
    saved = json.loads((tmp_path / f"{room}.json").read_text())
    assert key not in json.dumps(saved) and set(saved) == {"key", "params", "version", "touched"}


def test_only_the_key_drives_from_any_process(tmp_path):
    presenter_side, other = pair(tmp_path)
    room, key = presenter_side.create({"view": "Heatmap"})
    for wrong in ("", "x", key[:-1], None):
        with pytest.raises(NotPresenter):
            other.publish(room, wrong, {"view": "Beam"})
        with pytest.raises(NotPresenter):
            other.end(room, wrong)
    assert other.publish(room, key, {"view": "Beam"}) == 2       # the key, whichever process has it
    other.end(room, key)
    for side in (presenter_side, other):
        with pytest.raises(RoomClosed):
            side.version(room)
    assert list(tmp_path.glob(f"{room}*")) == []


def test_ids_that_are_not_room_ids_name_no_file(tmp_path):
    side, _ = pair(tmp_path)
    (tmp_path.parent / "outside.json").write_text('{"key": "00", "params": {}, "version": 1, "touched": 0}')
    for bad in ("../outside", "x", "", None, "a" * 21, "a/" * 12):
        with pytest.raises(RoomClosed):
            side.version(bad)
    assert (tmp_path.parent / "outside.json").exists()


def test_rooms_expire_for_every_process_and_a_touch_keeps_them(tmp_path):
    clock = Clock()
    presenter_side, follower_side = pair(tmp_path, clock, idle_s=100)
    room, key = presenter_side.create({})
    clock.now += 90
    presenter_side.touch(room, key)
    clock.now += 90
    assert follower_side.version(room) == 1
    clock.now += 101
    with pytest.raises(RoomClosed):
        follower_side.version(room)
    with pytest.raises(RoomClosed):
        presenter_side.publish(room, key, {"view": "Beam"})
    assert not (tmp_path / f"{room}.json").exists() and len(presenter_side) == 0


def test_the_followers_of_every_process_are_counted(tmp_path):
    clock = Clock()
    presenter_side, first, second = (SharedRoomStore(tmp_path, idle_s=1000, clock=clock) for _ in range(3))
    first._pid, second._pid = 101, 102                # two processes' presence files
    room, key = presenter_side.create({})
    for name in ("a", "b", "c"):
        first.version(room, name * 16)
    second.read(room, "d" * 16)
    assert presenter_side.following(room) == 4 and second.following(room) == 4
    clock.now += 8
    first.version(room, "a" * 16)
    clock.now += 5                                   # b, c and d stopped polling 13 s ago
    assert presenter_side.following(room) == 1


def test_made_up_follower_ids_are_bounded_per_process(tmp_path, monkeypatch):
    monkeypatch.setattr(rooms_module, "MAX_FOLLOWERS", 50)
    side, _ = pair(tmp_path, Clock(), idle_s=1000)
    room, _ = side.create({})
    for n in range(200):
        side.version(room, f"{n:016x}")
    assert len(side._present[room]) == 50 and side.following(room) == 50


def test_the_oldest_rooms_go_first_past_the_limit(tmp_path):
    clock = Clock()
    side = SharedRoomStore(tmp_path, idle_s=1000, max_rooms=3, clock=clock)
    made = []
    for _ in range(4):
        made.append(side.create({})[0])
        clock.now += 1
    with pytest.raises(RoomClosed):
        side.version(made[0])
    assert [side.version(room) for room in made[1:]] == [1, 1, 1] and len(side) == 3


def test_a_reader_never_sees_half_a_room_while_the_presenter_writes(tmp_path):
    presenter_side, follower_side = pair(tmp_path, idle_s=1000)
    room, key = presenter_side.create({"n": "0"})
    errors = []

    def presenter():
        for n in range(1, 301):
            presenter_side.publish(room, key, {"n": str(n), "pad": "x" * 2000})

    def follower():
        last = 0
        for _ in range(1500):
            version, params = follower_side.read(room)
            if version < last or int(params["n"]) != version - 1:
                errors.append((version, params.get("n")))
            last = version

    threads = [threading.Thread(target=presenter)] + [threading.Thread(target=follower) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and follower_side.read(room)[0] == 301


SECOND_PROCESS = """
import sys
from atlas_ui.server.room_store import store
shared = store()
print(type(shared).__name__, shared.read(sys.argv[1], "e" * 16))
"""


def test_another_process_with_the_same_folder_follows(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOM_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(room_store, "_store", None)
    mine = store()
    assert isinstance(mine, SharedRoomStore)
    room, key = mine.create({"view": "Heatmap"})
    mine.publish(room, key, {"view": "Overview"})
    out = subprocess.run([sys.executable, "-c", SECOND_PROCESS, room], cwd=ROOT, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), ROOM_DIR_ENV: str(tmp_path)},
                         timeout=60)
    assert out.stdout.strip() == "SharedRoomStore (2, {'view': 'Overview'})", out.stderr
    assert mine.following(room) == 1                  # the other process's follower counts here
    monkeypatch.setattr(room_store, "_store", None)
