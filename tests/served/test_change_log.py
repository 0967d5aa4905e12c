"""The served change log: numbered frames, resume after an id, reset when it is too old or foreign,
and a change no frame can carry as-is never breaks the feed that publishes it."""

from __future__ import annotations

import asyncio
import json
import threading

from services.changes import ChangeFeed
from services.served.change_log import ChangeLog
from services.sdk.sse import SSEParser


async def frames(log_listener: object) -> list[tuple[str, str, dict[str, object]]]:
    """Every frame queued so far (the loop runs once first: frames arrive through it)."""
    await asyncio.sleep(0)
    queue = log_listener.queue  # type: ignore[attr-defined]
    parser, out = SSEParser(), []
    while not queue.empty():
        for event in parser.feed(queue.get_nowait()):
            out.append((event.last_event_id, event.type, json.loads(event.data)))
    return out


async def test_a_resume_gets_exactly_the_changes_after_its_id_in_order() -> None:
    feed = ChangeFeed()
    log = ChangeLog(feed, size=10)
    for n in range(5):
        feed.announce("canvas", "object.updated", f"obj_{n}")
    third = f"{log.epoch}-3"
    listener = log.follow(third)
    feed.announce("okf", "judgment.approved", "j1")
    got = await frames(listener)
    assert [f[2]["id"] for f in got] == ["obj_3", "obj_4", "j1"]
    assert [f[0] for f in got] == [f"{log.epoch}-{n}" for n in (4, 5, 6)]
    listener.close()


async def test_an_id_older_than_the_log_or_from_another_epoch_is_answered_with_reset() -> None:
    feed = ChangeFeed()
    log = ChangeLog(feed, size=2)
    for n in range(5):
        feed.announce("canvas", "object.updated", f"obj_{n}")
    for stale in (f"{log.epoch}-1", "0badc0de-4", f"{log.epoch}-99", "not an id"):
        (frame,) = await frames(log.follow(stale))
        assert frame[1] == "reset" and "reset" in frame[2] and frame[0] == log.last_id, stale
    assert await frames(log.follow(f"{log.epoch}-5")) == []  # up to date: nothing to send


async def test_a_change_with_unencodable_text_or_values_is_carried_and_never_breaks_the_publisher() -> None:
    feed = ChangeFeed()
    log = ChangeLog(feed)
    listener = log.follow(None)
    feed.announce("canvas", "bad\ud800kind\nline", "obj_\udc80", note="half \ud83d", value=object())
    thread = threading.Thread(target=feed.announce, args=("okf", "from.a.thread", "t1"))
    thread.start()
    thread.join()
    feed.announce("canvas", "object.updated", "after")
    got = await frames(listener)
    ids = [f[2]["id"] for f in got]
    assert ids == ["obj_\udc80", "t1", "after"]  # the log's order, whichever thread published
    assert "\n" not in got[0][1]  # the event name stays on its line


async def test_a_run_burst_is_numbered_change_by_change_for_a_listener_and_for_a_later_resume() -> None:
    from services.changes import RunEvents

    feed = ChangeFeed()
    log = ChangeLog(feed, size=6)
    feed.announce("canvas", "object.updated", "obj_0")
    burst = [{"seq": n, "type": "node.activity"} for n in range(1, 5)]
    feed.publish_many(RunEvents("cloud", "run_1", burst, {"user_id": "u"}))  # nobody follows: kept unencoded
    resumed = await frames(log.follow(f"{log.epoch}-2"))
    assert [(f[0], f[2]["data"]["event"]["seq"]) for f in resumed] == [(f"{log.epoch}-{n}", n - 1) for n in (3, 4, 5)]
    listener = log.follow(None)
    feed.publish_many(RunEvents("cloud", "run_1", [{"seq": 5, "type": "x"}, {"seq": 6, "type": "x"}], {"user_id": "u"}))
    got = await frames(listener)
    assert [(f[0], f[1], f[2]["id"], f[2]["data"]["event"]["seq"]) for f in got] == [
        (f"{log.epoch}-6", "run.event", "run_1", 5), (f"{log.epoch}-7", "run.event", "run_1", 6)]
    assert log.last_id == f"{log.epoch}-7"
    # the log keeps the newest six: a resume from the first change of the first burst is still whole
    assert [f[0] for f in await frames(log.follow(f"{log.epoch}-1"))] == [f"{log.epoch}-{n}" for n in range(2, 8)]
    (reset,) = await frames(log.follow(f"{log.epoch}-0"))
    assert reset[1] == "reset"
    listener.close()
