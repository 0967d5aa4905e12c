"""Snapshots of each pane at 120x40 and 80x24 (and the dashboard at 160x48) on the sample world.

The clock is fake and the sample world's ids are fixed, so the screens are deterministic.
Regenerate with ``pytest tests/snapshots --snapshot-update`` and look at the SVGs before committing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from screens.widgets.stream import EventStream
from services.clock import FakeClock
from services.workspace import Settings
from tests.ui.conftest import ready, settle
from workbench.app import make_app

PANES = {"canvas": "1", "inbox": "2", "runs": "3", "grants": "4", "judgments": "5"}


def shot(key: str):
    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press(key)
        await settle(pilot)
        pilot.app.main.query_one("#runs-stream", EventStream).flush()
        await settle(pilot, 5)
        await pilot.pause(0.1)
    return run_before


class TestPanes:
    @pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
    @pytest.mark.parametrize("pane", list(PANES))
    def test_pane(self, snap_compare: Any, tmp_path: Path, pane: str, size: tuple[int, int]) -> None:
        app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
        assert snap_compare(app, terminal_size=size, run_before=shot(PANES[pane]))


class TestDashboard:
    def test_dashboard(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
        assert snap_compare(app, terminal_size=(160, 48), run_before=shot("3"))
