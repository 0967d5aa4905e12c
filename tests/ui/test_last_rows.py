"""The last known rows: a reopened window draws what its panes showed when it was last left, marked
as from before, until the live state replaces them; a key meant for a pane meanwhile is refused in
words and nothing is done to a row drawn from before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual import work
from textual.widgets import Static

from screens.dialogs import ConfirmDialog
from screens.snapshot import SNAPSHOT_FILE, read_snapshot
from screens.widgets.badges import BadgeBar
from services.workspace import Settings, Workspace
from tests.toasts import said
from workbench.app import WorkbenchApp, make_app

from .conftest import ready, settle


async def held(pilot) -> None:  # type: ignore[no-untyped-def]
    """Let queued messages run while the open is held (``settle`` would wait for the held worker)."""
    for _ in range(5):
        await pilot.pause()


class HeldOpen(WorkbenchApp):
    """The real App whose Workspace opens only when the test lets it (``gate``)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings=settings)
        self.gate = asyncio.Event()

    @work(group="workspace", exclusive=True, exit_on_error=False)
    async def open_workspace(self) -> None:
        await self.gate.wait()
        self._attach_workspace(await Workspace.open(settings=self.settings))


async def _leave_once(settings: Settings) -> list[tuple[str, str]]:
    """Open the folder, quit with ``q`` (the snapshot is kept then); the runs it showed."""
    app = make_app(settings)
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        runs = [(run.id, run.name) for run in ws.desk.runs()]
        await pilot.press("q")
        await settle(pilot)
    return runs


async def test_a_reopened_window_draws_the_last_rows_marked_and_refuses_a_pane_key_until_live(
        settings: Settings) -> None:
    runs = await _leave_once(settings)
    kept = read_snapshot(settings.path)
    assert kept is not None and any("runs" in line for line in kept.panes["runs"])

    app = HeldOpen(settings)
    async with app.run_test(size=(160, 48)) as pilot:
        await held(pilot)
        main = app.main
        assert main.stale and app.workspace is None
        badges = main.query_one("#badges", BadgeBar)
        assert badges.status.startswith("as of ") and badges.status.endswith("opening…")
        drawn = str(main.query_one("#runs .pane-snapshot", Static).render())
        assert any(name and name[:10] in drawn for _, name in runs)  # the rows from before, drawn
        for _ in range(100):  # the panes are built behind those rows meanwhile
            if main.placed and main.pane("runs").built:
                break
            await pilot.pause(0.02)
        runs_pane = main.pane("runs")
        assert runs_pane.has_class("-stale") and runs_pane.workspace is None
        await pilot.press("3", "d")  # delete the selected run: meant for a row drawn from before
        await held(pilot)
        assert any(text.startswith("Not done: the panes show the rows as of") for text in said(app))
        runs_pane.focus_main()  # a pane's own binding, on its hidden table: refused the same way
        await pilot.press("d")
        await held(pilot)
        assert sum(text.startswith("Not done: the panes show the rows as of") for text in said(app)) == 2
        app.gate.set()
        ws = await ready(pilot)
        assert not main.stale and not badges.status.startswith("as of") and not main.query(".pane-snapshot")
        assert main.placed and main.pane("runs").workspace is ws
        live = {run.id for run in ws.desk.runs() if run.status != "deleted"}
        assert {run_id for run_id, name in runs if not (name or "").startswith("okf judgment")} <= live
        assert not isinstance(app.screen, ConfirmDialog)  # nothing was asked about a row from before
        assert not any("delete" in text.lower() for text in said(app))


async def test_a_new_folder_draws_no_rows_from_before(settings: Settings) -> None:
    app = HeldOpen(settings)
    async with app.run_test(size=(160, 48)) as pilot:
        await held(pilot)
        assert not app.main.stale and app.main.snapshot is None
        assert app.main.query_one("#badges", BadgeBar).status == "opening the workspace…"
        app.gate.set()
        await ready(pilot)


async def test_hostile_or_damaged_snapshots_are_drawn_plain_or_not_at_all(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / SNAPSHOT_FILE
    for damaged in ("{", "[]", '{"version": 2, "at": 1, "panes": {}}', '{"version": 1, "at": "x", "panes": {}}',
                    '{"version": 1, "at": 1, "panes": {"runs": [1, 2]}}'):
        path.write_text(damaged, encoding="utf-8")
        assert read_snapshot(folder) is None, damaged
    path.write_text(json.dumps({"version": 1, "at": 0, "badges": {"waiting": 2, "judgments": -1, "x": 3},
                                "panes": {"runs": [" 3  runs", "[bold red]run\x1b[2J\u202e"]}}), encoding="utf-8")
    kept = read_snapshot(folder)
    assert kept is not None and kept.badges == {"waiting": 2}
    assert "\x1b" not in kept.panes["runs"][1] and "\u202e" not in kept.panes["runs"][1]
    app = HeldOpen(Settings(path=folder))
    async with app.run_test(size=(160, 48)) as pilot:
        await held(pilot)
        drawn = app.main.query_one("#runs .pane-snapshot", Static).render()
        assert "[bold red]run" in str(drawn)  # drawn as written, never parsed as markup
        assert app.main.query_one("#badges", BadgeBar).waiting == 2
        app.gate.set()
        await ready(pilot)
