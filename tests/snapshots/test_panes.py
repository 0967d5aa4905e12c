"""Snapshots of each pane at 120x40 and 80x24 (and the dashboard at 160x48) on the sample world.

The clock is fake and the sample world's ids are fixed. The world is the bundled sample with its
runs left unsettled: a settled run becomes an OKF judgment in the background, and whether that
has happened when the picture is taken is a race, so the snapshot world leaves it out.
Regenerate with ``pytest tests/snapshots --snapshot-update`` and look at the SVGs before committing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from assets import ASSETS_DIR
from screens.widgets.stream import EventStream
from services.clock import FakeClock
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import make_app

PANES = {"canvas": "1", "inbox": "2", "runs": "3", "grants": "4", "judgments": "5"}


def snapshot_settings(tmp_path: Path) -> Settings:
    world = json.loads((ASSETS_DIR / "sample" / "world.json").read_text("utf-8"))
    for run in world.get("runs", []):
        run["script"] = [step for step in run.get("script", []) if "settle" not in step]
    path = tmp_path / "world.json"
    path.write_text(json.dumps(world), encoding="utf-8")
    return Settings(path=tmp_path / "ws", clock=FakeClock(), world=path)


def shot(key: str):
    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press(key)
        await settle(pilot)
        pilot.app.main.query_one("#runs-stream", EventStream).flush()
        await settle(pilot, 5)
        await pilot.pause(0.1)
        await tables_measured(pilot)
    return run_before


async def tables_measured(pilot: Any) -> None:
    """Wait until no worker runs and every table measured its new rows (a table sizes its columns
    when idle: a picture taken before that shows squeezed columns), then repaint from scratch."""
    app = pilot.app
    for _ in range(50):
        tables = list(app.main.query(DataTable))
        busy = any(w.is_running for w in app.workers) or any(
            t._require_update_dimensions or t._updated_cells for t in tables)  # DataTable keeps no public flag
        if not busy:
            break
        await settle(pilot, 1)
    for table in app.main.query(DataTable):
        table.refresh()
    await pilot.pause(0.1)


class TestPanes:
    @pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
    @pytest.mark.parametrize("pane", list(PANES))
    def test_pane(self, snap_compare: Any, tmp_path: Path, pane: str, size: tuple[int, int]) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=size, run_before=shot(PANES[pane]))


class TestDashboard:
    def test_dashboard(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(160, 48), run_before=shot("3"))
