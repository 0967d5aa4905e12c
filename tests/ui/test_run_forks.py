"""Forking a run at a turn by key: ``t`` / ``T`` step the turn cursor (its line marked in the stream),
``F`` opens the fork form with the turn's message to edit, and the fork starts, selected, naming its
parent and turn in the runs list, its info line and its stream."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Static, TextArea

from screens.dialogs.form import FormDialog
from screens.widgets.stream import EventStream
from tests.toasts import said
from tests.ui.conftest import ready, settle, show_run, type_text

GARDEN = "run_sample_garden"


def stream(pilot: Any) -> EventStream:
    found = pilot.app.main.query_one("#runs-stream", EventStream)
    found.flush()
    return found


def marked_line(pilot: Any) -> str | None:
    shown = stream(pilot)
    return None if shown.marked is None else shown.shown[shown.marked]


async def test_t_and_T_step_the_turn_cursor_and_mark_its_line_in_both_views(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        pane = await show_run(pilot, GARDEN)
        assert pane.turn is None and stream(pilot).marked is None
        await pilot.press("t")
        await settle(pilot)
        assert pane.turn == 1 and "» turn: Plan the week's garden chores" in (marked_line(pilot) or "")
        await pilot.press("t")
        await settle(pilot)
        assert pane.turn == 2 and "» turn: Can you text me the list?" in (marked_line(pilot) or "")
        rows = stream(pilot).marked_rows
        assert rows is not None and "Can you text me the list?" in stream(pilot).lines[rows[0]]
        await pilot.press("t")  # the last turn: the cursor stays
        await settle(pilot)
        assert pane.turn == 2
        assert "turn 2 ·" in str(pilot.app.main.query_one("#stream-state").render())
        await pilot.press("v")  # raw events: the same turn's event line is marked
        await settle(pilot)
        assert "node.turn.started" in (marked_line(pilot) or "") and "Can you text me" in (marked_line(pilot) or "")
        await pilot.press("v", "T")
        await settle(pilot)
        assert pane.turn == 1 and "Plan the week's garden chores" in (marked_line(pilot) or "")
        pane.select_key(next(v.id for v in pane.desk.runs() if v.name == "mail digest"))
        await settle(pilot)
        assert pane.turn is None and stream(pilot).marked is None  # another run: the cursor is off


async def test_F_forks_at_the_cursors_turn_with_the_edited_message_and_selects_the_fork(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        pane = await show_run(pilot, GARDEN)
        await pilot.press("t", "t", "F")
        await settle(pilot)
        form = pilot.app.screen
        assert isinstance(form, FormDialog) and "at turn 2 of 2" in form.form_title
        area = form.query_one("#field-text", TextArea)
        assert area.text == "Can you text me the list?"  # the turn's message, to edit
        area.text = ""
        area.focus()
        await type_text(pilot, "Email me the list")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert not isinstance(pilot.app.screen, FormDialog), pilot.app.errors
        child = pane.selected
        assert child != GARDEN
        run = ws.cloud.runs.get(child)
        assert run.params["history"][-1] == {"role": "user", "text": "Email me the list"}
        assert (run.params["forked_from"], run.params["forked_at_turn"]) == (GARDEN, 2)
        assert any("Forked at turn 2" in text for text in said(pilot.app))
        table = pilot.app.main.query_one("#runs-table", DataTable)
        title = table.get_row(child)[1]
        assert "fork of “garden plan” at turn 2" in (title.plain if isinstance(title, Text) else str(title))
        info = pilot.app.main.query_one("#run-info", Static)
        assert f"↳ fork of “garden plan” at turn 2 ({GARDEN})" in str(info.render())
        text = "\n".join(stream(pilot).shown)
        assert "↳ fork of “garden plan” at turn 2: carries 3 messages" in text
        assert "↳ model: Water the tomatoes Monday and Thursday; weed on Saturday." in text
        assert f"fork: from {GARDEN} at turn 2" in text
        pane.select_key(GARDEN)
        await settle(pilot)
        assert f"forked: {child} at turn 2" in "\n".join(stream(pilot).shown)  # the parent's stream says so too


async def test_F_without_the_cursor_forks_at_the_last_turn_unchanged_and_a_run_without_turns_is_refused(
        app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await show_run(pilot, GARDEN)
        await pilot.press("F")
        await settle(pilot)
        assert "at turn 2 of 2" in pilot.app.screen.form_title
        await pilot.press("ctrl+s")
        await settle(pilot)
        child = pilot.app.main.pane("runs").selected
        assert ws.cloud.runs.get(child).params["history"][-1] == {"role": "user", "text": "Can you text me the list?"}
        fresh = await ws.desk.start_run("user:ada", "nothing yet")
        await show_run(pilot, fresh)
        runs = len(ws.cloud.runs.all)
        await pilot.press("F", "t")
        await settle(pilot)
        assert not isinstance(pilot.app.screen, FormDialog)
        assert any("has no turns yet: there is nothing to fork" in text for text in said(pilot.app))
        assert any(text.endswith("has no turns yet.") for text in said(pilot.app))
        assert len(ws.cloud.runs.all) == runs
