"""Copy and export: ``Y`` copies the selection as its id, JSON, or the SDK call / curl (OSC 52); ``S``
and the palette's screenshot write an SVG into the workspace's ``screenshots/`` and say where; a
failure to write says why."""

from __future__ import annotations

import json
from pathlib import Path

from screens.dialogs.choose import ChooseDialog
from tests.toasts import raised

from .conftest import ready, settle


async def choose(pilot, index: int) -> None:
    await pilot.press("Y")
    await settle(pilot)
    assert isinstance(pilot.app.screen, ChooseDialog)
    for _ in range(index):
        await pilot.press("down")
    await pilot.press("enter")
    await settle(pilot)


async def test_copy_run_as_id_json_sdk_call_and_curl(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        run_id = app.main.pane("runs").selected
        await choose(pilot, 0)
        assert app.clipboard == run_id
        assert any(n.message.startswith("Copied to the terminal's clipboard: " + run_id) for n in raised(app))
        await choose(pilot, 1)
        assert json.loads(app.clipboard)["id"] == run_id
        await choose(pilot, 2)
        assert app.clipboard == f'run = await client.runs.get("{run_id}")'
        await choose(pilot, 3)
        assert app.clipboard.startswith("curl ") and app.clipboard.endswith(f"/v1/runs/{run_id}")


async def test_copy_grant_and_nothing_selected(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("4")
        await settle(pilot)
        user = app.main.pane("grants").selected
        await choose(pilot, 1)
        assert json.loads(app.clipboard)["user_id"] == user
        app.main.pane("grants").selected = None
        await pilot.press("Y")
        await settle(pilot)
        assert not isinstance(app.screen, ChooseDialog)
        assert any(n.message == "Nothing selected in grants to copy." for n in raised(app))


async def test_screenshot_goes_into_the_workspace_and_the_path_is_shown(app, settings) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("S")
        await settle(pilot)
        shots = list((Path(settings.path) / "screenshots").glob("*.svg"))
        assert len(shots) == 1 and shots[0].read_text(encoding="utf-8").startswith("<svg")
        assert any(n.message == f"Screenshot saved: {shots[0]}" for n in raised(app))
        app.deliver_screenshot()  # the palette's "Screenshot" command
        await settle(pilot)
        assert len(list((Path(settings.path) / "screenshots").glob("*.svg"))) == 2


async def test_unwritable_screenshot_folder_says_why(app, settings) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        blocker = Path(settings.path) / "screenshots"
        blocker.write_text("a file in the way", encoding="utf-8")
        await pilot.press("S")
        await settle(pilot)
        messages = [n.message for n in raised(app) if n.title == "Screenshot"]
        assert messages and messages[-1].startswith("Screenshot not saved: ") and "cannot be written (" in messages[-1]
        assert blocker.read_text(encoding="utf-8") == "a file in the way"
