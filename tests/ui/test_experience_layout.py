"""Layout: ``z`` zooms the focused pane and restores it; the pane strip is clickable; ``--layout``
overrides the size's choice (dashboard from 160x48)."""

from __future__ import annotations

from pathlib import Path

from services.clock import FakeClock
from services.workspace import Settings
from workbench.app import make_app

from .conftest import ready, settle


async def test_z_maximises_the_focused_pane_and_z_restores_it(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.press("4")
        await settle(pilot)
        assert not app.main.compact
        await pilot.press("z")
        await settle(pilot)
        assert app.main.maximized is app.main.pane("grants")
        await pilot.press("z")
        await settle(pilot)
        assert app.main.maximized is None


async def test_pane_strip_is_clickable(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        strip = app.main.query_one("#strip")
        spans = {title: start for start, _end, title in strip._spans}
        await pilot.click("#strip", offset=(spans["grants"] + 2, 0))
        await settle(pilot)
        assert app.main.active == "grants"


async def test_layout_option_overrides_the_terminal_size(tmp_path: Path) -> None:
    single = make_app(Settings(path=tmp_path / "a", clock=FakeClock()), layout="single")
    async with single.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        assert single.main.compact
    dashboard = make_app(Settings(path=tmp_path / "b", clock=FakeClock()), layout="dashboard")
    async with dashboard.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert not dashboard.main.compact
