"""A burst of a run's events appended at once (``FakeRun.emit_many``) travels as one publication
(``RunEvents``): the feed's subscribers, the window's run mirror and the follower still see every
event, in order, exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.changes import Change, ChangeFeed, RunEvents
from services.desk import seq_of
from services.workspace import Workspace

from .conftest import person_run


def _burst(n: int, start: int = 0) -> list[tuple[str, dict[str, object] | None]]:
    return [("node.output_text.delta", {"delta": f"t{i} ", "entry_id": "e"}) for i in range(start, start + n)]


def test_run_events_read_as_the_changes_they_stand_for() -> None:
    events = [{"seq": 1, "type": "a"}, {"seq": 2, "type": "b"}, {"seq": 3, "type": "c"}]
    burst = RunEvents("cloud", "run_1", events, {"user_id": "user:ada"})
    each = [Change("cloud", "run.event", "run_1", {"event": e, "user_id": "user:ada"}) for e in events]
    assert len(burst) == 3
    assert list(burst) == each
    assert burst[1] == each[1] and burst[-1] == each[-1]
    assert list(burst[1:]) == each[1:]
    with pytest.raises(IndexError):
        burst[3]


async def test_publish_many_reaches_every_kind_of_subscriber_in_order_once() -> None:
    feed = ChangeFeed()
    plain: list[Change] = []
    batched: list[Sequence[Change]] = []
    feed.subscribe(plain.append)
    feed.subscribe(lambda change: pytest.fail("a batch subscriber is not called change by change"),
                   many=batched.append)
    queued: list[Change] = []

    async def consume() -> None:
        async for change in feed.changes():
            queued.append(change)
            if len(queued) == 6:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    first = [Change("cloud", "run.event", "run_1", {"event": {"seq": i}}) for i in (1, 2, 3)]
    feed.publish_many(first)
    second = RunEvents("cloud", "run_1", [{"seq": i} for i in (4, 5, 6)], {})
    await asyncio.to_thread(feed.publish_many, second)  # from another thread: one hop onto the loop
    feed.publish_many([])  # nothing: nobody is called
    await asyncio.wait_for(task, 5)
    expected = [*first, *second]
    assert plain == expected
    assert queued == expected
    assert [list(b) for b in batched] == [first, list(second)]


async def test_the_mirror_and_a_pane_read_take_a_burst_once_in_order(ws: Workspace) -> None:
    desk, run_id = ws.desk, person_run(ws)
    last = seq_of(desk.detail(run_id).events[-1])  # held by the mirror from here on
    run = ws.cloud.runs.get(run_id)
    run.emit_many(_burst(3))
    run.emit("node.activity", {"text": "between"})
    run.emit_many(_burst(2, 3))
    fresh = desk.events_since(run_id, last)
    assert [seq_of(e) for e in fresh] == list(range(last + 1, last + 7))
    assert [e.get("delta") or e.get("text") for e in fresh] == ["t0 ", "t1 ", "t2 ", "between", "t3 ", "t4 "]
    assert all(isinstance(e["at"], float) for e in fresh)
    assert desk.events_since(run_id, last + 4) == fresh[4:]
    assert [seq_of(e) for e in desk.detail(run_id).events] == [e["seq"] for e in run.events]
    ws.feed.publish_many(RunEvents("cloud", run_id, run.events[-2:], {}))  # a repeat: held already
    assert [seq_of(e) for e in desk.detail(run_id).events] == [e["seq"] for e in run.events]


async def test_the_follower_takes_the_events_of_a_burst_that_it_applies(ws: Workspace) -> None:
    run_id = person_run(ws)
    run = ws.cloud.runs.get(run_id)
    assert ws.follower is not None
    await ws.follower.idle()
    run.emit_many([*_burst(50), ("node.output_text.done", {"text": "whole", "entry_id": "e"}),
                   ("node.turn.completed", {"stop_reason": "end_turn", "error": None, "entry_id": "e"})])
    await ws.follower.idle()
    assert not ws.follower.errors
    assert ws.follower._captured[run_id] == run.seq  # the turn the burst completed was captured
