"""Text a run's event stream must carry whatever it holds: a lone surrogate in an event's fields
travels as its JSON escape (the stream never stops), and an event's type is one line of text (it
names the frame, so a line break in it could add a frame of its own)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.cloud.stream import encode_frame
from services.sdk.sse import SSEParser

_SPLIT = {"delta": "half \ud83d of an emoji", "entry_id": "e", "k\udc00": ["\ud83d\ude00", "\udfff", "ok"]}


async def _read(client: Any, run_id: str, after: int, count: int) -> list[Any]:
    got: list[Any] = []

    async def read() -> None:
        async for event in client.runs.events(run_id, after=after):
            got.append(event)
            if len(got) == count:
                return

    await asyncio.wait_for(read(), 30)
    return got


async def test_a_lone_surrogate_travels_as_its_escape_to_open_and_new_streams(cloud: FakeCloud, client: Any) -> None:
    run = await client.runs.start(prompt="text")
    fake = cloud.runs.all[0]
    after = fake.seq
    live = asyncio.create_task(_read(client, run.id, after, 6))
    await asyncio.sleep(0.05)  # the stream is open: these reach it as live frames
    fake.emit("node.output_text.delta", {"delta": "before", "entry_id": "e"})
    fake.emit_many([("node.output_text.delta", {"delta": "a", "entry_id": "e"}),
                    ("node.output_text.delta", _SPLIT),
                    ("node.output_text.delta", {"delta": "b", "entry_id": "e"})])
    fake.emit("run.renamed", {"name": "\udc80"})
    fake.emit("node.output_text.delta", {"delta": "after", "entry_id": "e"})
    for events in (await live, await _read(client, run.id, after, 6)):  # live, then all at once from the log
        assert [e.seq for e in events] == list(range(after + 1, after + 7))
        assert events[2].data == {"delta": "half \ud83d of an emoji", "entry_id": "e",
                                  "k\udc00": ["\U0001f600", "\udfff", "ok"]}  # a split pair is rejoined, as JSON reads it
        assert events[4].data == {"name": "\udc80"}
        assert [e.data.get("delta") for e in events if e.type == "node.output_text.delta"] == [
            "before", "a", "half \ud83d of an emoji", "b", "after"]


def test_a_frame_with_a_lone_surrogate_is_valid_utf8_with_the_escape() -> None:
    frame = encode_frame("event", {"seq": 7, "type": "x", "text": "a\ud800b"})
    text = frame.decode("utf-8")  # strict: the frame is valid UTF-8
    assert '"text":"a\\ud800b"' in text
    (parsed,) = SSEParser().feed(frame)
    assert parsed.last_event_id == "7" and parsed.type == "x"


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "\x00", "x\ndata: {}\n\nid: 99\nevent: node.turn.completed", "",
                                 "tab\there", "del\x7f"])
async def test_an_event_type_that_is_not_one_line_of_text_is_refused_and_takes_no_number(
        cloud: FakeCloud, client: Any, bad: str) -> None:
    await client.runs.start(prompt="types")
    fake = cloud.runs.all[0]
    start = fake.seq
    with pytest.raises(ValueError, match="one line of text"):
        fake.emit(bad, {"k": 1})
    with pytest.raises(ValueError, match="one line of text"):
        fake.emit_many([("node.activity", {"activity": "thinking"}), (bad, None)])
    fake.emit("node.output_text.delta", {"delta": "next"})
    assert [e["seq"] for e in fake.events if e["seq"] > start] == [start + 1, start + 2]  # the burst's first, then next


@pytest.mark.parametrize("bad", [None, 3, ["node.activity"], b"node.activity"])
async def test_an_event_type_that_is_not_text_is_refused(cloud: FakeCloud, client: Any, bad: object) -> None:
    await client.runs.start(prompt="types")
    fake = cloud.runs.all[0]
    start = fake.seq
    with pytest.raises(TypeError, match="type is text"):
        fake.emit(bad, {"k": 1})  # type: ignore[arg-type]
    assert fake.seq == start


def test_a_stored_type_with_a_line_break_still_makes_one_frame_and_keeps_its_type_in_the_data() -> None:
    """A type an older server stored without checking it: the ``event:`` line escapes it, the data keeps it."""
    hostile = "x\ndata: {}\n\nid: 99\nevent: node.turn.completed\r\u00e9\ud800"
    frames = SSEParser().feed(encode_frame("event", {"seq": 5, "type": hostile}) + encode_frame("event", {"seq": 6, "type": 7}))
    assert [f.last_event_id for f in frames] == ["5", "6"]
    assert frames[0].type == "x data: {}  id: 99 event: node.turn.completed \\xe9\\ud800"
    assert frames[1].type == "7"
    assert '"type":"x\\ndata: {}\\n\\nid: 99\\nevent: node.turn.completed\\r\u00e9\\ud800"' in frames[0].data
