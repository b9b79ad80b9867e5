"""Issue 52: a room's followers take turns (atlas_ui/page/room.py follower_turn): a move starts one run per
follower at once; at most follower_runs() of them run in a process, everyone else's runs never wait."""
import threading

import pytest

from atlas_ui.page import room
from atlas_ui.server.settings import follower_runs


def crowd(n: int, follower: bool, count: int):
    """n threads in follower_turn; each holds its turn until `release`. Returns (threads, state)."""
    state = {"active": 0, "most": 0, "done": 0}
    changed, release = threading.Condition(), threading.Event()

    def run():
        with room.follower_turn(follower, count):
            with changed:
                state["active"] += 1
                state["most"] = max(state["most"], state["active"])
                changed.notify_all()
            assert release.wait(30)
            with changed:
                state["active"] -= 1
                state["done"] += 1
                changed.notify_all()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, state, changed, release


def test_followers_run_at_most_their_count_at_once_and_all_get_a_turn():
    threads, state, changed, release = crowd(8, True, 3)
    with changed:
        assert changed.wait_for(lambda: state["active"] == 3, 30)
    assert room._follower_slots(3)._value == 0            # the other five wait for a turn
    release.set()
    for t in threads:
        t.join(30)
    assert state["done"] == 8 and state["most"] == 3


def test_other_runs_never_wait():
    threads, state, changed, release = crowd(6, False, 1)
    with changed:
        assert changed.wait_for(lambda: state["active"] == 6, 30)
    release.set()
    for t in threads:
        t.join(30)
    assert state["done"] == 6


def test_a_run_that_fails_gives_its_turn_back():
    with pytest.raises(RuntimeError):
        with room.follower_turn(True, 2):
            raise RuntimeError("the run stopped")
    assert room._follower_slots(2)._value == 2


def test_a_follower_whose_turn_never_comes_runs_anyway_after_its_wait():
    slots = room._follower_slots(5)
    for _ in range(5):
        assert slots.acquire(timeout=1)                   # five stuck runs hold every turn
    try:
        with room.follower_turn(True, 5, wait=0.05):
            ran = True
        assert ran and slots._value == 0                  # it took no turn, so it gives none back
    finally:
        for _ in range(5):
            slots.release()


def test_the_count_comes_from_the_environment():
    assert follower_runs({}) == 1 and follower_runs({"ATLAS_ROOM_RUNS": "4"}) == 4
    assert follower_runs({"ATLAS_ROOM_RUNS": "zero"}) == 1
