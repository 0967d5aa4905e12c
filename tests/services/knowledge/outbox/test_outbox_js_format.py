"""An outbox written by the JavaScript package (memory-honcho) itself: a number for
``conversationId`` in records and ledgers, compact JSON lines. Good records are read and
delivered, only a truly bad line is quarantined; what this side writes reads back by the same rules."""

from __future__ import annotations

import json
from pathlib import Path

from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, OutboxStores

from .conftest import contents


def js_record(batch: str, conv: int, text: str, created: int = 1_764_000_000_000) -> dict:
    return {"batchId": batch, "conversationId": conv, "owner": "alice", "status": "pending", "createdAt": created,
            "messages": [{"role": "user", "peerId": "alice", "content": text, "createdAt": created}]}


def write_js_outbox(root: Path, lines: list[str]) -> None:
    path = root / "data" / "outbox" / "capture.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


async def test_numeric_conversation_ids_of_the_javascript_outbox_are_read_not_quarantined(
        root: Path, outbox: MemoryOutbox, fake: FakeHonchoService) -> None:
    write_js_outbox(root, [
        json.dumps(js_record("b1", 42, "hello from js"), separators=(",", ":")),
        json.dumps(js_record("b2", 42, "second turn"), separators=(",", ":")),
        '{"batchId":"b3","conversationId":true,"owner":"alice","createdAt":1,"messages":[]}',
        json.dumps(js_record("b4", 7, "another conversation"), separators=(",", ":")),
    ])
    snapshot = outbox.stores.read_outbox()
    assert [r["batchId"] for r in snapshot.records] == ["b1", "b2", "b4"]
    assert [c.number for c in snapshot.corrupt] == [3]

    result = await outbox.sweep()

    assert result.quarantined == 1 and result.delivered_records == 3
    assert sorted(contents(fake)) == ["another conversation", "hello from js", "second turn"]
    assert (root / "state" / "ledger" / "42.json").exists()
    status = await outbox.status()
    assert sorted(c.conversation_id for c in status.conversations) == ["42", "7"]
    assert status.pending_total == 0 and status.quarantined == 1


async def test_a_javascript_ledger_with_a_numeric_id_is_read(root: Path) -> None:
    ledger = root / "state" / "ledger" / "42.json"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps({"conversationId": 42, "sessionId": "conv-42", "turnCount": 3,
                                  "deliveredBatchIds": ["b1"], "anchors": []}), encoding="utf-8")
    stores = OutboxStores(root)
    read = stores.read_ledger("42")
    assert read is not None and read["conversationId"] == "42" and read["deliveredBatchIds"] == ["b1"]


async def test_what_this_side_writes_reads_back_by_the_same_rules(
        root: Path, outbox: MemoryOutbox, fake: FakeHonchoService) -> None:
    await outbox.capture_turn(42, "alice", [{"role": "user", "text": "numeric id from python"}])  # type: ignore[arg-type]
    write_back = OutboxStores(root).read_outbox()
    assert [(r["conversationId"], r["status"]) for r in write_back.records] == [("42", "pending")]
    assert write_back.corrupt == []
    await outbox.sweep()
    assert contents(fake) == ["numeric id from python"]
