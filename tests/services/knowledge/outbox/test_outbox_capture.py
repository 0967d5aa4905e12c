"""Capture: one record per completed root turn; bad input refused with nothing written."""

from __future__ import annotations

import json

import pytest

from services.knowledge.outbox import CaptureError, MemoryOutbox

from .conftest import turn


async def test_capture_appends_one_record_per_turn(outbox: MemoryOutbox, clock, seen) -> None:
    batch = await outbox.capture_turn("run_1", "user:o1", turn("hi", "hello"))
    lines = outbox.stores.outbox_path.read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["batchId"] == batch
    assert record["conversationId"] == "run_1"
    assert record["owner"] == "user:o1"
    assert record["status"] == "pending"
    assert record["createdAt"] == int(clock.time() * 1000)
    assert [(m["role"], m["content"]) for m in record["messages"]] == [("user", "hi"), ("assistant", "hello")]
    assert record["messages"][1]["peerId"] == "assistant"
    assert [(c.source, c.kind, c.id) for c in seen] == [("outbox", "capture.appended", "run_1")]


async def test_explicit_peer_and_ownerless_turns(outbox: MemoryOutbox) -> None:
    await outbox.capture_turn("run_2", None, [{"role": "user", "text": "a", "peer": "operator kim"}])
    record = json.loads(outbox.stores.outbox_path.read_text())
    assert record["owner"] == "user"
    assert record["messages"][0]["peerId"].startswith("operator_kim-")
    assert await outbox.owner_of("run_2") == "user"


@pytest.mark.parametrize(
    ("conversation", "owner", "messages", "fragment"),
    [
        ("../etc", "u", [{"role": "user", "text": "x"}], "conversation id"),
        ("run_1", "", [{"role": "user", "text": "x"}], "owner"),
        ("run_1", "u", [], "at least one message"),
        ("run_1", "u", [{"role": "robot", "text": "x"}], "message 0: role 'robot'"),
        ("run_1", "u", [{"role": "user", "text": "ok"}, {"role": "user", "text": 5}], "message 1: 'text'"),
        ("run_1", "u", ["just a string"], "message 0 is not an object"),
    ],
)
async def test_bad_turns_are_refused_and_nothing_is_written(outbox: MemoryOutbox, conversation, owner, messages,
                                                          fragment) -> None:
    await outbox.capture_turn("run_1", "u", turn("kept", "kept too"))
    before = outbox.stores.outbox_path.read_bytes()
    with pytest.raises(CaptureError, match=fragment):
        await outbox.capture_turn(conversation, owner, messages)
    assert outbox.stores.outbox_path.read_bytes() == before
