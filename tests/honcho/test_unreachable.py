"""A workspace's memory pointed at a served Honcho: an unreachable or refusing server is a reason
the outbox keeps (the header's badge), captures keep accumulating, and they are all delivered
once the server is back."""

from __future__ import annotations

from pathlib import Path

from services.changes import ChangeFeed
from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, OutboxSettings
from services.served.honcho import HonchoServer

FAST = OutboxSettings(workspace_id="w", retry_attempts=2, retry_base_s=0.01, retry_max_delay_s=0.02,
                      retry_budget_s=0.5, representation_cache=False)


async def capture(box: MemoryOutbox, text: str) -> None:
    await box.capture_turn("c1", "alice", [{"role": "user", "text": text}])


async def test_unreachable_memory_server_is_a_reason_and_captures_accumulate_until_it_returns(
        tmp_path: Path) -> None:
    service = FakeHonchoService()
    server = HonchoServer(service, "127.0.0.1", 0, prefix="/honcho")
    port, url = server.port, server.url
    box = await MemoryOutbox.open(tmp_path / "memory", ChangeFeed(), base_url=url, api_key="k", settings=FAST)
    try:
        assert box.destination == f"{url} (workspace w)" and box.unreachable is None
        await capture(box, "first, while nothing listens")
        await box.sweep()
        assert box.unreachable is not None and "cannot reach Honcho" in box.unreachable
        await capture(box, "second, still down")
        await box.sweep()
        assert (await box.status()).pending_total == 2

        server = HonchoServer(service, "127.0.0.1", port, prefix="/honcho")
        await server.start()
        await capture(box, "third, server back")
        result = await box.sweep()
        assert result.delivered_records == 3 and box.unreachable is None
        assert [m["content"] for m in service.all_messages("w")] == [
            "first, while nothing listens", "second, still down", "third, server back"]
    finally:
        await box.aclose()
        await server.stop()


async def test_refusing_memory_server_is_a_reason_and_nothing_is_dropped(tmp_path: Path) -> None:
    service = FakeHonchoService()
    server = HonchoServer(service, "127.0.0.1", 0)
    await server.start()
    box = await MemoryOutbox.open(tmp_path / "memory", ChangeFeed(), base_url=server.url, api_key="bad",
                                  settings=FAST)
    try:
        await capture(box, "kept while refused")
        service.fail_next(401, times=2)  # the establish, then the delivery's own
        await box.sweep()
        assert box.unreachable is not None and "401" in box.unreachable
        assert (await box.status()).pending_total == 1
        await box.sweep()
        assert box.unreachable is None and [m["content"] for m in service.all_messages("w")] == ["kept while refused"]
    finally:
        await box.aclose()
        await server.stop()
