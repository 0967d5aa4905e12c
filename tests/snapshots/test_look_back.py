"""Snapshots of the filter bar's help (the pane's fields, and an unknown field refused), of two runs
compared side by side, and of a replay's diverging step in the same comparison screen. Regenerate with ``pytest tests/snapshots --snapshot-update`` and look first."""

from __future__ import annotations

from pathlib import Path
import asyncio
import json
from typing import Any

from textual.widgets import DataTable, Input

from tests.snapshots.test_panes import snapshot_settings, tables_measured
from tests.ui.conftest import ready, settle
from services.desk.diff import Comparison
from services.record import load_recording, replay, start_recording
from services.record.replay import comparison
from services.workspace import Workspace
from workbench.app import make_app
from workbench.recording import ReplayComparisonApp


def filtered(text: str):
    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("3", "slash")
        await settle(pilot)
        pilot.app.main.query_one("#runs-filter", Input).value = text
        await settle(pilot, 5)
        await tables_measured(pilot)
    return run_before


async def compared(pilot: Any) -> None:
    ws = await ready(pilot)
    await pilot.press("3")
    runs = pilot.app.main.pane("runs")
    first, second = sorted(v.id for v in ws.desk.runs() if not v.system)[:2]
    runs.select_key(first)
    await settle(pilot)
    await pilot.press("c")
    runs.select_key(second)
    await settle(pilot)
    await pilot.press("c")
    await settle(pilot, 5)
    await pilot.pause(0.1)


class TestFilterHelp:
    def test_fields(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=filtered("-status:idle person:ada"))

    def test_unknown_field(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=filtered("status:idle colour:red"))


class TestDiff:
    def test_two_runs(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=compared)


async def diverged(tmp_path: Path) -> Comparison:
    """A recording made with ``start_recording`` (a reply, then a revocation), altered so that the
    revocation's observation says a run settled and the grant was suspended, replayed to its divergence."""
    workspace = await Workspace.open(settings=snapshot_settings(tmp_path))
    path = tmp_path / "session.jsonl"
    try:
        run_id = next(v.id for v in workspace.desk.runs() if not v.system and v.status == "idle")
        recorder = await start_recording(path, workspace)
        await workspace.desk.reply(run_id, "Water the beds at seven", chunks=2)
        await workspace.desk.revoke("user:grace", "grant_removed")
        await recorder.stop()
    finally:
        await workspace.close()
    lines = path.read_text(encoding="ascii").splitlines()
    steps = [i for i, line in enumerate(lines) if json.loads(line).get("type") == "step"]
    replied = next(r for r in json.loads(lines[steps[0]])["observed"]["runs"] if r["id"] == run_id)
    last = steps[-1]
    step = json.loads(lines[last])
    step["observed"]["grants"]["user:grace"] = "suspended"
    step["observed"]["runs"].append({**replied, "status": "settled"})  # written as what changed: the run joins
    lines[last] = json.dumps(step)
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    report = await replay(load_recording(path), tmp_path / "replayed")
    found = comparison(report)
    assert found is not None and report.divergence is not None and report.divergence.step == step["n"]
    # the harvest judges on its own schedule: which judgments each side shows is not fixed, so the
    # picture leaves them out (tests/record/test_commands.py checks the rows as the replay made them)
    return Comparison(found.left, found.right, [r for r in found.rows if r.section != "judgments"], found.note)


class TestReplayInspect:
    def test_diverging_step(self, snap_compare: Any, tmp_path: Path) -> None:
        compared = asyncio.run(diverged(tmp_path))
        assert [compared.rows[i].section for i in compared.differences] == ["runs", "grants"]

        async def run_before(pilot: Any) -> None:
            await settle(pilot, 3)

        assert snap_compare(ReplayComparisonApp(compared), terminal_size=(120, 40), run_before=run_before)


async def looking_back(pilot: Any) -> None:
    """A reply made and a grant revoked, then time mode back a change at a time to before the revocation:
    the grant active again, the reply in the stream."""
    ws = await ready(pilot)
    run_id = next(v.id for v in ws.desk.runs() if not v.system and v.status == "idle")
    await ws.desk.reply(run_id, "Water the beds at seven", chunks=2)
    await ws.desk.revoke("user:grace", "grant_revoked")
    await ws.timeline.settled()
    await settle(pilot, 5)
    await pilot.press("H")
    await settle(pilot, 5)
    screen = pilot.app.screen
    for _ in range(40):
        grant = await screen.cursor.get("grant", "user:grace")
        if grant is not None and grant["state"] == "active":
            break
        await pilot.press("left_square_bracket")
        await settle(pilot)
    app = pilot.app
    stream = screen.query_one("#time-stream")
    stream.flush()  # the stream's queued lines in the list (its frame timer would move them a frame later)
    await settle(pilot)
    for _ in range(50):  # the time screen's tables measured their rows
        tables = list(app.screen.query(DataTable))
        if not any(t._require_update_dimensions or t._updated_cells for t in tables):
            break
        await settle(pilot, 1)
    await pilot.pause(0.1)


class TestTimeMode:
    def test_back_before_a_revocation(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(160, 48), run_before=looking_back)
