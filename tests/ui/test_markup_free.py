"""Markup-looking ids and names on every pane, toast, dialog title and palette hit: shown verbatim, never obeyed.

Textual parses markup in ``notify`` by default; a person id holding ``[/x]`` crashed the App from a
toast and ``[@click=app.quit]`` was obeyed. Every toast now goes through ``notify_plain`` (and the
App's own ``notify`` is plain whoever calls it).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandPalette
from textual.notifications import Notify
from textual.widgets import Label
from textual.widgets._toast import Toast

from screens.text import safe
from tests.ui.conftest import ready, settle, type_text

IDS = [
    "user:[/x]",
    "user:[@click=app.quit]q[/]",
    "user:[link=https://x]c[/link]",
    "user:$v [$x]",
    "user:\x1b]0;PWNED\x07\x1b[2J",
]
ROOT = Path(__file__).resolve().parents[2]


def notices(seen: list[Any]) -> list[Any]:
    return [m.notification for m in seen if isinstance(m, Notify)]


@pytest.mark.long
async def test_hostile_person_ids_in_every_pane_toast_and_title_show_verbatim_and_do_nothing(app) -> None:
    seen: list[Any] = []
    async with app.run_test(size=(160, 48), message_hook=seen.append, notifications=True) as pilot:
        ws = await ready(pilot)
        for uid in IDS:
            await ws.cloud.connect(ws.store, uid)
            client = await ws.oauth.client(uid)
            await client.runs.start(prompt=f"prompt of {uid}", name=f"run of {uid}")
        await settle(pilot)
        grants = app.main.pane("grants")
        for uid in IDS:
            await pilot.press("4")
            grants.select_key(uid)
            await settle(pilot)
            await pilot.press("u")  # asks first, naming the person; then toast: "Grant of <id> restored."
            await settle(pilot)
            assert safe(uid) in str(app.screen.query_one(".dialog-title").render())
            await pilot.press("y")
            await settle(pilot)
            await pilot.press("t")  # toast: "Tokens of <id> expired."
            await settle(pilot)
            detail = str(app.main.query_one("#grant-detail").render())
            assert safe(uid) in detail
            await pilot.press("k")  # a dialog titled with the id
            await settle(pilot)
            title = str(app.screen.query_one(".dialog-title", Label).render())
            assert title.startswith(f"Revoke the grant of {safe(uid)}?")
            await pilot.press("escape")
            await settle(pilot)
        assert app.is_running and app.return_code is None
        sent = notices(seen)
        for uid in IDS:
            assert any(n.message == f"Grant of {safe(uid)} restored." for n in sent)
            assert any(n.message == f"Tokens of {safe(uid)} expired." for n in sent)
        assert sent and not any(n.markup for n in sent)
        # an error whose text carries the id, and a notify from anywhere with markup left on
        app.main.pane("runs").act("never", lambda: ws.desk.delete_run(IDS[1]))
        app.notify("[@click=app.quit]q[/] from elsewhere")
        toasts = await shown_toasts(pilot, f"no run {safe(IDS[1])}", "[@click=app.quit]q[/] from elsewhere")
        assert app.errors[-1] == f"no run {safe(IDS[1])}"
        assert any(f"no run {safe(IDS[1])}" in t for t in toasts), toasts
        assert any("[@click=app.quit]q[/] from elsewhere" in t for t in toasts)
        for toast in list(app.screen.query(Toast)):  # clicking the text does nothing but dismiss it
            await pilot.click(toast)
        await settle(pilot)
        assert app.is_running and app.return_code is None
        await every_pane_case(pilot, app, ws)


async def shown_toasts(pilot: Any, *texts: str) -> list[str]:
    """The toasts on screen, as soon as each of ``texts`` is in one (a toast leaves after its timeout,
    wall-clock seconds, so this looks while they are up rather than after a long settle)."""
    shown: list[str] = []
    for _ in range(1200):
        await pilot.pause(0.05)
        shown = [str(t.render()) for t in pilot.app.screen.query(Toast)]
        if all(any(text in toast for toast in shown) for text in texts):
            break
    return shown


async def every_pane_case(pilot: Any, app: Any, ws: Any) -> None:
    runs = app.main.pane("runs")
    for uid in IDS:
        run_id = next(v.id for v in ws.desk.runs() if v.user_id == uid)
        runs.select_key(run_id)
        await settle(pilot)
        info = str(app.main.query_one("#run-info").render())
        assert f"run of {safe(uid)}" in info and safe(uid) in info
    screenshot = app.export_screenshot()
    assert "\x1b]0;PWNED" not in screenshot and "PWNED" in screenshot
    await pilot.press("ctrl+p")
    await settle(pilot)
    palette = app.screen
    assert isinstance(palette, CommandPalette)
    await type_text(pilot, "run of user:")
    hits: list[str] = []
    for _ in range(600):  # the palette searches in the background: wait for its hits, up to a minute
        await settle(pilot, 1)
        hits = [str(option.prompt) for option in palette.query_one("CommandList").options]
        if any(safe(IDS[1]) in hit for hit in hits):
            break
    assert any(safe(IDS[1]) in hit for hit in hits), hits
    await pilot.press("escape")
    await settle(pilot)
    for key in "125":
        await pilot.press(key)
        await settle(pilot)
    assert app.is_running and app.return_code is None


def test_every_notify_call_in_screens_and_workbench_turns_markup_off() -> None:
    """A new pane or dialog cannot bring back a markup toast: every ``notify(...)`` passes ``markup=False``
    (``notify_plain`` does; the App's own ``notify`` forces it too)."""
    offenders = []
    for folder in ("screens", "workbench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "notify":
                    markup = next((k.value for k in node.keywords if k.arg == "markup"), None)
                    if not (isinstance(markup, ast.Constant) and markup.value is False):
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
