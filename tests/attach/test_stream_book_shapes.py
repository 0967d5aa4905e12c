"""The served desk's ``StreamBook`` keeps the control API's DTOs as JSON objects, and the runs' events
in the window's run mirror (its one copy of them): a run whose events are not a list, or an event
whose ``seq`` is not a number, is refused with a clear error and nothing of it is kept."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.attached.client import RemoteCloud
from services.attached.desk import StreamBook
from services.desk import RunMirror


@pytest.fixture
async def book() -> AsyncIterator[StreamBook]:
    remote = RemoteCloud("http://127.0.0.1:9", "unused")  # never called: the book is fed by hand
    yield StreamBook(remote, RunMirror())
    await remote.aclose()


async def test_a_run_keeps_its_events_and_a_run_without_them_keeps_the_log_it_had(book: StreamBook) -> None:
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "events": [{"seq": 1, "type": "node.started"}]})
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "status": "idle"})
    assert book.run_dto("run_1") == {"id": "run_1", "user_id": "user:o1", "status": "idle"}
    assert book.mirror.events("run_1") == ({"seq": 1, "type": "node.started"},)


async def test_events_that_are_not_a_list_are_refused_and_nothing_is_kept(book: StreamBook) -> None:
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "status": "running", "events": []})
    with pytest.raises(TypeError, match="the events of run run_1 are dict, not a list"):
        book.absorb_run({"id": "run_1", "user_id": "user:o1", "status": "idle", "events": {"seq": 2}})
    assert book.run_dto("run_1") == {"id": "run_1", "user_id": "user:o1", "status": "running"}
    assert book.mirror.events("run_1") == ()


async def test_an_event_is_appended_once_in_seq_order_and_a_seq_that_is_no_number_is_refused(book: StreamBook) -> None:
    book.append_event("run_1", {"seq": 1, "type": "a"})
    book.append_event("run_1", {"seq": 1, "type": "a"})  # already held
    book.append_event("run_1", {"seq": "2", "type": "b"})  # the wire may carry it as text
    with pytest.raises(TypeError, match="an event's seq is NoneType, not a number"):
        book.append_event("run_1", {"seq": None, "type": "c"})
    assert [e["type"] for e in book.mirror.events("run_1")] == ["a", "b"]


async def test_the_book_keeps_no_log_of_its_own_and_a_full_read_replaces_the_mirrors(book: StreamBook) -> None:
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "events": [{"seq": 1, "type": "a", "at": 1.5}]})
    book.append_event("run_1", {"seq": 2, "type": "b", "at": "2026-12-01T00:00:00.000Z"})
    assert not hasattr(book, "logs") and not hasattr(book, "events")
    assert [(e["seq"], e["at"]) for e in book.mirror.events("run_1")] == [(1, 1.5), (2, 1796083200.0)]
    assert book.mirror.last_seq("run_1") == 2
    book.mirror.forget()  # as a full read does, before it holds each run's log afresh
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "events": [{"seq": 3, "type": "c"}]})
    assert [e["type"] for e in book.mirror.events("run_1")] == ["c"]
    assert book.mirror.events("run_unknown") == () and book.mirror.since("run_unknown", 0) == []


async def test_a_read_older_than_the_stream_keeps_the_events_the_stream_carried_after_it(book: StreamBook) -> None:
    # the attach read writes a run at a time while the change stream goes on: a run's answer may be
    # older than events the stream has already brought
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "events": [{"seq": 1, "type": "a"}]})
    book.append_event("run_1", {"seq": 2, "type": "b"})
    book.append_event("run_1", {"seq": 3, "type": "c"})
    book.absorb_run({"id": "run_1", "user_id": "user:o1", "events": [{"seq": 1, "type": "a"}, {"seq": 2, "type": "b"}]})
    assert [e["type"] for e in book.mirror.events("run_1")] == ["a", "b", "c"]
    assert book.mirror.last_seq("run_1") == 3
    book.append_event("run_1", {"seq": 3, "type": "c"})  # carried again: held once
    assert [e["seq"] for e in book.mirror.since("run_1", 1)] == [2, 3]


async def test_a_run_is_kept_with_its_times_as_seconds_and_without_what_no_reader_reads(book: StreamBook) -> None:
    """A window over many runs holds one DTO each: the times as the seconds every reader makes of them,
    the strings runs share once, and neither the messages nor the app's idempotency key."""
    from services.desk import run_view

    dto = {"id": "run_1", "user_id": "user:o1", "status": "idle", "activity": None, "params": {"prompt": "hi"},
           "created_at": "2026-12-01T00:00:00.000Z", "updated_at": "2026-12-01T00:00:01.500Z",
           "idempotency_key": "k" * 32, "messages": [{"id": "m1", "text": "hi"}], "seq": 3}
    before = run_view(dto)
    book.absorb_run(dto)
    kept = book.run_dto("run_1")
    assert kept is not None and kept is not dto and "messages" in dto  # the caller's DTO is not changed
    assert kept["created_at"] == 1796083200.0 and kept["updated_at"] == 1796083201.5
    assert "messages" not in kept and "idempotency_key" not in kept
    assert run_view(kept) == before  # every view reads the same
    again = {"id": "run_2", "user_id": "".join(["user:", "o1"]), "status": "".join(["id", "le"]),
             "created_at": "not a time", "updated_at": 1e300}
    book.absorb_run(again, owned=True)  # a list's DTO, read and held by nobody else: kept as it is
    assert book.run_dto("run_2") is again
    assert again["user_id"] is kept["user_id"] and again["status"] is kept["status"]  # held once
    assert again["created_at"] == "not a time" and again["updated_at"] == 1e300  # unusable: left as they were
    assert run_view(again).created_at == 0.0 and run_view(again).updated_at == 0.0
