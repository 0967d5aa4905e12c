"""Snapshots of forking a run at a turn: the fork form over the runs pane (the turn cursor on turn 2 of
"garden plan"), and the fork's own stream once its first turn is answered (its parent and turn named
in the list, the info line and the carried messages). The sample world as ``test_panes`` has it.
Regenerate with ``pytest tests/snapshots/test_forks.py --snapshot-update`` and look at the pictures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from screens.widgets.stream import EventStream
from tests.snapshots.test_panes import snapshot_settings, tables_measured
from tests.ui.conftest import ready, settle, show_run
from workbench.app import make_app

GARDEN = "run_sample_garden"


async def _drawn(pilot: Any) -> None:
    pilot.app.main.query_one("#runs-stream", EventStream).flush()
    await settle(pilot, 5)
    await pilot.pause(0.1)
    await tables_measured(pilot)


async def _fork_form(pilot: Any) -> None:
    await ready(pilot)
    await show_run(pilot, GARDEN)
    await pilot.press("t", "t")
    await _drawn(pilot)
    await pilot.press("F")
    await settle(pilot)
    await pilot.pause(0.1)


async def _forked_stream(pilot: Any) -> None:
    ws = await ready(pilot)
    child = await ws.desk.fork_at(GARDEN, 2, "Can you email me the list instead?")
    await ws.desk.reply(child, "Emailed the list to you.")
    await show_run(pilot, child)
    await _drawn(pilot)


class TestFork:
    def test_fork_form(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=_fork_form)

    def test_forked_run_stream(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=_forked_stream)
