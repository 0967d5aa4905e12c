"""The stores: layout, atomic writes, bounded windows, the mutex, appends after a torn line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from services.knowledge.outbox import CorruptLedgerError, OutboxSettings, OutboxStores
from services.knowledge.outbox.models import CaptureError


def record(batch: str, conv: str = "run_1", created: int = 1) -> dict:
    return {"batchId": batch, "conversationId": conv, "owner": "user", "status": "pending", "createdAt": created,
            "messages": [{"role": "user", "peerId": "user", "content": f"text {batch}", "createdAt": created}]}


def test_layout_is_the_seeds(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path / "memory")
    stores.append_lines([record("b1")])
    stores.write_ledger({"conversationId": "run_1", "deliveredBatchIds": [], "anchors": []})
    stores.write_pending_fork({"childId": "run_2", "parentId": "run_1", "atTurn": 1})
    stores.write_representation("run_1", {"conversationId": "run_1", "representation": "r"})
    stores.write_last_delivery({"lastDeliveryAt": 5, "batchId": "b1", "conversationId": "run_1"})
    root = tmp_path / "memory"
    for rel in ("data/outbox/capture.jsonl", "state/last-delivery.json", "state/ledger/run_1.json",
                "state/forks/pending/run_2.json", "cache/representations/run_1.json"):
        assert (root / rel).is_file(), rel
    leftovers = [p for p in root.rglob("*.tmp")]
    assert leftovers == []


def test_ledger_windows_are_bounded_oldest_first(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path, OutboxSettings(delivered_batch_window=3, anchor_window=2))
    stores.write_ledger({"conversationId": "c", "deliveredBatchIds": ["a", "b", "c", "d", "e"],
                         "anchors": [{"turn": 1}, {"turn": 2}, {"turn": 3}]})
    ledger = stores.read_ledger("c")
    assert ledger["deliveredBatchIds"] == ["c", "d", "e"]
    assert ledger["anchors"] == [{"turn": 2}, {"turn": 3}]


def test_ledger_write_keeps_the_old_file_mode_and_is_whole(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    stores.write_ledger({"conversationId": "c", "deliveredBatchIds": [], "anchors": []})
    path = stores.ledger_path("c")
    path.chmod(0o640)
    stores.write_ledger({"conversationId": "c", "deliveredBatchIds": ["x"], "anchors": []})
    assert path.stat().st_mode & 0o777 == 0o640
    assert json.loads(path.read_text())["deliveredBatchIds"] == ["x"]


def test_corrupt_ledger_names_the_file(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    stores.ledger_path("c").write_text("{not json")
    with pytest.raises(CorruptLedgerError, match=r"ledger/c\.json"):
        stores.read_ledger("c")
    stores.ledger_path("d").write_text('{"conversationId": "d", "deliveredBatchIds": "oops"}')
    with pytest.raises(CorruptLedgerError, match="deliveredBatchIds"):
        stores.read_ledger("d")


@pytest.mark.parametrize("bad", ["../x", "a/b", ".hidden", "", "a..b", "x" * 201])
def test_conversation_ids_cannot_escape_the_folder(tmp_path: Path, bad: str) -> None:
    stores = OutboxStores(tmp_path)
    with pytest.raises(CaptureError):
        stores.ledger_path(bad)


def test_delivered_marks_fold_into_records(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    stores.append_lines([record("b1"), record("b2")])
    stores.append_lines([{"op": "delivered", "batchIds": ["b1"], "at": 9}])
    snapshot = stores.read_outbox()
    assert [(r["batchId"], r["status"]) for r in snapshot.records] == [("b1", "delivered"), ("b2", "pending")]
    assert [r["batchId"] for r in snapshot.pending()] == ["b2"]
    assert snapshot.marks == 1


def test_append_after_a_torn_line_starts_a_fresh_line(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    stores.append_lines([record("b1")])
    with open(stores.outbox_path, "ab") as handle:
        handle.write(b'{"batchId": "b7", "x":')  # a crash mid-append
    stores.append_lines([record("b2")])
    snapshot = stores.read_outbox()
    assert [r["batchId"] for r in snapshot.records] == ["b1", "b2"]
    assert len(snapshot.corrupt) == 1 and snapshot.corrupt[0].raw.startswith('{"batchId": "b7"')
    assert "not valid JSON" in snapshot.corrupt[0].reason


def test_resolved_forks_are_kept_on_disk(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    stores.write_pending_fork({"childId": "k1", "parentId": "p", "atTurn": 1})
    stores.write_pending_fork({"childId": "k2", "parentId": "p", "atTurn": 2, "resolvedAt": 5})
    forks = stores.read_pending_forks()
    assert sorted(f["childId"] for f in forks) == ["k1", "k2"]
    assert [f["childId"] for f in forks if not f.get("resolvedAt")] == ["k1"]


def test_one_mutex_across_store_instances(tmp_path: Path) -> None:
    """A second store instance (same or another root) waits while the first holds the mutex."""
    first = OutboxStores(tmp_path / "a")
    second = OutboxStores(tmp_path / "b")
    order: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        order.append("first in")
        inside.set()
        release.wait(10)
        order.append("first out")

    def other() -> None:
        order.append("second in")

    holder = threading.Thread(target=first.run_locked, args=(hold,))
    holder.start()
    inside.wait(10)
    waiter = threading.Thread(target=second.run_locked, args=(other,))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # blocked behind the first holder
    release.set()
    holder.join(10)
    waiter.join(10)
    assert order == ["first in", "first out", "second in"]


def _view(snapshot) -> tuple:
    return ([(r["batchId"], r.get("status")) for r in snapshot.records],
            [(c.number, c.raw) for c in snapshot.corrupt], snapshot.marks)


def test_display_reads_follow_appends_marks_torn_lines_and_rewrites(tmp_path: Path) -> None:
    stores = OutboxStores(tmp_path)
    assert stores.read_outbox_for_display().records == []
    stores.append_lines([record("b1"), record("b2")])
    assert _view(stores.read_outbox_for_display()) == _view(stores.read_outbox())
    stores.append_lines([{"op": "delivered", "batchIds": ["b1"], "at": 1}, record("b3")])
    with open(stores.outbox_path, "ab") as handle:
        handle.write(b'{"batchId": "torn"')
    assert _view(stores.read_outbox_for_display()) == _view(stores.read_outbox())
    stores.append_lines([record("b4")])
    shown = stores.read_outbox_for_display()
    assert _view(shown) == _view(stores.read_outbox())
    assert [r["batchId"] for r in shown.pending()] == ["b2", "b3", "b4"]
    stores.rewrite_outbox([record("b9")])
    assert _view(stores.read_outbox_for_display()) == _view(stores.read_outbox()) == ([("b9", "pending")], [], 0)
