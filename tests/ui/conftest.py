"""Fixtures for pilot tests: a real Workspace in ``tmp_path`` with a fake clock, and the App over it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.workspace import Settings
from tests.toasts import record_toasts
from workbench.app import WorkbenchApp, make_app


OPEN_WAIT_S = 120.0
"""How long ``ready`` waits for the window's workspace: the first open in a worker also imports every
service, which takes many seconds on a loaded machine."""


@pytest.fixture(autouse=True)
def kept_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every toast raised here is kept for the test (``tests.toasts.said``), past its own timeout."""
    record_toasts(monkeypatch)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(path=tmp_path / "ws", clock=FakeClock())


@pytest.fixture
def app(settings: Settings) -> WorkbenchApp:
    return make_app(settings)


async def settle(pilot: Any, rounds: int = 3) -> None:
    """Let workers finish and queued messages run (no sleeping on wall time beyond Pilot's pauses)."""
    for _ in range(rounds):
        await pilot.pause()
        await _workers_done(pilot.app)
    await pilot.pause()


async def _workers_done(app: Any) -> None:
    """Wait for every worker; one cancelled because a newer exclusive worker replaced it is done too."""
    from textual.worker import WorkerCancelled

    for worker in list(app.workers):
        try:
            await worker.wait()
        except WorkerCancelled:
            pass


async def ready(pilot: Any) -> Any:
    """Wait until the App opened its Workspace and the panes loaded; returns the Workspace."""
    app = pilot.app
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OPEN_WAIT_S
    while loop.time() < deadline:
        await pilot.pause(0.02)
        if app.workspace is not None and app.main.workspace is not None:
            break
    assert app.workspace is not None, app.errors
    await quiet(pilot)
    return app.workspace


async def quiet(pilot: Any, rounds: int = 60) -> None:
    """Wait until the services stop publishing (settled runs become judgments in the background)."""
    app = pilot.app
    ws = app.workspace
    for _ in range(rounds):
        seen = app.changes_seen
        follower = getattr(ws, "follower", None)
        if follower is not None:
            await follower.idle()
        await settle(pilot)
        judging = ws.okf is not None and any(i.state == "judging" for i in await ws.okf.queue())
        if app.changes_seen == seen and not judging:
            return


async def type_text(pilot: Any, text: str) -> None:
    """Type ``text`` key by key into the focused widget (one Pilot call for the whole text)."""
    await pilot.press(*["space" if ch == " " else ch for ch in text])


def run_named(ws: Any, name: str) -> Any:
    """The run view named ``name`` on the window's desk."""
    return next(r for r in ws.desk.runs() if r.name == name)


async def show_run(pilot: Any, run_id: str) -> Any:
    """Bring the runs pane forward with ``run_id`` selected and focused; returns the pane."""
    pane = pilot.app.main.pane("runs")
    await pilot.press("3")
    pane.select_key(run_id)
    pane.focus_main()
    await settle(pilot)
    assert pane.selected == run_id
    return pane
