"""Rooms: a presenter's view, followed live by every tab that opens the room's link (issue 52).

A room is a version number and the presenter's share-link fields (the same dict the page writes
into its URL), kept in one process's memory behind a lock. Only the holder of the room's secret key
publishes; everyone else can only read. Followers poll `version()` (a dict lookup under the lock),
over HTTP (atlas_ui/server/room_http.py), and rerun the page only when it changed. This module knows
nothing of Streamlit, so the store is unit-tested directly. The process's one store, reached by the
pages (atlas_ui/page/room.py) and by the HTTP route alike, is room_store.store(): this in-memory store,
or, with ATLAS_ROOM_DIR set (serving.proxy's processes), room_store.SharedRoomStore, whose files every
process reads. An in-memory room behind a proxy is found by the route its link carries (docs/serving.md).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field

ID_BYTES = 18             # 144 bits: token_urlsafe gives 24 characters; cannot be guessed
KEY_BYTES = 32
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
FOLLOWER_BYTES = 8
FOLLOWER_PATTERN = re.compile(r"^[0-9a-f]{16}$")       # new_follower(): what a page's poll says it is
DEFAULT_IDLE_S = 2 * 3600         # a talk's pause; the presenter's page touches its room every minute
DEFAULT_MAX_ROOMS = 200           # a bound on memory: the least recently touched room goes first
FOLLOWER_SEEN_S = 10.0            # a follower counts as present this long after its last poll
# Follower ids now come from anyone who has the room's link (the version route's ?me=): a room
# remembers at most this many, the ones gone forgotten first, so made-up ids cannot grow it for ever.
MAX_FOLLOWERS = 5000


def note_poll(followers: dict, follower: str, now: float) -> dict:
    """`followers` (id -> last poll) with this poll: when it is full, the ones gone are forgotten
    first, and a newcomer past MAX_FOLLOWERS present at once is not counted."""
    if follower not in followers and len(followers) >= MAX_FOLLOWERS:
        followers = {f: t for f, t in followers.items() if now - t <= FOLLOWER_SEEN_S}
        if len(followers) >= MAX_FOLLOWERS:
            return followers
    followers[follower] = now
    return followers


class RoomClosed(LookupError):
    """No such room: a wrong id, or one that expired or was ended."""


class NotPresenter(PermissionError):
    """The key does not open this room: only its presenter drives."""


def idle_seconds() -> float:
    """ATLAS_ROOM_IDLE_S, or two hours; a room nobody drove or touched for this long is gone."""
    try:
        return max(1.0, float(os.environ.get("ATLAS_ROOM_IDLE_S", DEFAULT_IDLE_S)))
    except ValueError:
        return float(DEFAULT_IDLE_S)


def valid_id(text) -> bool:
    return isinstance(text, str) and bool(ID_PATTERN.match(text))


def new_follower() -> str:
    """A follower's id: counts its tab as present, never shown."""
    return secrets.token_hex(FOLLOWER_BYTES)


def valid_follower(text) -> bool:
    return isinstance(text, str) and bool(FOLLOWER_PATTERN.match(text))


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "replace")).digest()


@dataclass
class Room:
    key_digest: bytes                  # the key itself is never kept: only its presenter holds it
    params: dict
    version: int = 1
    touched: float = 0.0
    followers: dict = field(default_factory=dict)      # follower id -> last poll (monotonic)


class RoomStore:
    """Every room of this process. Thread-safe: each session's script run is a thread.

    The rooms live in this process's memory; SharedRoomStore keeps them in a folder instead, for
    several processes. Both go through _load / _save / _remove / _rooms_now, and the followers'
    presence through _seen / following."""

    shared = False                    # True: every app process sees these rooms (no route needed)

    def __init__(self, idle_s: float | None = None, max_rooms: int = DEFAULT_MAX_ROOMS, clock=time.monotonic):
        self.idle_s = idle_seconds() if idle_s is None else idle_s
        self.max_rooms, self._clock = max_rooms, clock
        self._rooms: dict[str, Room] = {}
        self._lock = threading.Lock()

    # storage: a dict of this process (SharedRoomStore: files)
    def _load(self, room_id: str, now: float) -> Room:
        """The room, for a caller that may change it and _save it."""
        return self._current(room_id, now)

    def _current(self, room_id: str, now: float) -> Room:
        """The room as stored, only to be read (every follower's poll: no copy)."""
        room = self._rooms.get(room_id) if valid_id(room_id) else None
        if room is None or now - room.touched > self.idle_s:
            self._rooms.pop(room_id, None)
            raise RoomClosed(room_id)
        return room

    def _save(self, room_id: str, room: Room) -> None:
        self._rooms[room_id] = room

    def _remove(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    def _rooms_now(self, now: float) -> dict[str, float]:
        """room id -> last touched, of every room not expired (the expired ones are removed)."""
        for room_id in [r for r, room in self._rooms.items() if now - room.touched > self.idle_s]:
            del self._rooms[room_id]
        return {room_id: room.touched for room_id, room in self._rooms.items()}

    def _presenter_room(self, room_id: str, key: str, now: float) -> Room:
        room = self._load(room_id, now)
        if not isinstance(key, str) or not hmac.compare_digest(room.key_digest, _digest(key)):
            raise NotPresenter(room_id)
        return room

    def create(self, params: dict) -> tuple[str, str]:
        """A new room showing `params`; returns (room id, presenter key)."""
        room_id, key = secrets.token_urlsafe(ID_BYTES), secrets.token_urlsafe(KEY_BYTES)
        with self._lock:
            now = self._clock()
            touched = self._rooms_now(now)
            for oldest in sorted(touched, key=touched.get)[:max(0, len(touched) - self.max_rooms + 1)]:
                self._remove(oldest)
            self._save(room_id, Room(_digest(key), dict(params), touched=now))
        return room_id, key

    def publish(self, room_id: str, key: str, params: dict) -> int:
        """The presenter's view now; the version goes up only when it changed. Raises RoomClosed or
        NotPresenter."""
        with self._lock:
            now = self._clock()
            room = self._presenter_room(room_id, key, now)
            room.touched = now
            if params != room.params:
                room.params, room.version = dict(params), room.version + 1
            self._save(room_id, room)
            return room.version

    def touch(self, room_id: str, key: str) -> None:
        """The presenter is still there (a talk may stay on one view for long)."""
        with self._lock:
            now = self._clock()
            room = self._presenter_room(room_id, key, now)
            room.touched = now
            self._save(room_id, room)

    def end(self, room_id: str, key: str) -> None:
        with self._lock:
            self._presenter_room(room_id, key, self._clock())
            self._remove(room_id)

    def _seen(self, room_id: str, room: Room, follower: str | None, now: float) -> None:
        if follower is not None:
            room.followers = note_poll(room.followers, follower, now)

    def version(self, room_id: str, follower: str | None = None) -> int:
        """The room's version, cheap enough for every follower's poll; records the follower as present."""
        with self._lock:
            now = self._clock()
            room = self._current(room_id, now)
            self._seen(room_id, room, follower, now)
            return room.version

    def read(self, room_id: str, follower: str | None = None) -> tuple[int, dict]:
        """(version, a copy of the presenter's fields)."""
        with self._lock:
            now = self._clock()
            room = self._current(room_id, now)
            self._seen(room_id, room, follower, now)
            return room.version, dict(room.params)

    def following(self, room_id: str) -> int:
        """How many followers polled within FOLLOWER_SEEN_S (the ones gone are forgotten)."""
        with self._lock:
            now = self._clock()
            room = self._load(room_id, now)
            room.followers = {f: t for f, t in room.followers.items() if now - t <= FOLLOWER_SEEN_S}
            return len(room.followers)

    def __len__(self) -> int:
        with self._lock:
            return len(self._rooms_now(self._clock()))
