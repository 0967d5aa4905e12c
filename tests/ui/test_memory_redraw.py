"""The memory view redraws every 2 s: the quarantine's cursor stays on the line the operator chose,
so ``r`` and ``d`` act on that line and not on the first one."""

from __future__ import annotations

import json
from pathlib import Path

from services.clock import FakeClock
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import make_app


async def test_a_redraw_keeps_the_cursor_on_the_chosen_quarantined_line(tmp_path: Path) -> None:
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        quarantine = ws.outbox.stores.quarantine_path
        quarantine.parent.mkdir(parents=True, exist_ok=True)
        quarantine.write_text("".join(json.dumps({"quarantinedAt": 1_764_000_000_000, "line": i, "reason": "old rules",
                                                  "raw": f"{{bad {i}"}) + "\n" for i in range(3)), encoding="utf-8")
        await pilot.press("M")
        await settle(pilot)
        table = app.screen.query_one("#memory-quarantine")
        table.focus()
        await pilot.press("down", "down")
        assert table.cursor_row == 2
        app.screen.reload()  # what the 2 s timer does
        await settle(pilot)
        assert table.row_count == 3 and table.cursor_row == 2
        assert app.screen.selected_line().raw == "{bad 2"
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert [q.raw for q in await ws.outbox.quarantined()] == ["{bad 0", "{bad 1"]
