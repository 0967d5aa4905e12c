"""No stale screens: a dialog that fails its check keeps what was typed and shows the problem inline;
ages keep up with the clock; ``R`` in the inbox says which node it marked read."""

from __future__ import annotations

from textual.widgets import Input, Label

from screens.dialogs import FormDialog
from tests.toasts import raised

from .conftest import ready, settle


async def test_dialog_keeps_input_and_shows_the_error_inline(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        run_id = app.main.pane("runs").selected
        events_before = len(ws.desk.detail(run_id).events)
        await pilot.press("e")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, FormDialog)
        dialog.query_one("#field-type", Input).value = "node.activity"
        dialog.query_one("#field-fields", Input).value = '{"step": '
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is dialog  # still open
        assert dialog.query_one("#field-fields", Input).value == '{"step": '  # nothing typed is lost
        assert str(dialog.query_one("#form-error", Label).render()).startswith("Fields: not JSON")
        assert len(ws.desk.detail(run_id).events) == events_before
        dialog.query_one("#field-fields", Input).value = '{"step": 1}'
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert not isinstance(app.screen, FormDialog)
        assert any(n.message.startswith("Event emitted.") for n in raised(app))


async def test_ages_keep_up_with_the_clock(app, settings) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        runs = app.main.pane("runs")
        ages_before = {cells[3].plain for cells in runs._table_rows.values()}
        settings.clock.advance(5 * 60)
        app.main.tick_ages()  # what the main screen's interval calls
        await settle(pilot)
        ages = {cells[3].plain for cells in runs._table_rows.values()}
        assert ages != ages_before and all(age.endswith("m") for age in ages)


async def test_mark_all_read_says_which_node(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await settle(pilot)
        pane = app.main.pane("inbox")
        node = pane.node
        assert node
        name = next(row[1] for row in pane._node_rows if row[0] == node)  # the node as the list names it
        assert name and name != node
        await pilot.press("R")
        await settle(pilot)
        assert any(n.message == f"Every message to {name} marked read." for n in raised(app))


async def test_selected_text_keeps_a_readable_foreground(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        style = app.main.get_component_rich_style("screen--selection")
        assert style.color is not None and style.bgcolor is not None
        assert style.color != style.bgcolor
        app.theme = "textual-light"
        await settle(pilot)
        light = app.main.get_component_rich_style("screen--selection")
        assert light.color is not None and light.color != light.bgcolor
