"""Snapshot of the canvas pane's boot context (``b``) for Ada's node "garden plan" on the sample world.

Regenerate with ``pytest tests/snapshots --snapshot-update -k boot_context`` and look at the SVG (as a PNG).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.ui.conftest import ready, settle
from workbench.app import make_app

from .test_panes import snapshot_settings


def boot_context_of(node: str):
    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        await pilot.press("1")
        pane = pilot.app.main.pane("canvas")
        pane.select_key(node)
        await settle(pilot)
        pane.focus_main()
        await pilot.press("b")
        await settle(pilot, 5)
        await pilot.pause(0.1)
    return run_before


class TestDelivery:
    def test_boot_context(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=boot_context_of("run_sample_garden"))
