"""Time mode (``H``, ``[``): every pane drawn from the history as of the cursor, stepping, jumping,
refusing actions in the past, forking at the cursor's turn, and back to now with ``esc``."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable, Input

from screens.time import TimeScreen
from screens.widgets.stream import EventStream
from services.desk import is_system
from tests.toasts import said
from tests.ui.conftest import ready, settle


def time_screen(app: Any) -> TimeScreen:
    screen = app.screen
    assert isinstance(screen, TimeScreen), type(screen)
    return screen


def events_shown(screen: TimeScreen, run_id: str) -> str:
    table = screen.query_one("#time-runs", DataTable)
    row = table.get_row(run_id)
    return str(row[3])


async def enter(pilot: Any, key: str = "H") -> TimeScreen:
    await pilot.press(key)
    await settle(pilot, 5)
    return time_screen(pilot.app)


async def test_stepping_back_shows_a_run_as_it_was_before_a_reply(app: Any) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        run = next(v for v in ws.desk.runs() if not v.system and v.status == "idle")
        before = run.events
        await ws.desk.reply(run.id, "Water the beds at seven", chunks=2)
        await ws.timeline.settled()
        await settle(pilot)
        after = ws.desk.view(run.id).events
        assert after > before

        screen = await enter(pilot)
        assert screen.banner.startswith("as of ") and "0 changes ago" in screen.banner
        assert screen.banner.endswith("esc: back to now")
        assert events_shown(screen, run.id) == str(after)
        for _ in range(after - before + 8):  # back past the reply's events, a change at a time
            await pilot.press("left_square_bracket")
            await settle(pilot)
            if events_shown(screen, run.id) == str(before):
                break
        assert events_shown(screen, run.id) == str(before)
        assert "changes ago" in screen.banner and "0 changes ago" not in screen.banner
        screen.query_one("#time-runs", DataTable).move_cursor(row=screen.shown["time-runs"].index(run.id))
        await settle(pilot)
        stream = screen.query_one("#time-stream", EventStream)
        stream.flush()
        assert stream.shown and not any("Water the beds" in line for line in stream.shown)
        await pilot.press("v")  # raw events: the same moment, every event
        await settle(pilot)
        stream.flush()
        assert any("node.turn.started" in line for line in stream.shown)
        assert not any("Water the beds" in line for line in stream.shown)
        for _ in range(200):
            await pilot.press("right_square_bracket")
            await settle(pilot)
            if events_shown(screen, run.id) == str(after):
                break
        assert events_shown(screen, run.id) == str(after)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, TimeScreen)


async def test_actions_are_refused_in_the_past_and_changes_are_counted_not_drawn(app: Any) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        await ws.desk.revoke("user:grace", "grant_revoked")
        await ws.timeline.settled()
        screen = await enter(pilot, "left_square_bracket")  # one change back
        assert "1 change ago" in screen.banner
        runs_before = list(screen.shown["time-runs"])
        for key in ("r", "k", "s", "y", "x"):
            await pilot.press(key)
            await settle(pilot)
        refusals = [t for t in said(app) if "Refused" in t]
        assert len(refusals) == 5 and "only the present" in refusals[0] and "esc returns to now" in refusals[0]
        person = next(g.user_id for g in ws.desk.grants() if not is_system(g.user_id))
        new_run = await ws.desk.start_run(person, "a question asked while looking back")
        await ws.timeline.settled()
        await pilot.press("right_square_bracket")  # a step redraws, and counts what arrived
        await settle(pilot)
        assert "new since, not drawn" in screen.banner
        assert new_run not in screen.shown["time-runs"] and screen.shown["time-runs"] == runs_before
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("H")  # now again: the new run is there
        await settle(pilot, 5)
        assert new_run in time_screen(app).shown["time-runs"]


async def test_a_typed_time_jumps_and_a_bad_one_is_said(app: Any) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        screen = await enter(pilot)
        first = ws.timeline.store.first()
        await pilot.press("g")
        await settle(pilot)
        field = screen.query_one("#time-when", Input)
        assert field.has_focus
        field.value = "yesterday-ish"
        await pilot.press("enter")
        await settle(pilot)
        assert any("not a time" in t for t in said(app))
        field.value = "-2d"  # before every change: the first one
        await pilot.press("enter")
        await settle(pilot, 5)
        assert screen.cursor.moment == first
        assert not field.has_class("shown")


async def test_fork_at_the_cursor_forks_the_turn_the_run_was_on(app: Any) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        run = next(v for v in ws.desk.runs() if not v.system and v.status == "idle")
        turns_then = len(ws.desk.turns(run.id))
        await ws.desk.send_message(run.id, "one more thing")
        await ws.desk.reply(run.id, "done", chunks=1)
        await ws.timeline.settled()
        await settle(pilot)
        assert len(ws.desk.turns(run.id)) == turns_then + 1
        screen = await enter(pilot)
        screen.query_one("#time-runs", DataTable).move_cursor(row=screen.shown["time-runs"].index(run.id))
        await settle(pilot)
        for _ in range(200):  # back to before the new turn started
            seq = await screen.cursor.seq(run.id)
            if len([e for e in ws.desk.mirror.events(run.id) if e.get("type") == "node.turn.started"
                    and e.get("node_id", run.id) == run.id and int(e["seq"]) <= seq]) == turns_then:
                break
            await pilot.press("left_square_bracket")
            await settle(pilot)
        await pilot.press("F")
        await settle(pilot, 5)
        forks = [v for v in ws.desk.runs() if v.forked_from == run.id]
        assert len(forks) == 1 and forks[0].forked_at_turn == turns_then, [t for t in said(app)]


async def test_a_minute_back_and_forward_and_the_key_help(settings: Any) -> None:
    from screens.help import HelpScreen
    from workbench.app import make_app

    app = make_app(settings)
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        clock = ws.settings.clock
        run = next(v for v in ws.desk.runs() if not v.system and v.status == "idle")
        at = []
        for minute in range(3):  # three replies, two minutes apart
            clock.advance(120.0)
            await ws.desk.reply(run.id, f"reply {minute}", chunks=1)
            await ws.timeline.settled()
            at.append(ws.timeline.store.last())
        screen = await enter(pilot)
        assert screen.cursor.moment == at[-1]
        await pilot.press("left_curly_bracket")  # a minute back: before the last reply's changes
        await settle(pilot, 5)
        assert at[-2] <= screen.cursor.moment < at[-1]
        await pilot.press("left_curly_bracket", "left_curly_bracket")
        await settle(pilot, 5)
        assert screen.cursor.moment < at[-2]
        back = screen.cursor.moment
        await pilot.press("right_curly_bracket")  # a quiet minute is stepped over: at least one change forward
        await settle(pilot, 5)
        assert back < screen.cursor.moment
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        listed = [line.description for _, lines in app.screen.query_one("#help-keys").groups for line in lines]
        assert {"Back", "Minute on", "Go to time", "Fork here"} <= set(listed)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen


async def test_a_damaged_history_is_said_not_a_crash(app: Any) -> None:
    """A history row that is not a JSON object (a file damaged, or written by something else): time
    mode says so in its banner and a toast, the window goes on, and esc returns to now."""
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        await ws.timeline.settled()
        ws.timeline.store._db.execute("UPDATE rows SET value = '[1, 2]' WHERE kind = 'grant'")
        screen = await enter(pilot)
        assert screen.banner.startswith("the history cannot be read here") and "not a JSON object" in screen.banner
        assert any("not a JSON object" in t for t in said(app))
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, TimeScreen) and app.is_running
