"""The demo: what a toast would say is narrated under the caption (no toast covers a pane), quitting early is a normal end (status 0), and a
headless run goes at full speed unless ``--speed`` is given."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._toast import Toast

from screens.widgets.caption import CaptionBar
from services.workspace import Settings
from workbench.cli import build_parser
from workbench.demo import DemoApp, demo_speed, demo_status, load_walkthrough


def test_headless_runs_at_full_speed_unless_speed_is_given() -> None:
    assert build_parser().parse_args(["demo", "--headless"]).speed is None
    assert demo_speed(None, headless=True) == float("inf")
    assert 4.0 / demo_speed(None, headless=True) == 0.0  # no narration pacing is waited out
    assert demo_speed(None, headless=False) == 1.0
    assert demo_speed(2.0, headless=True) == 2.0

async def test_quitting_early_exits_0_and_toasts_are_narrated_under_the_caption(tmp_path: Path) -> None:
    steps = load_walkthrough()
    app = DemoApp(Settings(path=tmp_path / "ws"), steps=steps, speed=0.001)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        for _ in range(400):  # the viewer steps with → (the pace is slow)
            await pilot.pause(0.05)
            if len(app.completed) >= 2:
                break
            if app.completed:
                await pilot.press("right")
        assert len(app.completed) >= 2, app.failures
        app.notify("a toast during the tour", timeout=30)
        for _ in range(5):  # the tour's own worker never completes mid-tour: pause, not settle
            await pilot.pause(0.05)
        caption = app.main.query_one("#caption", CaptionBar)
        assert not list(app.screen.query(Toast))  # no toast covers the panes or the narration
        assert caption.said[-1] == ("a toast during the tour", "information")
        assert "said: " in caption.render().plain and caption.region.height >= 3
        await pilot.press("q")
    assert len(app.completed) < len(steps)
    assert demo_status(app, headless=False) == 0
    assert not app.failures
