"""The main screen: pane keys, layouts, the strip, badges, help, filter, palette, quit, the error toast."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import DataTable

from screens.main import PANE_IDS
from services.errors import ServiceError
from tests.ui.conftest import ready, settle, type_text


def visible(app: Any, pane_id: str) -> bool:
    return app.main.pane(pane_id).display and app.main.pane(pane_id).region.area > 0


async def test_keys_1_to_5_bring_each_pane_forward_in_the_small_layout(app) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.main.compact
        for number, pane_id in enumerate(PANE_IDS, start=1):
            await pilot.press(str(number))
            await settle(pilot, 1)
            assert app.main.active == pane_id
            assert [p for p in PANE_IDS if visible(app, p)] == [pane_id]
            assert app.focused is not None and pane_id in [n.id for n in app.focused.ancestors_with_self]
        strip = app.main.query_one("#strip").render().plain
        runs = len([r for r in app.workspace.desk.runs() if not r.system])  # system runs are counted apart
        grants = len(app.workspace.desk.grants())
        assert f"3  runs {runs} " in strip  # 80 columns: each pane's name and its first count
        assert f"4  grants {grants} " in strip
        system = len(app.workspace.desk.runs()) - runs
        assert app.main.pane("runs").headline() == f"{runs} runs · 1 waiting on user · {system} system runs"


async def test_the_dashboard_shows_every_pane_at_160x48_with_live_badges(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        assert not app.main.compact
        assert all(visible(app, p) for p in PANE_IDS)
        assert not app.main.query_one("#strip").display
        await pilot.press("4")
        await settle(pilot, 1)
        assert app.main.pane("grants").has_class("-active")
        await badges_case(pilot, app, app.workspace)


async def badges_case(pilot: Any, app: Any, ws: Any) -> None:
    badges = app.main.query_one("#badges")
    assert badges.waiting == ws.desk.waiting_on_user() == 1
    assert badges.judgments == app.main.pane("judgments").waiting >= 1
    run_id = next(r.id for r in ws.desk.runs() if r.name == "patch review")
    await ws.desk.ask(run_id, "Ship it?")
    await settle(pilot)
    assert badges.waiting == 2
    assert "? 2 waiting on the user" in badges.render().plain


async def test_question_mark_opens_the_key_help_and_q_quits(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await settle(pilot, 1)
        assert type(app.screen).__name__ == "HelpScreen"
        text = app.screen.query_one("#help-keys").render()
        plain = text.plain if isinstance(text, Text) else str(text)
        for needle in ("Reply as the model", "Fail the run's current turn", "Revoke the person's grant", "Approve the selected",
                       "Send the selected node a message", "Follow the selected link", "Filter the focused pane"):
            assert needle in plain
        await pilot.press("escape")
        await settle(pilot, 1)
        assert app.screen is app.main
        await quit_case(pilot, app, app.workspace)
    assert app.return_code == 0


async def test_slash_filters_the_focused_pane_with_the_match_highlighted_and_esc_clears(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await pilot.press("slash")
        await settle(pilot, 1)
        await type_text(pilot, "patch")
        await settle(pilot)
        table = app.main.query_one("#runs-table", DataTable)
        assert table.row_count == 1
        cell = table.get_row_at(0)[1]  # the title, right after the status glyph
        assert cell.plain.startswith("patch review")
        assert any(span.style == "reverse" and cell.plain[span.start:span.end].lower() == "patch" for span in cell.spans)
        await pilot.press("escape")
        await settle(pilot)
        assert table.row_count == len([r for r in app.workspace.desk.runs() if not r.system]) > 1  # system runs hidden
        assert app.main.pane("runs").filter_text == ""


async def test_the_palette_jumps_to_a_person_and_lists_fitting_actions(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await pilot.press("ctrl+p")
        await settle(pilot, 1)
        assert isinstance(app.screen, CommandPalette)
        await type_text(pilot, "person user:linus")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.active == "grants"
        assert app.main.pane("grants").selected == "user:linus"
        from workbench.commands import WorkbenchCommands

        provider = WorkbenchCommands(app.main, None)
        labels = [entry[0] for entry in await provider._entries("")]
        assert any(label.startswith("Revoke the grant of user:linus  [k]") for label in labels)
        assert any(label.startswith("go to run ") for label in labels)
        before = app.workspace.cloud.user("user:linus").tokens_valid_from
        entries = await provider._entries("")
        expire = next(command for label, command, _ in entries if label.startswith("Expire the tokens of user:linus"))
        await expire()
        await settle(pilot)
        assert app.workspace.cloud.user("user:linus").tokens_valid_from > before


async def quit_case(pilot: Any, app: Any, ws: Any) -> None:
    await pilot.press("q")
    await pilot.pause()


async def test_a_failing_action_is_a_toast_never_a_crash(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        pane = app.main.pane("runs")

        def boom() -> None:
            raise ServiceError("no run [red]x\x1b[2J")

        pane.act("never", boom)
        await settle(pilot)
        assert app.errors == ["no run [red]x␛[2J"]
        assert app.is_running

        def bug() -> None:
            raise KeyError("surprise")

        pane.act("never", bug)
        await settle(pilot)
        assert app.errors[-1] == "KeyError: 'surprise'"
        assert app.is_running


async def test_tones_follow_the_theme_when_it_changes(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("4")
        await settle(pilot)
        table = app.main.query_one("#grants-table", DataTable)

        def state_colours() -> set[str]:
            cells = [table.get_row_at(i)[1] for i in range(table.row_count)]
            return {c.style.color.get_truecolor().hex for c in cells if c.plain == "active"}

        dark = app.theme_variables["text-success"].lower()
        assert state_colours() == {dark}
        app.theme = "textual-light"
        await settle(pilot)
        light = app.theme_variables["text-success"].lower()
        assert light != dark
        assert state_colours() == {light}
