"""Friction a newcomer met: dialogs name their run, Enter on a form's dropdown submits, the copy
dialog's numbers choose, confirmations before a whole approval, a restore and a quit with work in
flight (each skippable in the settings), a settings problem that stays visible until fixed, and a
theme chosen meanwhile that is kept and said, not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Select

from screens.dialogs import ConfirmDialog, FormDialog
from screens.dialogs.choose import ChooseDialog
from services.clock import FakeClock
from services.workspace import Settings
from tests.toasts import said
from workbench.app import make_app
from workbench.settings import load_config

from .conftest import ready, run_named, settle, show_run


def title_of(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(".dialog-title").render())


def messages(app) -> list[str]:  # type: ignore[no-untyped-def]
    return said(app)


@pytest.mark.long
async def test_reply_fail_settle_and_ask_dialogs_name_the_run(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        await show_run(pilot, run.id)
        for key, verb in (("r", "Reply as the model to"), ("f", "Fail the turn of"), ("a", "Ask the person of"),
                          ("s", "Settle"), ("e", "Emit an event on")):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, FormDialog), key
            title = title_of(app)
            assert title.startswith(verb) and "talk outline" in title and run.id in title, title
            await pilot.press("escape")
            await settle(pilot)


async def test_enter_on_the_revoke_forms_dropdown_submits_it(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        await pilot.press("4")
        app.main.pane("grants").select_key("user:grace")
        await settle(pilot)
        await pilot.press("k")
        await settle(pilot)
        dropdown = app.screen.query_one("#field-code", Select)
        dropdown.focus()
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert not dropdown.expanded
        assert not isinstance(app.screen, FormDialog)  # submitted, not reopened
        assert ws.cloud.user("user:grace").grant.state["state"] == "revoked"
        await pilot.press("u")  # restore asks first
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog) and "user:grace" in title_of(app)
        await pilot.press("n")
        await settle(pilot)
        assert ws.cloud.user("user:grace").grant.state["state"] == "revoked"
        await pilot.press("u", "y")
        await settle(pilot)
        assert ws.cloud.user("user:grace").grant.state["state"] == "active"


async def test_the_copy_dialogs_numbers_choose(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        run_id = app.main.pane("runs").selected
        await pilot.press("Y")
        await settle(pilot)
        assert isinstance(app.screen, ChooseDialog)
        assert "1-4" in str(app.screen.query_one(".dialog-keys").render())
        await pilot.press("4")
        await settle(pilot)
        assert not isinstance(app.screen, ChooseDialog)
        assert app.clipboard.startswith("curl ") and app.clipboard.endswith(f"/v1/runs/{run_id}")
        await pilot.press("Y")
        await settle(pilot)
        await pilot.press("9")  # past the list: nothing chosen, the dialog stays
        await settle(pilot)
        assert isinstance(app.screen, ChooseDialog)
        await pilot.press("1")
        await settle(pilot)
        assert app.clipboard == run_id


async def test_y_on_a_whole_judgment_asks_and_n_leaves_it_pending(app) -> None:
    from .test_knowledge_panes import harvest_selected

    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        pane, item = await harvest_selected(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert "whole judgment" in title_of(app) and "confirm_approve = false" in title_of(app)
        await pilot.press("n")
        await settle(pilot)
        assert next(i for i in await ws.okf.queue() if i.id == item.id).state == "pending"


def _config(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


async def test_confirmations_are_skipped_when_the_settings_say_so(tmp_path: Path) -> None:
    from .test_knowledge_panes import harvest_selected

    config = _config(tmp_path, "confirm_approve = false\nconfirm_restore = false\nconfirm_quit = false\n")
    assert config.problem is None and not (config.confirm_approve or config.confirm_restore or config.confirm_quit)
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), config=config)
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        pane, item = await harvest_selected(pilot)
        await pilot.press("y")
        await settle(pilot, 5)
        assert not isinstance(app.screen, ConfirmDialog)
        assert next(i for i in await ws.okf.queue() if i.id == item.id).state == "approved"
        ws.cloud.user("user:grace").grant.revoke("grant_removed")
        await pilot.press("4")
        app.main.pane("grants").select_key("user:grace")
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert ws.cloud.user("user:grace").grant.state["state"] == "active"
        await ws.desk.start_run("user:ada", "a turn in progress")
        await settle(pilot)
        assert app.work_in_flight()
        await pilot.press("q")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmDialog)
    assert app.return_code == 0


async def test_q_with_a_turn_in_progress_asks_first(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        assert app.work_in_flight() == []
        await ws.desk.start_run("user:ada", "a turn in progress")
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert "1 run with a turn in progress" in title_of(app)
        await pilot.press("q")  # asked already: no second dialog
        await settle(pilot)
        assert sum(isinstance(s, ConfirmDialog) for s in app.screen_stack) == 1
        await pilot.press("n")
        await settle(pilot)
        assert app.is_running and not isinstance(app.screen, ConfirmDialog)
        await pilot.press("q", "y")
        await settle(pilot)
    assert app.return_code == 0


async def test_a_settings_problem_stays_in_the_header_and_the_log_until_fixed(tmp_path: Path) -> None:
    config = _config(tmp_path, 'theme = "nord"\nread_only = "yes"\n')
    assert config.problem is not None
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), config=config)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        badge = str(app.query_one("#badges").render())
        assert "⚠ settings not used" in badge and "read_only must be a true or false" in badge
        log = (tmp_path / "ws" / "logs" / "workbench.log").read_text(encoding="utf-8")
        assert "read_only must be a true or false" in log
        app.theme = "gruvbox"  # chosen while the file is broken: kept, and said
        await settle(pilot)
        assert any("'gruvbox' is not saved" in m for m in messages(app))
        assert "theme 'gruvbox' not saved" in str(app.query_one("#badges").render())
        assert 'theme = "nord"' in config.path.read_text(encoding="utf-8")
        config.path.write_text('theme = "nord"\nread_only = false\n', encoding="utf-8")  # fixed
        for _ in range(100):  # the file is looked at again every second
            await pilot.pause(0.05)
            if not app.settings_problem:
                break
        await settle(pilot)
        assert app.settings_problem == ""
        assert "settings not used" not in str(app.query_one("#badges").render())
        assert 'theme = "gruvbox"' in config.path.read_text(encoding="utf-8")  # the theme chosen meanwhile
        assert app.theme == "gruvbox" and any("is fixed" in m for m in messages(app))
        assert "fixed, now in use" in (tmp_path / "ws" / "logs" / "workbench.log").read_text(encoding="utf-8")
