"""The garbage collector is held off while a window opens its Workspace (the imports and the open
allocate objects that all stay alive), and runs again, less often, once the Workspace is attached
or has failed to open."""

from __future__ import annotations

import gc
from pathlib import Path

from services.clock import FakeClock
from services.workspace import Settings
from workbench.app import GC_YOUNG, make_app

from .conftest import ready
from .test_open_failure import garbage, wait_for_error_screen


class WatchingClock(FakeClock):
    """A fake clock that notes, at each reading, whether the collector was on."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on: list[bool] = []

    def time(self) -> float:
        self.collector_on.append(gc.isenabled())
        return super().time()


async def test_the_collector_is_held_while_the_workspace_opens_and_on_again_once_attached(tmp_path: Path) -> None:
    clock = WatchingClock()
    app = make_app(Settings(path=tmp_path / "ws", clock=clock))
    assert gc.isenabled()
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        assert app.workspace is not None and app.workspace.created  # the sample world was written meanwhile
        assert clock.collector_on and False in clock.collector_on
        assert gc.isenabled()
        assert gc.get_threshold()[0] >= GC_YOUNG


async def test_the_collector_is_on_again_when_the_workspace_cannot_open(tmp_path: Path) -> None:
    garbage(tmp_path / "ws")
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for_error_screen(pilot)
        assert gc.isenabled()
