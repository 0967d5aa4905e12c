"""The log: every error shown as a toast is also written, with its traceback, to a rotating log in the
workspace (or ``--log FILE``); the toast keeps the one-liner; a log that cannot be opened says why."""

from __future__ import annotations

from pathlib import Path

from services.clock import FakeClock
from services.errors import ServiceError
from services.workspace import Settings
from tests.toasts import raised
from workbench.app import make_app

from .conftest import ready, settle


def raise_and_catch() -> ServiceError:
    try:
        raise ServiceError("the grant of user:ada is suspended")
    except ServiceError as error:
        return error


async def test_errors_go_to_the_workspace_log_with_their_traceback(tmp_path: Path) -> None:
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.report_error(raise_and_catch())
        await settle(pilot)
        assert [n.message for n in raised(app) if n.title == "Error"] == ["the grant of user:ada is suspended"]
    log = (tmp_path / "ws" / "logs" / "workbench.log").read_text(encoding="utf-8")
    assert "ERROR the grant of user:ada is suspended" in log
    assert "Traceback (most recent call last)" in log and "raise_and_catch" in log


async def test_log_option_names_the_file(tmp_path: Path) -> None:
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), log=tmp_path / "elsewhere" / "wb.log")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.report_error(raise_and_catch())
        await settle(pilot)
    assert "suspended" in (tmp_path / "elsewhere" / "wb.log").read_text(encoding="utf-8")
    assert not (tmp_path / "ws" / "logs").exists()


async def test_unwritable_log_is_said_and_the_workbench_runs_on(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), log=blocker / "wb.log")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert any(n.message.startswith(f"no log: {blocker / 'wb.log'} cannot be written") for n in raised(app))
        app.report_error(raise_and_catch())  # still a toast, no crash
        await settle(pilot)
        assert "the grant of user:ada is suspended" in app.errors
    assert blocker.read_text(encoding="utf-8") == "not a folder"
