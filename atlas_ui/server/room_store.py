"""The process's room store (`store()`): rooms in this process's memory (rooms.RoomStore), or, with
ATLAS_ROOM_DIR set, shared by several app processes (issue 52): one small file per room in a folder
they all write (serving.proxy makes one for its processes).

One process is one core's worth of script runs (the GIL): a move of the presenter makes every
follower's page run once, and a hundred of them in the process that owns the room came 2-3 s after
the move. With the room in a folder, any process serves its followers, so nginx spreads them by their
own route cookie and the runs of one move share the machine's cores (docs/serving.md).

    <folder>/<room id>.json          {"key": sha256 of the presenter's key, "params", "version", "touched"}
    <folder>/<room id>.<pid>.seen    {"polls": the last poll of each follower present in that process}

A room's file is written whole and renamed into place (os.replace), so a reader sees the old room or
the new one, never half; only the presenter's own session writes it. A follower's poll reads it
again only when its stat changed. Times are wall-clock seconds, the same in every process. Room ids
are checked (rooms.valid_id) before they name a file.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from . import rooms
from .rooms import FOLLOWER_SEEN_S, Room, RoomClosed, RoomStore, note_poll, valid_id

ROOM_DIR_ENV = "ATLAS_ROOM_DIR"     # a folder every app process can write: the rooms are shared
SEEN_WRITE_S = 1.0          # a process says how many follow through it at most this often per room


class SharedRoomStore(RoomStore):
    """RoomStore over a folder: every process that opens the same folder sees the same rooms."""

    shared = True

    def __init__(self, folder, idle_s: float | None = None, max_rooms: int = rooms.DEFAULT_MAX_ROOMS,
                 clock=time.time):
        super().__init__(idle_s, max_rooms, clock)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._read: dict[str, tuple[tuple, Room]] = {}     # room id -> (file's stat, the room read)
        self._present: dict[str, dict[str, float]] = {}    # room id -> this process's followers, last poll
        self._said_at: dict[str, float] = {}               # room id -> when this process last wrote its polls
        self._pid = os.getpid()

    def _path(self, room_id: str) -> Path:
        return self.folder / f"{room_id}.json"

    def _load(self, room_id: str, now: float) -> Room:
        room = self._current(room_id, now)
        # a copy: the caller may change it, and the cached one must stay what the file says
        return Room(room.key_digest, dict(room.params), room.version, room.touched)

    def _current(self, room_id: str, now: float) -> Room:
        """The room as its file says now: a follower's poll stats the file, and reads it again only
        when it changed; not to be changed."""
        if not valid_id(room_id):
            raise RoomClosed(room_id)
        path = self._path(room_id)
        try:
            info = path.stat()
            mark = (info.st_mtime_ns, info.st_size, info.st_ino)
            cached = self._read.get(room_id)
            if cached is not None and cached[0] == mark:
                room = cached[1]
            else:
                data = json.loads(path.read_text(encoding="utf-8"))
                room = Room(bytes.fromhex(data["key"]), dict(data["params"]), int(data["version"]),
                            float(data["touched"]))
                self._read[room_id] = (mark, room)
        except (OSError, ValueError, KeyError, TypeError):
            self._read.pop(room_id, None)
            raise RoomClosed(room_id) from None
        if now - room.touched > self.idle_s:
            self._remove(room_id)
            raise RoomClosed(room_id)
        return room

    def _save(self, room_id: str, room: Room) -> None:
        path = self._path(room_id)
        temporary = path.with_name(f".{room_id}.{self._pid}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps({"key": room.key_digest.hex(), "params": room.params,
                                         "version": room.version, "touched": room.touched}), encoding="utf-8")
        os.replace(temporary, path)

    def _remove(self, room_id: str) -> None:
        self._read.pop(room_id, None)
        self._present.pop(room_id, None)
        self._said_at.pop(room_id, None)
        for path in [self._path(room_id), *self.folder.glob(f"{room_id}.*.seen")]:
            path.unlink(missing_ok=True)

    def _rooms_now(self, now: float) -> dict[str, float]:
        touched = {}
        for path in self.folder.glob("*.json"):
            try:
                touched[path.stem] = self._current(path.stem, now).touched
            except RoomClosed:
                continue
        return touched

    def _seen(self, room_id: str, room: Room, follower: str | None, now: float) -> None:
        if follower is None:
            return
        present = self._present.get(room_id, {})
        new = follower not in present
        self._present[room_id] = note_poll(present, follower, now)
        if new or now - self._said_at.get(room_id, float("-inf")) >= SEEN_WRITE_S:   # a newcomer counts at once
            self._say(room_id, now)

    def _say(self, room_id: str, now: float) -> None:
        """Write when each follower of this room last polled through this process."""
        present = {f: t for f, t in self._present.get(room_id, {}).items() if now - t <= FOLLOWER_SEEN_S}
        self._present[room_id] = present
        path = self.folder / f"{room_id}.{self._pid}.seen"
        temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        temporary.write_text(json.dumps({"polls": sorted(present.values())}), encoding="utf-8")
        os.replace(temporary, path)
        self._said_at[room_id] = now

    def following(self, room_id: str) -> int:
        """The followers of every process that polled within FOLLOWER_SEEN_S (as their processes
        last wrote, at most SEEN_WRITE_S ago while they poll)."""
        with self._lock:
            now = self._clock()
            self._current(room_id, now)
            if room_id in self._present:
                self._say(room_id, now)
            count = 0
            for path in self.folder.glob(f"{room_id}.*.seen"):
                try:
                    polls = json.loads(path.read_text(encoding="utf-8"))["polls"]
                    count += sum(now - float(t) <= FOLLOWER_SEEN_S for t in polls)
                except (OSError, ValueError, KeyError, TypeError):
                    continue
            return count


_store: RoomStore | None = None
_store_lock = threading.Lock()


def store() -> RoomStore:
    """This process's rooms: the one deliberate piece of state shared between sessions, and with
    the HTTP route that followers poll (a plain module global, not st.cache_resource: the route
    runs outside any script run). With ATLAS_ROOM_DIR set (serving.proxy sets it for its processes),
    the rooms live in that folder, shared by every process (SharedRoomStore)."""
    global _store
    if _store is None:
        with _store_lock:
            if _store is None:
                folder = os.environ.get(ROOM_DIR_ENV, "").strip()
                _store = SharedRoomStore(folder) if folder else RoomStore()
    return _store
