"""Snapshots of two steps of the demo, as its pictures show them: the five panes whole and titled with
their counts, the caption, and (after the reply) what the step said, narrated under the caption.

The clock is fake, so times and ages are fixed. The tour stops at the step pictured.
Regenerate with ``pytest tests/snapshots --snapshot-update -k demo`` and look at the SVGs before committing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from screens.widgets.stream import EventStream
from services.clock import FakeClock
from services.workspace import Settings
from workbench.demo import DemoApp, DemoStep, load_walkthrough


class DemoAt(DemoApp):
    """The demo, paused once the step ``stop_at`` is drawn."""

    def __init__(self, path: Path, stop_at: str) -> None:
        super().__init__(Settings(path=path, clock=FakeClock()), steps=load_walkthrough(), speed=float("inf"))
        self.stop_at = stop_at
        """The step pictured."""

    async def step_shown(self, number: int, step: DemoStep) -> None:
        await super().step_shown(number, step)
        if step.id == self.stop_at:
            self.paused = True


def at_step(step: str):
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        for _ in range(600):  # the tour's worker waits while paused: wait on its steps, not on workers
            await pilot.pause(0.05)
            if step in app.completed:
                break
        assert step in app.completed, app.failures
        for _ in range(50):
            tables = list(app.main.query(DataTable))
            others = [w for w in app.workers if w.group != "demo" and w.is_running]
            if not others and not any(t._require_update_dimensions or t._updated_cells for t in tables):
                break
            await pilot.pause(0.05)
        app.main.query_one("#runs-stream", EventStream).flush()
        for table in app.main.query(DataTable):
            table.refresh()
        await pilot.pause(0.2)
    return run_before


class TestDemoSteps:
    def test_demo_welcome(self, snap_compare: Any, tmp_path: Path) -> None:
        assert snap_compare(DemoAt(tmp_path / "ws", "welcome"), terminal_size=(160, 48), run_before=at_step("welcome"))

    def test_demo_reply(self, snap_compare: Any, tmp_path: Path) -> None:
        assert snap_compare(DemoAt(tmp_path / "ws", "reply"), terminal_size=(160, 48), run_before=at_step("reply"))
