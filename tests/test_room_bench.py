"""The room benchmark's machinery at tiny scale (benchmarks/bench_room.py, serving/room_clients.py):
a presenter over Streamlit's websocket protocol starts a room from its Share popover, 3 followers
open the room link and poll as browsers do (the page's poller over HTTP), and the presenter's moves
reach every follower as the charts of the new state; followers whose poller never runs still follow
through the slow fallback fragment. How soon is the benchmark's to measure; here only that they
arrive."""
from __future__ import annotations

from urllib.parse import parse_qs, urlencode

import pytest

from benchmarks.bench_room import LINK, MOVES
from browser_utils import drive
from serving.room_clients import Move, Presenter, chart_title, join, play
from serving.servers import AppServer


async def room_with_moves(url: str, moves: list[Move], poller: bool = True):
    presenter = await Presenter(url, urlencode(LINK)).open()
    try:
        room = await presenter.start_room()
        followers = await join(url, urlencode({"room": room}), 3, poller=poller)
        try:
            first = [[title for _, title in f.charts] for f in followers]
            for follower in followers:            # the fallback fragments their first runs drew
                follower.timers_at_join = set(follower._timers)
            results = await play(presenter, followers, moves, gap=lambda: 0.6, timeout=60)
            for follower in followers:
                follower.timers_after = set(follower._timers)
            return presenter, room, followers, first, results
        finally:
            for follower in followers:
                await follower.close()
    finally:
        await presenter.close()


@pytest.mark.slow
def test_every_follower_draws_each_move_of_the_presenter(tmp_path):
    moves = [MOVES[0], Move("view", "Decoding steps")]          # another head, then another view
    # the fallback fragment never fires here: every move must come through the page's poller
    with AppServer("app.py", log_dir=tmp_path, env={"ATLAS_ROOM_FALLBACK_S": "3600"}) as app:
        presenter, room, followers, first, results = drive(room_with_moves(app.url, moves))
        log = app.log_path.read_text(errors="replace")
    assert parse_qs(presenter.query)["room"] == [room] and "key" in parse_qs(presenter.query)
    assert not presenter.errors and all(not f.errors for f in followers), [f.errors for f in followers]
    landing = "Cross-attention · layer 1 · head 7"            # the link's landing head (page/landing.py)
    assert all(titles == [landing] for titles in first), first
    assert [r.titles[0] for r in results] == ["Cross-attention · layer 1 · head 3", "Top 10 candidates at step 1"]
    for result in results:
        assert len(result.arrived) == 3 and result.missed == 0 and result.wrong == 0, result
        assert all(at is not None and at > result.sent for at in result.arrived)
        assert result.bytes_each > 5_000, result.bytes_each      # the new charts reached each follower's socket
    for follower in followers:              # each drew every chart of each state, in the presenter's order
        drawn = [title for _, title in follower.charts]
        assert drawn[-len(results[-1].titles):] == results[-1].titles
        assert follower.http_polls >= 1, "it polled between the moves, as the page's poller does"
        assert follower.triggers >= len(moves) and follower.polls == 0, "each move came by a trigger"
        # the first run drew the fallback fragment; a run the poller started proves it runs and draws none
        assert len(follower.timers_at_join) == 1 and follower.timers_after == set()
        assert "key=" not in follower.query and parse_qs(follower.query)["room"] == [room]
    assert "Traceback" not in log


@pytest.mark.slow
def test_followers_whose_poller_never_runs_follow_by_the_fallback_fragment(tmp_path):
    with AppServer("app.py", log_dir=tmp_path, env={"ATLAS_ROOM_FALLBACK_S": "1"}) as app:
        presenter, room, followers, first, results = drive(room_with_moves(app.url, MOVES[:1], poller=False))
    assert not presenter.errors and all(not f.errors for f in followers), [f.errors for f in followers]
    assert results[0].missed == 0 and results[0].wrong == 0, results[0]
    for follower in followers:
        assert follower.http_polls == 0 and follower.triggers == 0 and follower.polls >= 1
        assert len(follower.timers_after) == 1, "without a poller the fallback stays"


def test_the_tabs_poller_is_the_pages():
    """serving/room_clients.py plays the page's poller (atlas_ui/page/room.py): the same component,
    event, retry and cookie, or the benchmark measures something else."""
    import re
    from atlas_ui.page import room
    from serving import room_clients
    assert (room.POLLER_NAME, room.POLLER_EVENT, room.ROUTE_COOKIE) == \
        (room_clients.POLLER, room_clients.POLLER_EVENT, room_clients.ROUTE_COOKIE)
    assert int(re.search(r"const RETRY_MS = (\d+);", room.POLLER_JS).group(1)) == room_clients.RETRY_S * 1000
    assert f"poll.trigger('{room.POLLER_EVENT}', value)" in room.POLLER_JS


def test_a_chart_title_is_its_first_line():
    assert chart_title('{"layout": {"title": {"text": "Top 10 candidates at step 2<br><sup>chose x</sup>"}}}') \
        == "Top 10 candidates at step 2"
    assert chart_title('{"layout": {}}') == "" and chart_title("") == ""
