"""A workspace that cannot open: one screen names the file, the cause and what to do; ``q`` exits 2."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets._toast import Toast

from screens.open_error import OpenErrorScreen
from services.clock import FakeClock
from services.workspace import Settings
from workbench.app import make_app

from .conftest import OPEN_WAIT_S


def garbage(root: Path) -> Path:
    root.mkdir()
    (root / "canvas.db").write_bytes(b"[/x] not a database \x1b[2J" * 300)
    return root / "canvas.db"


def db_folder(root: Path) -> Path:
    (root / "canvas.db").mkdir(parents=True)
    return root / "canvas.db"


def path_is_file(root: Path) -> Path:
    root.write_text("a file\n")
    return root


CASES = {
    "garbage canvas.db": (garbage, "is not an SQLite database", "Move the damaged file aside"),
    "canvas.db is a folder": (db_folder, "cannot be opened as a database file", "Check that"),
    "workspace is a file": (path_is_file, "a file where a folder belongs", "Move the file aside"),
}


async def wait_for_error_screen(pilot: Any) -> None:
    deadline = asyncio.get_running_loop().time() + OPEN_WAIT_S  # the first open also imports the services
    while asyncio.get_running_loop().time() < deadline:
        await pilot.pause(0.02)
        if isinstance(pilot.app.screen, OpenErrorScreen):
            return
    raise AssertionError(f"no error screen; errors: {pilot.app.errors}")


@pytest.mark.parametrize("case", list(CASES))
async def test_a_workspace_that_cannot_open_shows_one_screen_and_q_exits_2(tmp_path, case) -> None:
    spoil, cause, remedy = CASES[case]
    bad = spoil(tmp_path / "ws")
    before = bad.read_bytes() if bad.is_file() else None
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for_error_screen(pilot)
        await pilot.pause()
        shown = str(app.screen.query_one("#open-error-text").render())
        assert str(bad) in shown and cause in shown and remedy in shown
        assert "exit status 2" in shown
        assert [s for s in app.screen_stack if isinstance(s, OpenErrorScreen)] == [app.screen]  # one screen
        assert not list(app.screen.query(Toast))  # no toast beside it, no raw SQLAlchemy text anywhere
        screenshot = app.export_screenshot()
        assert "sqlalche" not in screenshot.lower() and "OperationalError" not in screenshot
        assert "\x1b[2J" not in screenshot
        assert app.main.query_one("#badges").status == "cannot open the workspace"
        assert app.workspace is None and app.is_running
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2
    if before is not None:
        assert bad.read_bytes() == before


async def test_quitting_a_workspace_that_opened_exits_0(tmp_path) -> None:
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(120, 36)) as pilot:
        deadline = asyncio.get_running_loop().time() + OPEN_WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            await pilot.pause(0.02)
            if app.workspace is not None:
                break
        assert app.open_error is None
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_a_canvas_server_that_cannot_be_reached_is_named_by_its_masked_url_on_the_screen(tmp_path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql+psycopg://ada:s3cret@127.0.0.1:{port}/canvas"
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock(), canvas_url=url))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for_error_screen(pilot)
        await pilot.pause()
        shown = str(app.screen.query_one("#open-error-text").render())
        assert f"database:    postgresql+psycopg://ada:***@127.0.0.1:{port}/canvas" in shown
        assert "cannot be reached" in shown and "Start the PostgreSQL server" in shown
        assert "s3cret" not in app.export_screenshot() and "canvas.db" not in shown.split("what to do")[0]
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2
    assert not (tmp_path / "ws" / "canvas.db").exists()
