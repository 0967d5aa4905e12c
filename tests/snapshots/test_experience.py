"""Snapshots of the operator's screens: the key help, the read-only header, and a zoomed pane.

Regenerate with ``pytest tests/snapshots --snapshot-update`` and look at the SVGs (as PNGs) before committing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.ui.conftest import settle
from workbench.app import make_app

from .test_panes import shot, snapshot_settings


def then(key: str, *more: str):
    first = shot(key)

    async def run_before(pilot: Any) -> None:
        await first(pilot)
        if more:
            await pilot.press(*more)
            await settle(pilot)
            await pilot.pause(0.1)
    return run_before


class TestExperience:
    def test_help_screen(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path))
        assert snap_compare(app, terminal_size=(120, 40), run_before=then("3", "question_mark"))

    def test_read_only_header(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path), read_only=True)
        assert snap_compare(app, terminal_size=(120, 40), run_before=then("4"))

    def test_maximised_pane(self, snap_compare: Any, tmp_path: Path) -> None:
        app = make_app(snapshot_settings(tmp_path), layout="dashboard")
        assert snap_compare(app, terminal_size=(160, 48), run_before=then("3", "z"))
