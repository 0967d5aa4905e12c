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
