"""The sweep: plan, establish (forks first), deliver, compact; quarantine, retention, poison, timer."""

from __future__ import annotations

import json
import logging
import os

from services.files import FileLock
from services.knowledge.outbox import MemoryOutbox, OutboxSettings

from .conftest import advancing, contents, turn


async def test_sweep_delivers_every_conversation_and_compacts(outbox: MemoryOutbox, fake, seen) -> None:
    for conv in ("run_a", "run_b"):
        for i in range(2):
            await outbox.capture_turn(conv, "u", turn(f"{conv} q{i}", f"{conv} a{i}"))
    result = await outbox.sweep()
    assert (result.conversations, result.delivered_records, result.dropped_delivered) == (2, 4, 4)
    assert result.rewrote and result.errors == []
    assert outbox.stores.outbox_path.read_text() == ""
    assert contents(fake, "conv-run_a") == ["run_a q0", "run_a a0", "run_a q1", "run_a a1"]
    kinds = [c.kind for c in seen]
    assert kinds.index("sweep.started") < kinds.index("delivery.delivered") < kinds.index("sweep.finished")


async def test_refire_over_a_delivered_outbox_touches_nothing(outbox: MemoryOutbox, fake) -> None:
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    await outbox.sweep()
    before = os.stat(outbox.stores.outbox_path)
    calls = len(fake.calls)
    result = await outbox.sweep()
    after = os.stat(outbox.stores.outbox_path)
    assert len(fake.calls) == calls
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert not result.rewrote and result.delivered_records == 0


async def test_lingering_windowed_records_are_dropped_silently(outbox: MemoryOutbox, fake, caplog) -> None:
    await outbox.engine.establish("run_a", "u")
    batch = await outbox.capture_turn("run_a", "u", turn("q", "a"))
    ledger = outbox.stores.read_ledger("run_a")
    ledger["deliveredBatchIds"] = [batch]  # delivered, but the record never flipped (a crash)
    outbox.stores.write_ledger(ledger)
    caplog.set_level(logging.WARNING, logger="services.knowledge.outbox")
    result = await outbox.sweep()
    assert result.dropped_delivered == 1 and result.dropped_expired == 0
    assert contents(fake) == []  # never sent again
    assert outbox.stores.read_outbox().records == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_over_retention_records_are_dropped_with_the_seed_warning(root, feed, fake, clock, caplog) -> None:
    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock,
                                  settings=OutboxSettings(outbox_retention_days=1))
    try:
        old = await box.capture_turn("run_old", "u", turn("stale", "x"))
        created = json.loads(box.stores.outbox_path.read_text())["createdAt"]
        clock.advance(2 * 86_400)
        fresh = await box.capture_turn("run_new", "u", turn("fresh", "y"))
        fake.go_down()
        caplog.set_level(logging.INFO, logger="services.knowledge.outbox")
        result = await advancing(clock, box.sweep())
        assert result.dropped_expired == 1
        expected = (f"memory-honcho: dropping over-retention outbox record {old} (conversation run_old, created "
                    f"{_iso(created)}, older than 1d retention)")
        assert expected in caplog.messages
        assert expected in result.errors
        assert "memory-honcho: outbox compaction dropped 0 delivered, 1 expired" in caplog.messages
        assert [r["batchId"] for r in box.stores.read_outbox().records] == [fresh]
    finally:
        await box.aclose()


def _iso(ms: int) -> str:
    from services.clock import iso

    return iso(ms / 1000)


async def test_corrupt_and_truncated_lines_are_quarantined_and_the_rest_delivered(outbox: MemoryOutbox, fake,
                                                                                 seen) -> None:
    await outbox.capture_turn("run_a", "u", turn("before", "b"))
    with open(outbox.stores.outbox_path, "ab") as handle:
        handle.write(b'{"batchId": 12, "garbage": true}\n')
        handle.write(b'\xff\xfe not json at all\n')
        handle.write(b'{"batchId": "evil", "conversationId": "../../etc", "owner": "u", "createdAt": 1, '
                     b'"messages": []}\n')
        handle.write(b'{"batchId": "torn", "conversationId": "run_a", "messa')  # crash mid-append
    await outbox.capture_turn("run_a", "u", turn("after", "c"))
    status = await outbox.status()
    assert status.corrupt_lines == 4
    result = await outbox.sweep()
    assert result.quarantined == 4 and result.delivered_records == 2
    assert contents(fake, "conv-run_a") == ["before", "b", "after", "c"]
    assert sum("quarantined corrupt outbox line" in e for e in result.errors) == 4
    lines = [json.loads(x) for x in outbox.stores.quarantine_path.read_text().splitlines()]
    assert [q["line"] for q in lines] == [2, 3, 4, 5]
    assert "conversation id" in lines[2]["reason"]
    assert lines[3]["raw"].startswith('{"batchId": "torn"')
    assert all(q["reason"] for q in lines)
    assert outbox.stores.read_outbox().corrupt == []
    assert (await outbox.status()).quarantined == 4
    assert any(c.kind == "outbox.warning" for c in seen)


async def test_one_poisoned_conversation_never_stops_the_rest(outbox: MemoryOutbox, fake) -> None:
    await outbox.engine.establish("run_bad", "u")
    bad = await outbox.capture_turn("run_bad", "u", turn("bad q", "bad a"))
    await outbox.capture_turn("run_good", "u", turn("good q", "good a"))
    outbox.stores.ledger_path("run_bad").write_text("{{{")
    result = await outbox.sweep()
    assert contents(fake, "conv-run_good") == ["good q", "good a"]
    assert any("run_bad" in e and "corrupt ledger" in e for e in result.errors)
    assert [r["batchId"] for r in outbox.stores.read_outbox().records] == [bad]
    rows = {r.conversation_id: r for r in (await outbox.status()).conversations}
    assert rows["run_bad"].error and "run_bad.json" in rows["run_bad"].error
    assert rows["run_good"].delivered == 1


async def test_memory_service_down_during_a_sweep_loses_nothing(outbox: MemoryOutbox, fake, clock) -> None:
    for i in range(3):
        await outbox.capture_turn(f"run_{i}", "u", turn(f"q{i}", f"a{i}"))
    fake.go_down()
    down = await advancing(clock, outbox.sweep())
    assert down.delivered_records == 0 and len(down.errors) >= 3
    # The first conversation is tried retry_attempts times; the service stays down, so the
    # others get one try each and wait for the next sweep.
    assert down.retries == outbox.settings.retry_attempts - 1
    assert len(outbox.stores.read_outbox().pending()) == 3
    fake.come_up()
    up = await outbox.sweep()
    assert up.delivered_records == 3 and up.errors == []
    assert sorted(contents(fake)) == sorted(["q0", "a0", "q1", "a1", "q2", "a2"])


async def test_the_timer_sweeps_every_interval_of_the_injected_clock(outbox: MemoryOutbox, fake, clock,
                                                                   seen) -> None:
    import asyncio

    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    outbox.start()
    await asyncio.sleep(0)
    clock.advance(899)
    for _ in range(20):
        await asyncio.sleep(0)
    assert contents(fake) == []
    clock.advance(1)
    for _ in range(200):
        if outbox.last_sweep is not None:
            break
        await asyncio.sleep(0.01)
    assert outbox.last_sweep is not None and contents(fake) == ["q", "a"]
    await outbox.stop()


async def test_a_sweep_held_elsewhere_is_skipped(outbox: MemoryOutbox, fake) -> None:
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    with FileLock(outbox.stores.state / "sweep.lock"):  # another holder (as another process would be)
        result = await outbox.sweep()
    assert result.skipped and contents(fake) == []
    assert (await outbox.sweep()).delivered_records == 1


async def test_unresolved_forks_are_established_first(outbox: MemoryOutbox, fake, children) -> None:
    await outbox.capture_turn("run_p", "u", turn("p1", "r1"))
    await outbox.sweep()
    child = "run_c"  # a pending fork left unresolved (say, the memory service was down when it was made)
    outbox.stores.write_pending_fork({"childId": child, "parentId": "run_p", "atTurn": 1, "createdAt": 1})
    assert [f.child_id for f in (await outbox.status()).pending_forks] == [child]
    await outbox.capture_turn("run_z", "u", turn("z", "z"))
    await outbox.capture_turn(child, "u", turn("c1", "cr1"))
    fake.calls.clear()
    result = await outbox.sweep()
    assert result.errors == []
    paths = [p for m, p in fake.calls if m == "POST"]
    first_clone = next(i for i, p in enumerate(paths) if p.endswith("/clone"))
    first_session = next(i for i, p in enumerate(paths) if p.endswith("/sessions"))
    assert first_clone < first_session
    clone_id = outbox.stores.read_ledger(child)["sessionId"]
    assert contents(fake, clone_id) == ["p1", "r1", "c1", "cr1"]
    assert outbox.stores.read_pending_fork(child)["resolvedAt"]


async def test_compaction_rereads_when_the_file_changed_after_the_plan(outbox: MemoryOutbox, clock, feed) -> None:
    from services.knowledge.outbox.sweep import SweepResult, compact

    first = await outbox.capture_turn("run_a", "u", turn("q", "a"))
    planned = (outbox.stores.outbox_key(), outbox.stores.read_outbox())
    outbox.stores.append_lines([{"op": "delivered", "batchIds": [first], "at": 1}])
    late = await outbox.capture_turn("run_a", "u", turn("late", "b"))  # appended after the plan
    result = SweepResult(started_at=clock.time())
    await compact(outbox.stores, 30, clock, feed, result, planned)
    assert [r["batchId"] for r in outbox.stores.read_outbox().records] == [late]
    assert result.dropped_delivered == 1


async def test_a_corrupt_fork_record_poisons_only_its_conversation(outbox: MemoryOutbox, fake) -> None:
    await outbox.capture_turn("run_child", "u", turn("c", "c"))
    await outbox.capture_turn("run_other", "u", turn("o", "o"))
    outbox.stores.fork_path("run_child").write_text("{broken")
    result = await outbox.sweep()
    assert any("run_child" in e and "forks/pending/run_child.json" in e for e in result.errors)
    assert contents(fake, "conv-run_other") == ["o", "o"]
    assert [r["conversationId"] for r in outbox.stores.read_outbox().records] == ["run_child"]
