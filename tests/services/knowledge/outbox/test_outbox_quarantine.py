"""Quarantined lines: listed with their reason; retried back into the outbox when they now read
(nothing changes when they still do not); dropped into ``dropped.jsonl``, never destroyed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, QuarantineError

from .conftest import contents

JS_LINE = json.dumps({"batchId": "b-js", "conversationId": 42, "owner": "alice", "status": "pending",
                      "createdAt": 1_764_000_000_000,
                      "messages": [{"role": "user", "peerId": "alice", "content": "set aside once"}]})


def quarantine(root: Path, *raws: str) -> Path:
    path = root / "data" / "outbox" / "quarantine.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"quarantinedAt": 1, "line": i + 1, "reason": "old rules", "raw": raw}) + "\n"
                            for i, raw in enumerate(raws)), encoding="utf-8")
    return path


async def test_a_quarantined_line_that_now_reads_is_retried_into_the_outbox_and_delivered(
        root: Path, outbox: MemoryOutbox, fake: FakeHonchoService) -> None:
    path = quarantine(root, "{not json", JS_LINE)
    listed = await outbox.quarantined()
    assert [(q.position, q.reason, q.raw) for q in listed] == [(0, "old rules", "{not json"), (1, "old rules", JS_LINE)]

    assert await outbox.retry_quarantined(listed[1]) == "b-js"
    assert [q.raw for q in await outbox.quarantined()] == ["{not json"]
    await outbox.sweep()
    assert contents(fake) == ["set aside once"]
    assert path.read_text(encoding="utf-8").count("\n") == 1


async def test_retrying_a_line_that_still_does_not_read_is_refused_and_changes_nothing(
        root: Path, outbox: MemoryOutbox) -> None:
    path = quarantine(root, "{not json")
    before = path.read_bytes()
    (item,) = await outbox.quarantined()
    with pytest.raises(QuarantineError, match="still cannot be read"):
        await outbox.retry_quarantined(item)
    assert path.read_bytes() == before
    assert outbox.stores.read_outbox().records == []


async def test_dropping_a_quarantined_line_moves_it_aside_never_destroys_it(root: Path, outbox: MemoryOutbox) -> None:
    path = quarantine(root, "{not json", JS_LINE)
    first, _second = await outbox.quarantined()
    await outbox.drop_quarantined(first)
    assert [q.raw for q in await outbox.quarantined()] == [JS_LINE]
    dropped = (path.parent / "dropped.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(d)["raw"] for d in dropped] == ["{not json"]
    with pytest.raises(QuarantineError, match="no longer there"):
        await outbox.drop_quarantined(first)
    assert [q.raw for q in await outbox.quarantined()] == [JS_LINE]
