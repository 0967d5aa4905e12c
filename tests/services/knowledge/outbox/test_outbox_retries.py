"""A sweep's own retries (Retry-After, 429, 5xx, unreachable), lost sessions, and capture times."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest

from services.clock import iso
from services.honcho import FakeHonchoService
from services.knowledge.outbox import (
    HonchoClient,
    HonchoRateLimitedError,
    HonchoRequestError,
    HonchoUnavailableError,
    MemoryOutbox,
    OutboxSettings,
)
from services.knowledge.outbox.retry import parse_retry_after

from .conftest import WaitsClock, advancing, contents, turn


async def _open(root: Path, feed, transport: httpx.AsyncBaseTransport, clock: WaitsClock,
                **knobs: float) -> MemoryOutbox:
    return await MemoryOutbox.open(root, feed, honcho_transport=transport, clock=clock,
                                   settings=OutboxSettings(**knobs))  # type: ignore[arg-type]


async def test_429_is_transient_and_its_retry_after_seconds_are_honoured(outbox: MemoryOutbox, fake, clock,
                                                                         seen) -> None:
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    fake.fail_next(429, retry_after=7)
    result = await advancing(clock, outbox.sweep())
    assert result.errors == [] and result.retries == 1 and result.delivered_records == 1
    assert clock.waits == [7.0]
    assert contents(fake) == ["q", "a"]
    assert [c.data["delay_s"] for c in seen if c.kind == "sweep.retrying"] == [7.0]


async def test_retry_after_as_an_http_date_is_honoured_and_capped(root: Path, feed, fake, clock) -> None:
    box = await _open(root, feed, fake.transport, clock, retry_after_cap_s=100, retry_budget_s=1000)
    try:
        await box.capture_turn("run_a", "u", turn("q", "a"))
        fake.fail_next(503, retry_after=formatdate(clock.time() + 42, usegmt=True))
        fake.fail_next(429, retry_after=formatdate(clock.time() + 42 + 3600, usegmt=True))  # an hour: capped
        fake.fail_next(429, retry_after="soon, maybe")  # unusable: the backoff applies (third try: 4 s)
        result = await advancing(clock, box.sweep())
        assert result.errors == [] and result.delivered_records == 1
        assert clock.waits == [42.0, 100.0, 4.0]
    finally:
        await box.aclose()


async def test_5xx_is_retried_with_capped_exponential_backoff(root: Path, feed, fake, clock) -> None:
    box = await _open(root, feed, fake.transport, clock, retry_attempts=5, retry_base_s=1, retry_max_delay_s=3)
    try:
        await box.capture_turn("run_a", "u", turn("q", "a"))
        fake.fail_next(500, times=2)
        fake.fail_next(502, times=2)
        result = await advancing(clock, box.sweep())
        assert result.errors == [] and result.retries == 4
        assert clock.waits == [1.0, 2.0, 3.0, 3.0]
        assert contents(fake) == ["q", "a"]
    finally:
        await box.aclose()


class Unreachable(httpx.AsyncBaseTransport):
    """The fake's transport behind a network that drops the first ``times`` requests."""

    def __init__(self, inner: httpx.AsyncBaseTransport, times: int) -> None:
        self.inner = inner
        self.times = times

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.times > 0:
            self.times -= 1
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)


async def test_transport_errors_are_retried_inside_the_sweep(root: Path, feed, fake, clock) -> None:
    box = await _open(root, feed, Unreachable(fake.transport, times=2), clock)
    try:
        await box.capture_turn("run_a", "u", turn("q", "a"))
        result = await advancing(clock, box.sweep())
        assert result.errors == [] and result.retries == 2 and clock.waits == [1.0, 2.0]
        assert contents(fake) == ["q", "a"]
    finally:
        await box.aclose()


async def test_a_wrong_request_is_not_retried_and_nothing_is_lost(outbox: MemoryOutbox, fake, clock) -> None:
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    fake.fail_next(422, times=2)  # the establish and the delivery's establish
    result = await outbox.sweep()  # would hang on the fake clock if it waited
    assert result.retries == 0 and clock.waits == [] and any("422" in e for e in result.errors)
    assert len(outbox.stores.read_outbox().pending()) == 1


async def test_the_retry_budget_bounds_one_sweeps_waiting(root: Path, feed, fake, clock) -> None:
    box = await _open(root, feed, fake.transport, clock, retry_attempts=10, retry_budget_s=10)
    try:
        for conv in ("run_a", "run_b"):
            await box.capture_turn(conv, "u", turn("q", "a"))
        fake.go_down()
        result = await advancing(clock, box.sweep())
        assert sum(clock.waits) <= 10 and clock.waits == [1.0, 2.0, 4.0]  # the next (8 s) would overspend
        assert len(box.stores.read_outbox().pending()) == 2
        fake.come_up()
        assert (await box.sweep()).delivered_records == 2
        assert result.errors
    finally:
        await box.aclose()


async def test_a_session_deleted_on_the_server_is_established_again(outbox: MemoryOutbox, fake, seen) -> None:
    """As in Honcho, the next batch's messages create the session again, with their authors as members."""
    await outbox.capture_turn("run_a", "u", turn("first", "1"))
    await outbox.sweep()
    fake.delete_session("conv-run_a")
    await outbox.capture_turn("run_a", "u", turn("second", "2"))
    result = await outbox.sweep()
    assert result.errors == [] and result.delivered_records == 1
    assert contents(fake, "conv-run_a") == ["second", "2"]  # what was delivered before the loss is not resent
    assert outbox.stores.read_ledger("run_a")["sessionId"] == "conv-run_a"
    assert outbox.stores.read_outbox().records == []
    assert set(fake.session_members("conv-run_a")) == set(outbox.stores.read_ledger("run_a")["peerIds"].values())
    # The direct delivery path repairs it the same way.
    fake.delete_session("conv-run_a")
    await outbox.capture_turn("run_a", "u", turn("third", "3"))
    assert (await outbox.deliver("run_a")).delivered_records == 1
    assert contents(fake, "conv-run_a") == ["third", "3"]


async def test_a_session_deleted_mid_flight_resends_only_what_it_lost(outbox: MemoryOutbox, fake) -> None:
    """In-flight batches of a lost session are sent again whole: the new session has none of them."""
    await outbox.capture_turn("run_a", "u", turn("first", "1"))
    await outbox.sweep()
    ledger = outbox.stores.read_ledger("run_a")
    batch = await outbox.capture_turn("run_a", "u", turn("second", "2"))
    outbox.stores.write_ledger({**ledger, "inflight": [batch]})  # a crash after a send, before the count
    fake.delete_session("conv-run_a")
    assert (await outbox.deliver("run_a")).delivered_records == 1
    assert contents(fake, "conv-run_a") == ["second", "2"]


async def test_messages_carry_their_capture_time(outbox: MemoryOutbox, fake, clock) -> None:
    captured = clock.time()
    await outbox.capture_turn("run_a", "u", turn("q", "a"))
    clock.advance(3600)  # delivered an hour later
    await outbox.sweep()
    stamps = [datetime.fromisoformat(m["created_at"]) for m in fake.all_messages()]
    # The fake stamps a message without created_at with the wall clock; these carry the capture time.
    assert stamps == [datetime.fromtimestamp(captured, tz=timezone.utc)] * 2


async def test_the_fake_keeps_created_at_and_refuses_a_bad_one(fake: FakeHonchoService) -> None:
    client = HonchoClient("w", transport=fake.transport)
    try:
        await client.get_or_create_session("s", {})
        [kept] = await client.add_messages("s", [{"content": "x", "peer_id": "p",
                                                  "created_at": iso(1_700_000_000)}])
        assert datetime.fromisoformat(kept["created_at"]).timestamp() == 1_700_000_000
        with pytest.raises(HonchoRequestError, match="422.*valid datetime"):
            await client.add_messages("s", [{"content": "x", "peer_id": "p", "created_at": "yesterday"}])
    finally:
        await client.aclose()


async def test_client_classes_429_408_and_5xx_as_transient(fake: FakeHonchoService) -> None:
    client = HonchoClient("w", transport=fake.transport)
    try:
        fake.fail_next(429, retry_after=3)
        with pytest.raises(HonchoRateLimitedError) as limited:
            await client.ensure_workspace()
        assert limited.value.transient and limited.value.retry_after == "3" and limited.value.status == 429
        for status in (408, 500, 503):
            fake.fail_next(status)
            with pytest.raises(HonchoUnavailableError) as down:
                await client.ensure_workspace()
            assert down.value.transient
        fake.fail_next(400)
        with pytest.raises(HonchoRequestError) as wrong:
            await client.ensure_workspace()
        assert not wrong.value.transient
    finally:
        await client.aclose()


def test_retry_after_parsing() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after("-4", now) == 0.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now) == 30.0
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now) == 0.0
    for unusable in (None, "", "soon", "inf", "nan"):
        assert parse_retry_after(unusable, now) is None
