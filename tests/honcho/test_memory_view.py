"""Pilot tests of the memory view (``M``): where memory goes, the header's badge when the Honcho
server refuses, and the keys: ``s`` sweeps now, ``r`` retries and ``d`` drops a quarantined line,
each after a confirmation that ``n`` declines without changing anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.honcho import FakeHonchoService
from services.served.honcho import HonchoServer
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import make_app

JS_LINE = json.dumps({"batchId": "b-js", "conversationId": 42, "owner": "alice", "status": "pending",
                      "createdAt": 1_764_000_000_000,
                      "messages": [{"role": "user", "peerId": "alice", "content": "set aside once"}]})


def write_quarantine(folder: Path, *raws: str) -> Path:
    path = folder / "memory" / "data" / "outbox" / "quarantine.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"quarantinedAt": 1_764_000_000_000, "line": i + 1, "reason": "old rules",
                                        "raw": raw}) + "\n" for i, raw in enumerate(raws)), encoding="utf-8")
    return path


def plain(app: Any, selector: str) -> str:
    return app.screen.query_one(selector).render().plain


@pytest.mark.long
async def test_memory_view_keys_sweep_retry_and_drop_with_confirmation(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    app = make_app(Settings(path=folder, clock=FakeClock()))
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        path = write_quarantine(folder, "{not json", JS_LINE)
        await pilot.press("M")
        await settle(pilot)
        assert app.screen.id == "memory"
        assert "embedded fake Honcho" in plain(app, "#memory-where")
        assert app.screen.query_one("#memory-quarantine").row_count == 2
        app.screen.query_one("#memory-quarantine").focus()

        await pilot.press("down", "r")  # the JavaScript line, which now reads
        await settle(pilot)
        assert type(app.screen).__name__ == "ConfirmDialog"
        await pilot.press("n")
        await settle(pilot)
        assert path.read_text(encoding="utf-8").count("\n") == 2  # declined: nothing changed

        await pilot.press("r")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert [q.raw for q in await ws.outbox.quarantined()] == ["{not json"]
        assert any(r["batchId"] == "b-js" for r in ws.outbox.stores.read_outbox().pending())

        app.screen.query_one("#memory-quarantine").focus()
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert await ws.outbox.quarantined() == []
        assert "{not json" in (path.parent / "dropped.jsonl").read_text(encoding="utf-8")

        await pilot.press("s")
        await settle(pilot)
        assert "set aside once" in [m["content"] for m in ws.outbox.fake_honcho.all_messages()]
        assert ws.outbox.stores.read_outbox().pending() == []
        assert "42" in [str(k.value) for k in app.screen.query_one("#memory-conversations").rows]

        await pilot.press("escape")
        await settle(pilot)
        assert app.screen.id == "main"


async def test_header_shows_where_memory_goes_and_a_refusing_server_is_a_badge(tmp_path: Path) -> None:
    service = FakeHonchoService()
    server = HonchoServer(service, "127.0.0.1", 0, prefix="/honcho")
    await server.start()
    folder = tmp_path / "ws"
    app = make_app(Settings(path=folder, clock=FakeClock(), honcho_url=server.url, honcho_workspace_id="team"))
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            ws = await ready(pilot)
            app.main.update_badges()
            await settle(pilot)
            assert f"memory → {server.url} (workspace team)" in plain(app, "#badges")
            assert "not delivered" not in plain(app, "#badges")

            await ws.outbox.capture_turn("conv-9", "alice", [{"role": "user", "text": "kept while refused"}])
            service.fail_next(401, times=50)
            await pilot.press("M")
            await settle(pilot)
            await pilot.press("s")
            await settle(pilot)
            assert "unreachable" in plain(app, "#memory-where") and "401" in plain(app, "#memory-where")
            pending = (await ws.outbox.status()).pending_total
            assert pending >= 1
            await ws.outbox.capture_turn("conv-9", "alice", [{"role": "user", "text": "and still captured"}])
            assert (await ws.outbox.status()).pending_total == pending + 1
            await pilot.press("escape")
            app.main.update_badges()
            await settle(pilot)
            assert "⚠ memory not delivered" in plain(app, "#badges") and "401" in plain(app, "#badges")

            service.come_up()
            await ws.outbox.sweep()
            app.main.update_badges()
            await settle(pilot)
            assert "not delivered" not in plain(app, "#badges")
            contents = [m["content"] for m in service.all_messages("team")]
            assert "kept while refused" in contents and "and still captured" in contents
    finally:
        await server.stop()


async def test_memory_view_shows_what_the_memory_service_holds_and_searches_it(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    app = make_app(Settings(path=folder, clock=FakeClock()))
    async with app.run_test(size=(160, 60)) as pilot:
        ws = await ready(pilot)
        await ws.outbox.capture_turn("conv-bees", "alice", [{"role": "user", "text": "I keep zymurgic bees on the roof"},
                                                            {"role": "assistant", "text": "How many hives?"}])
        await ws.outbox.capture_turn("conv-tea", "bob", [{"role": "user", "text": "Tea at five \x1b[31m"}])
        await ws.outbox.sweep()
        await pilot.press("M")
        await settle(pilot)
        screen = app.screen
        sessions = screen.query_one("#memory-sessions")
        ids = {str(k.value) for k in sessions.rows}
        assert {ws.outbox.stores.read_ledger(c)["sessionId"] for c in ("conv-bees", "conv-tea")} <= ids
        assert f"{len(ids)} sessions" in plain(app, "#memory-held-where")
        peers = [str(k.value) for k in screen.query_one("#memory-peers").rows]
        assert "assistant" in peers
        shown = [screen.query_one("#memory-messages").get_row_at(i)[2].plain
                 for i in range(screen.query_one("#memory-messages").row_count)]
        assert shown and all("\x1b" not in s for s in shown)  # untrusted text shown sanitised
        assert "fake Honcho representation" in plain(app, "#memory-peer-representation")
        await pilot.press("slash")
        await pilot.press(*"zymurgic", "enter")
        await settle(pilot)
        found = screen.query_one("#memory-found")
        assert found.row_count == 1 and "zymurgic bees" in found.get_row_at(0)[3].plain
        screen.query_one("#memory-sessions").focus()
        await pilot.press("down")
        await settle(pilot)
        assert screen.held.session_id == str(list(sessions.rows)[1].value)
        app.save_screenshot("memory-held.svg", str(tmp_path))
