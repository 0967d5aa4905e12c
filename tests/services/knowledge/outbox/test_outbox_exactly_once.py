"""Exactly once: a delivery made between a sweep's plan and its turn for that conversation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, OutboxSettings

from .conftest import contents, turn


class Interleave(httpx.AsyncBaseTransport):
    """The fake's transport, running ``action`` once before the first request ``when`` matches."""

    def __init__(self, inner: httpx.AsyncBaseTransport, when: Callable[[httpx.Request], bool],
                 action: Callable[[], Awaitable[object]]) -> None:
        self.inner = inner
        self.when = when
        self.action: Callable[[], Awaitable[object]] | None = action

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.action is not None and self.when(request):
            action, self.action = self.action, None
            await action()
        return await self.inner.handle_async_request(request)


async def test_a_delivery_between_the_sweep_plan_and_its_conversation_is_never_sent_again(
        root: Path, feed, fake: FakeHonchoService, clock) -> None:
    # A small delivered window, so the ledger alone cannot remember every record delivered.
    settings = OutboxSettings(delivered_batch_window=2)
    box: MemoryOutbox | None = None

    async def deliver_b() -> None:
        assert box is not None
        await box.deliver("run_b")  # the operator delivers run_b while the sweep is still on run_a

    transport = Interleave(fake.transport, lambda r: r.url.path.endswith("/sessions") and b"conv-run_a" in r.content,
                           deliver_b)
    box = await MemoryOutbox.open(root, feed, honcho_transport=transport, clock=clock, settings=settings)
    try:
        await box.capture_turn("run_a", "u", turn("a q", "a r"))
        texts = [f"b{i}" for i in range(5)]
        for text in texts:
            await box.capture_turn("run_b", "u", [{"role": "user", "text": text}])
        result = await box.sweep()  # plans run_b's five records, then establishes run_a (and run_b is delivered)
        assert transport.action is None  # the interleaved delivery did happen
        assert result.errors == []
        delivered = Counter(contents(fake, "conv-run_b"))
        assert delivered == Counter(texts)  # each exactly once
        assert contents(fake, "conv-run_a") == ["a q", "a r"]
        assert box.stores.read_outbox().records == []  # nothing accepted was lost
        assert box.stores.read_ledger("run_b")["deliveredTotal"] == 5
    finally:
        await box.aclose()


async def test_a_stale_plan_is_checked_against_the_delivered_marks(outbox: MemoryOutbox, fake) -> None:
    """``deliver_pending`` with a caller's earlier read: the marks written since win."""
    outbox.stores.settings = OutboxSettings(delivered_batch_window=1)
    for i in range(3):
        await outbox.capture_turn("run_c", "u", [{"role": "user", "text": f"c{i}"}])
    key = outbox.stores.outbox_key()
    planned = outbox.stores.read_outbox().records
    await outbox.deliver("run_c")
    again = await outbox.engine.deliver_pending("run_c", "u", candidates=planned, planned_key=key)
    assert again.delivered_records == 0
    assert contents(fake, "conv-run_c") == ["c0", "c1", "c2"]
