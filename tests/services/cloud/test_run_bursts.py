"""``FakeRun.emit_many``: a burst of events appended at once is appended, streamed and published as
the same events appended one by one would be (every stream and subscriber sees each, in order, once)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.changes import Change
from services.cloud import CloudError, FakeCloud


def _burst(n: int, start: int = 0) -> list[tuple[str, dict[str, Any] | None]]:
    return [("node.output_text.delta", {"delta": f"t{i} ", "entry_id": "e"}) for i in range(start, start + n)]


_TURN: list[tuple[str, dict[str, Any] | None]] = [
    ("node.turn.started", {"input": {"text": "hi", "message_ids": []}, "entry_id": "e1"}),
    *_burst(3),
    ("node.output_text.done", {"text": "t0 t1 t2 ", "entry_id": "e1"}),
    ("node.turn.completed", {"stop_reason": "end_turn", "error": None, "entry_id": "e1"}),
]


async def test_a_burst_is_appended_and_published_like_events_one_by_one(cloud: FakeCloud, client: Any) -> None:
    seen: list[Change] = []
    cloud.changes.subscribe(seen.append)
    await client.runs.start(prompt="one")
    await client.runs.start(prompt="many")
    one, many = cloud.runs.all
    for type_, fields in _TURN:
        one.emit(type_, fields)
    appended = many.emit_many(_TURN)
    assert appended == many.events[-len(_TURN):]
    shape = lambda run: [(e["seq"], e["type"], e.get("delta"), e.get("text")) for e in run.events]  # noqa: E731
    assert shape(one) == shape(many)
    assert (one.status, one.activity) == (many.status, many.activity) == ("idle", None)
    published = lambda run: [c.data["event"] for c in seen if c.kind == "run.event" and c.id == run.id]  # noqa: E731
    assert published(many) == many.events  # each event, in order, once, as the very event appended
    assert all(c.data["user_id"] == many.user_id for c in seen if c.kind == "run.event")
    assert many.emit_many([]) == []


async def test_an_open_stream_reads_every_event_of_a_burst_in_order(cloud: FakeCloud, client: Any) -> None:
    run = await client.runs.start(prompt="stream")
    fake = cloud.runs.all[0]
    got: list[int] = []

    async def read() -> None:
        async for event in client.runs.events(run.id, after=fake.seq):
            got.append(event.seq)
            if len(got) == 1500:
                return

    after = fake.seq
    task = asyncio.create_task(read())
    await asyncio.sleep(0.05)
    fake.emit_many(_burst(700))
    fake.emit("node.activity", {"activity": "thinking"})
    fake.emit_many(_burst(799, 700))
    await asyncio.wait_for(task, 60)
    assert got == list(range(after + 1, after + 1501))


async def test_a_burst_on_a_deleted_run_is_refused_and_nothing_is_appended(cloud: FakeCloud, client: Any) -> None:
    await client.runs.start(prompt="gone")
    fake = cloud.runs.all[0]
    fake.delete()
    before = list(fake.events)
    with pytest.raises(CloudError) as caught:
        fake.emit_many(_burst(2))
    assert caught.value.code == "run_not_found"
    assert fake.events == before


async def test_a_bad_pair_stops_the_burst_and_what_came_before_it_is_published(cloud: FakeCloud, client: Any) -> None:
    seen: list[Change] = []
    cloud.changes.subscribe(seen.append)
    await client.runs.start(prompt="bad")
    fake = cloud.runs.all[0]
    start = fake.seq
    with pytest.raises(ValueError):
        fake.emit_many([*_burst(2), ("node.activity",)])  # type: ignore[list-item]
    assert [e["seq"] for e in fake.events if e["seq"] > start] == [start + 1, start + 2]
    assert [c.data["event"]["seq"] for c in seen if c.kind == "run.event" and c.data["event"]["seq"] > start] == \
        [start + 1, start + 2]


async def test_an_event_refused_while_it_is_built_leaves_no_gap_in_the_numbering(cloud: FakeCloud, client: Any) -> None:
    """Fields that are not an object are refused, and the next event takes the number it would have
    taken: a client resuming from its last event id never sees a number that was never sent."""
    await client.runs.start(prompt="gap")
    fake = cloud.runs.all[0]
    start = fake.seq
    for bad in (["not", "an", "object"], "text", 3):
        with pytest.raises(TypeError, match="fields are an object"):
            fake.emit("node.activity", bad)  # type: ignore[arg-type]
        assert fake.seq == start
    with pytest.raises((TypeError, ValueError)):
        fake.emit_many([("node.output_text.delta", {"delta": "a"}), ("node.activity", ["bad"])])  # type: ignore[list-item]
    fake.emit("node.output_text.delta", {"delta": "b"})
    assert [e["seq"] for e in fake.events if e["seq"] > start] == [start + 1, start + 2]
    assert fake.seq == start + 2
