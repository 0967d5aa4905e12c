"""Snapshots of the filter bar's help (the pane's fields, and an unknown field refused) and of two runs
compared side by side. Regenerate with ``pytest tests/snapshots --snapshot-update`` and look first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Input

from tests.snapshots.test_panes import snapshot_settings, tables_measured
from tests.ui.conftest import ready, settle
from workbench.app import make_app


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
