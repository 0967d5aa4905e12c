"""Every run action's toast says what actually happened: the state is read back after the action,
and an action that the run's state would make a no-op (or a lie) is refused first with a reason."""

from __future__ import annotations

from typing import Any

from screens.dialogs import ConfirmDialog, FormDialog

from tests.toasts import said, until_said

from .conftest import ready, run_named, settle, show_run, type_text


def toasts(app: Any) -> list[str]:
    """Every toast the App raised, expired or not."""
    return said(app)


async def test_idle_after_a_question_is_refused_and_the_run_stays_waiting(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await show_run(pilot, run.id)
        await ws.desk.ask(run.id, "Merge it?")
        await settle(pilot)
        events = len(ws.desk.detail(run.id).events)
        await pilot.press("i")
        await settle(pilot)
        detail = ws.desk.detail(run.id)
        assert detail.status == "waiting_on_user" and len(detail.events) == events
        assert not any(t.startswith("Run went idle") or t.startswith("Stopped") for t in toasts(app))
        assert any("“Merge it?”: it stays waiting on user" in t for t in toasts(app))


async def test_idle_settle_and_cancel_of_a_settled_run_are_refused_and_nothing_changes(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await ws.desk.settle(run.id, "result", "merged")
        await show_run(pilot, run.id)
        events = len(ws.desk.detail(run.id).events)
        for key, verb in (("i", "make idle"), ("s", "settle"), ("x", "cancel")):
            await pilot.press(key)
            await settle(pilot)
            assert not isinstance(app.screen, (FormDialog, ConfirmDialog)), key
            assert any(f"is already settled: nothing to {verb}. It ended with a result." in t for t in toasts(app)), key
        detail = ws.desk.detail(run.id)
        assert detail.settled and detail.outcome["outcome"] == "result" and len(detail.events) == events
        assert [a.action for a in ws.desk.log(run.id)] == ["settle"]


async def test_idle_says_idle_only_when_the_run_went_idle(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await ws.desk.append_event(run.id, "node.activity", '{"activity": "tool"}')
        await show_run(pilot, run.id)
        assert ws.desk.detail(run.id).status == "running"
        await pilot.press("i")
        await settle(pilot)
        assert ws.desk.detail(run.id).status == "idle"
        assert "Stopped without a new turn. The run is idle (it was running)." in toasts(app)


async def test_a_reply_to_a_settled_run_says_it_reopened_it(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await ws.desk.settle(run.id, "result", "merged")
        await show_run(pilot, run.id)
        await pilot.press("r")
        await settle(pilot)
        await type_text(pilot, "one more thing")
        await pilot.press("ctrl+s")
        await settle(pilot)
        status = ws.desk.detail(run.id).status
        assert status != "settled"
        replied = f"Replied as the model. The run is {status.replace('_', ' ')} (it was settled)."
        assert replied in await until_said(pilot, lambda words: replied in words)
        await pilot.press("f")
        await settle(pilot)
        await pilot.press("ctrl+s")  # the first code, model_error
        await settle(pilot)
        assert ws.desk.detail(run.id).last_turn_error["code"] == "model_error"
        failed = f"Turn failed. The run is {ws.desk.detail(run.id).status.replace('_', ' ')}."
        assert failed in await until_said(pilot, lambda words: failed in words)


async def test_ask_emit_cancel_and_delete_say_the_state_they_left(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await show_run(pilot, run.id)
        await pilot.press("a")
        await settle(pilot)
        await type_text(pilot, "Merge it?")
        await pilot.press("enter")
        await settle(pilot)
        assert ("Question asked. The run is waiting on user (it was idle). Its question is open: “Merge it?”."
                in toasts(app))
        await pilot.press("e")
        await settle(pilot)
        await type_text(pilot, "node.note")
        await pilot.press("enter")
        await settle(pilot)
        assert "Event emitted. The run is waiting on user. Its question is open: “Merge it?”." in toasts(app)
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert ws.desk.detail(run.id).outcome["outcome"] == "canceled"
        assert "Run canceled." in toasts(app)
        talk = run_named(ws, "talk outline")
        await show_run(pilot, talk.id)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "Run deleted. The run is deleted (it was idle)." in toasts(app) or \
            "Run deleted. The run is gone." in toasts(app)
