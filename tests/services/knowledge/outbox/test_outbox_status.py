"""The status view: counts per conversation, last delivery, pending forks, last sweep, errors."""

from __future__ import annotations

from services.knowledge.outbox import MemoryOutbox

from .conftest import advancing, turn


async def test_status_counts_pending_and_delivered(outbox: MemoryOutbox, fake, clock, seen) -> None:
    await outbox.capture_turn("run_a", "user:o1", turn("a1", "r"))
    await outbox.capture_turn("run_a", "user:o1", turn("a2", "r"))
    await outbox.sweep()
    await outbox.capture_turn("run_a", "user:o1", turn("a3", "r"))
    await outbox.capture_turn("run_b", "user:o2", turn("b1", "r"))
    fake.go_down()
    child = await outbox.fork("run_b", 1)
    status = await outbox.status()
    rows = {r.conversation_id: r for r in status.conversations}
    assert (rows["run_a"].pending, rows["run_a"].delivered, rows["run_a"].turns) == (1, 2, 2)
    assert rows["run_a"].session_id == "conv-run_a" and rows["run_a"].owner == "user:o1"
    assert (rows["run_b"].pending, rows["run_b"].delivered, rows["run_b"].session_id) == (1, 0, None)
    assert status.pending_total == 2
    assert status.last_delivery_at == int(clock.time() * 1000) / 1000
    assert [f.child_id for f in status.pending_forks] == [child]
    assert status.last_sweep is not None and status.last_sweep.delivered_records == 2
    failed = await advancing(clock, outbox.sweep())
    status = await outbox.status()
    assert status.errors == failed.errors and any("run_b" in e for e in status.errors)
    assert {c.source for c in seen} == {"outbox"}
