"""Times as the panes show them: formatted from the read models' float seconds, never from a raw stamp.

The memory view shows a quarantined line's time (kept in milliseconds on disk) as a date and time;
an unusable stamp shows as ``?`` and the view still draws. A run's event detail (``o``) shows the
event as the wire reads it, its time an ISO string again.
"""

from __future__ import annotations

import json
from pathlib import Path

from services.clock import FakeClock
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import make_app


async def test_stored_times_show_formatted_and_an_unusable_one_never_stops_the_view(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    app = make_app(Settings(path=folder, clock=FakeClock()))
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        quarantine = ws.outbox.stores.quarantine_path
        quarantine.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"quarantinedAt": 1_764_000_000_000, "line": 1, "reason": "old rules", "raw": "{a"},
                 {"quarantinedAt": "last tuesday", "line": 2, "reason": "old rules", "raw": "{b"}]
        quarantine.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        before = quarantine.read_bytes()
        await pilot.press("M")
        await settle(pilot)
        table = app.screen.query_one("#memory-quarantine")
        shown = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert shown == ["2025-11-24 16:00:00", "?"]
        assert quarantine.read_bytes() == before  # shown, never rewritten

        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        run = ws.desk.detail(app.main.query_one("#runs").selected)
        await pilot.press("o")
        await settle(pilot)
        body = app.screen.query_one("#detail-body").render().plain
        wire = ws.cloud.runs.get(run.id).events[-1]
        assert json.loads(body)["at"] == wire["at"] and isinstance(wire["at"], str)
