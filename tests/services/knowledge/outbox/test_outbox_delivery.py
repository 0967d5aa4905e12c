"""The delivery engine: establish, batches of <=100, chunked texts, faults and crash windows."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from services.knowledge.outbox import (
    CorruptLedgerError,
    HonchoRequestError,
    HonchoUnavailableError,
    MemoryOutbox,
    chunk_text,
)

from .conftest import contents, turn


class Crash(BaseException):
    """Stands for the process dying at a step (not an Exception, so nothing handles it)."""


async def test_establish_is_idempotent_and_offline_once_the_ledger_exists(outbox: MemoryOutbox, fake) -> None:
    ledger = await outbox.engine.establish("run_1", "user:o1")
    assert ledger["sessionId"] == "conv-run_1"
    assert set(fake.session_members("conv-run_1")) == {ledger["peerIds"]["user"], "assistant"}
    calls = len(fake.calls)
    again = await outbox.engine.establish("run_1", "user:o1")
    assert again == ledger
    assert len(fake.calls) == calls  # one ledger read, no network


async def test_delivery_flips_records_writes_marker_and_window(outbox: MemoryOutbox, fake, clock) -> None:
    first = await outbox.capture_turn("run_1", "u", turn("one", "uno"))
    second = await outbox.capture_turn("run_1", "u", turn("two", "dos"))
    result = await outbox.deliver("run_1")
    assert (result.delivered_records, result.delivered_messages) == (2, 4)
    assert contents(fake, "conv-run_1") == ["one", "uno", "two", "dos"]
    snapshot = outbox.stores.read_outbox()
    assert [r["status"] for r in snapshot.records] == ["delivered", "delivered"]
    ledger = outbox.stores.read_ledger("run_1")
    assert ledger["deliveredBatchIds"] == [first, second]
    assert ledger["turnCount"] == 2 and ledger["inflight"] == []
    assert [a["turn"] for a in ledger["anchors"]] == [1, 2]
    stored = fake.session_messages("conv-run_1")
    assert ledger["anchors"][1]["messageId"] == stored[-1]["id"]
    marker = json.loads(outbox.stores.last_delivery_path.read_text())
    assert marker == {"lastDeliveryAt": int(clock.time() * 1000), "batchId": second, "conversationId": "run_1"}
    assert outbox.representation("run_1").text.startswith("[fake Honcho representation]")
    again = await outbox.deliver("run_1")
    assert again.delivered_messages == 0 and len(contents(fake)) == 4


async def test_batches_hold_at_most_100_messages(outbox: MemoryOutbox, fake) -> None:
    many = [{"role": "user", "text": f"m{i}"} for i in range(250)]
    await outbox.capture_turn("run_1", "u", many)
    await outbox.capture_turn("run_1", "u", turn("after", "reply"))
    await outbox.deliver("run_1")
    posts = [path for method, path in fake.calls if path.endswith("/sessions/conv-run_1/messages")]
    assert len(posts) == 3
    assert contents(fake, "conv-run_1") == [f"m{i}" for i in range(250)] + ["after", "reply"]


async def test_long_texts_are_chunked_with_part_markers(outbox: MemoryOutbox, fake) -> None:
    text = "a" * 24_000 + "b" * 24_000 + "c" * 10
    await outbox.capture_turn("run_1", "u", [{"role": "assistant", "text": text}])
    await outbox.deliver("run_1")
    stored = contents(fake, "conv-run_1")
    assert [s[:11] for s in stored] == ["[Part 1/3] ", "[Part 2/3] ", "[Part 3/3] "]
    assert "".join(s[11:] for s in stored) == text
    assert all(len(s) <= 25_000 for s in stored)


@given(st.text(max_size=700), st.integers(min_value=100, max_value=300))
@hsettings(max_examples=60, deadline=None)
def test_chunks_rejoin_to_the_original(text: str, size: int) -> None:
    parts = chunk_text(text, size)
    if len(parts) == 1:
        assert parts == [text]
    else:
        n = len(parts)
        bodies = [p[len(f"[Part {i}/{n}] "):] for i, p in enumerate(parts, start=1)]
        assert all(len(b) <= size for b in bodies)
        assert "".join(bodies) == text


@pytest.mark.parametrize("fault", ["down", "503"])
async def test_memory_service_down_keeps_records_pending_then_delivers(outbox: MemoryOutbox, fake, fault,
                                                                     seen) -> None:
    await outbox.engine.establish("run_1", "u")
    batch = await outbox.capture_turn("run_1", "u", turn("keep me", "ok"))
    if fault == "down":
        fake.go_down()
    else:
        fake.fail_next(503, times=1)
    with pytest.raises(HonchoUnavailableError, match="503" if fault == "503" else "cannot reach Honcho"):
        await outbox.deliver("run_1")
    snapshot = outbox.stores.read_outbox()
    assert [(r["batchId"], r["status"]) for r in snapshot.records] == [(batch, "pending")]
    assert any(c.kind == "delivery.failed" for c in seen)
    fake.come_up()
    result = await outbox.deliver("run_1")
    assert result.delivered_records == 1
    assert contents(fake, "conv-run_1") == ["keep me", "ok"]


async def test_a_4xx_answer_is_a_request_error(outbox: MemoryOutbox, fake) -> None:
    await outbox.engine.establish("run_1", "u")
    await outbox.capture_turn("run_1", "u", turn("x", "y"))
    fake.fail_next(422)
    with pytest.raises(HonchoRequestError, match="422"):
        await outbox.deliver("run_1")
    assert outbox.stores.read_outbox().pending()


@pytest.mark.parametrize("step", ["sent", "ledger-written"])
async def test_crash_between_delivery_and_flip_never_duplicates(root, feed, fake, clock, step) -> None:
    def crash_at(name: str, conversation: str) -> None:
        if name == step:
            raise Crash(name)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, step_hook=crash_at)
    try:
        for i in range(3):
            await box.capture_turn("run_1", "u", turn(f"q{i}", f"a{i}"))
        with pytest.raises(Crash):
            await box.deliver("run_1")
    finally:
        await box.aclose()
    assert len(contents(fake, "conv-run_1")) == 6
    assert all(r["status"] == "pending" for r in box.stores.read_outbox().records)  # never flipped

    restarted = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock)
    try:
        result = await restarted.deliver("run_1")
        assert result.delivered_messages == 0
        assert contents(fake, "conv-run_1") == ["q0", "a0", "q1", "a1", "q2", "a2"]
        assert all(r["status"] == "delivered" for r in restarted.stores.read_outbox().records)
        ledger = restarted.stores.read_ledger("run_1")
        assert ledger["turnCount"] == 3 and ledger["inflight"] == []
    finally:
        await restarted.aclose()


async def test_crash_in_the_middle_of_a_record_sends_only_the_rest(root, feed, fake, clock) -> None:
    """A record split over two calls: the first call landed, then the process died."""
    calls = {"n": 0}

    def crash_after_first_post(name: str, conversation: str) -> None:
        if name == "sent":
            calls["n"] += 1
            if calls["n"] == 1:
                raise Crash(name)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock,
                                  step_hook=crash_after_first_post)
    try:
        await box.capture_turn("run_1", "u", [{"role": "user", "text": f"m{i}"} for i in range(150)])
        with pytest.raises(Crash):
            await box.deliver("run_1")
    finally:
        await box.aclose()
    assert len(contents(fake, "conv-run_1")) == 100
    restarted = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock)
    try:
        result = await restarted.deliver("run_1")
        assert (result.delivered_records, result.delivered_messages) == (1, 50)
        assert contents(fake, "conv-run_1") == [f"m{i}" for i in range(150)]
    finally:
        await restarted.aclose()


async def test_corrupt_ledger_is_a_clear_error_and_records_stay(outbox: MemoryOutbox, fake) -> None:
    await outbox.engine.establish("run_1", "u")
    batch = await outbox.capture_turn("run_1", "u", turn("precious", "reply"))
    outbox.stores.ledger_path("run_1").write_text('{"conversationId": "run_1", "anchors": [')
    with pytest.raises(CorruptLedgerError, match=r"state/ledger/run_1\.json"):
        await outbox.deliver("run_1")
    assert [r["batchId"] for r in outbox.stores.read_outbox().pending()] == [batch]
    assert contents(fake) == []


async def test_a_backlog_larger_than_the_window_is_delivered_in_flipped_rounds(root, feed, fake, clock) -> None:
    from services.knowledge.outbox import OutboxSettings

    rounds = {"n": 0}

    def crash_in_third_round(name: str, conversation: str) -> None:
        if name == "ledger-written":
            rounds["n"] += 1
            if rounds["n"] == 3:
                raise Crash(name)

    small = OutboxSettings(delivered_batch_window=4)
    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, settings=small,
                                  step_hook=crash_in_third_round)
    try:
        for i in range(10):
            await box.capture_turn("run_1", "u", [{"role": "user", "text": f"t{i}"}])
        with pytest.raises(Crash):
            await box.deliver("run_1")
        flipped = [r["status"] for r in box.stores.read_outbox().records]
        assert flipped == ["delivered"] * 4 + ["pending"] * 6  # two rounds of two flipped before the crash
    finally:
        await box.aclose()
    again = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, settings=small)
    try:
        result = await again.deliver("run_1")
        assert (result.delivered_records, result.flipped_without_send) == (4, 2)
        assert contents(fake, "conv-run_1") == [f"t{i}" for i in range(10)]
        ledger = again.stores.read_ledger("run_1")
        assert ledger["turnCount"] == 10 and len(ledger["deliveredBatchIds"]) == 4
        assert [m["metadata"]["turn"] for m in fake.session_messages("conv-run_1")] == list(range(1, 11))
    finally:
        await again.aclose()


async def test_a_sweep_crashing_before_its_marks_are_written_sends_nothing_twice(root, feed, fake, clock) -> None:
    """The sweep holds its delivered marks until the end; a crash before then loses only the marks."""
    def crash_at(name: str, conversation: str) -> None:
        if name == "ledger-written" and conversation == "run_3":
            raise Crash(name)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, step_hook=crash_at)
    try:
        for conv in ("run_1", "run_2", "run_3", "run_4"):
            await box.capture_turn(conv, "u", turn(f"{conv} q", f"{conv} a"))
        with pytest.raises(Crash):
            await box.sweep()
    finally:
        await box.aclose()
    sent = contents(fake)
    assert sent == ["run_1 q", "run_1 a", "run_2 q", "run_2 a", "run_3 q", "run_3 a"]
    assert all(r["status"] == "pending" for r in box.stores.read_outbox().records)  # no mark was written

    restarted = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock)
    try:
        result = await restarted.sweep()
        assert result.errors == [] and result.delivered_records == 1  # only run_4 was still to send
        assert contents(fake) == sent + ["run_4 q", "run_4 a"]
        assert restarted.stores.read_outbox().records == []
        assert (await restarted.status()).pending_total == 0
    finally:
        await restarted.aclose()
