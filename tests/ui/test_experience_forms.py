"""No stale screens: every dialog that changes something keeps what was typed when the change is
refused, says why inline, and closes (with the change made) once the input is fixed."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input, Label, TextArea

from screens.dialogs import FormDialog
from tests.toasts import raised

from .conftest import ready, settle


def run_named(ws: Any, name: str) -> Any:
    return next(r for r in ws.desk.runs() if r.name == name)


def type_into(dialog: FormDialog, field: str, text: str) -> None:
    widget = dialog.query_one(f"#field-{field}")
    if isinstance(widget, TextArea):
        widget.text = text
    else:
        assert isinstance(widget, Input)
        widget.value = text


def typed(dialog: FormDialog, field: str) -> str:
    widget = dialog.query_one(f"#field-{field}")
    return widget.text if isinstance(widget, TextArea) else widget.value  # type: ignore[attr-defined]


async def refused_then_fixed(pilot: Any, key: str, field: str, bad: str, error: str, good: str,
                             logged: bool = True) -> None:
    """``key`` opens a form; ``bad`` is refused inline with ``error`` and kept; ``good`` closes it.
    A refusal the service made is ``logged``; one the form's own check makes never reached it."""
    app = pilot.app
    await pilot.press(key)
    await settle(pilot)
    dialog = app.screen
    assert isinstance(dialog, FormDialog), dialog
    type_into(dialog, field, bad)
    await pilot.press("ctrl+s")
    await settle(pilot)
    assert app.screen is dialog  # still open
    assert typed(dialog, field) == bad  # nothing typed is lost
    assert error in str(dialog.query_one("#form-error", Label).render())
    assert any(error in e for e in app.errors) == logged  # a service's refusal is kept for the log too
    type_into(dialog, field, good)
    await pilot.press("ctrl+s")
    await settle(pilot)
    assert not isinstance(app.screen, FormDialog)


async def test_a_bad_scope_is_said_in_the_scopes_form_and_the_grant_is_unchanged(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("4")
        app.main.pane("grants").select_key("user:linus")
        app.main.pane("grants").focus_main()
        await settle(pilot)
        before = next(g for g in ws.desk.grants() if g.user_id == "user:linus")
        await refused_then_fixed(pilot, "e", "scopes", "crtr:llm notascope", "scopes look like", "crtr:llm crtr:act")
        after = next(g for g in ws.desk.grants() if g.user_id == "user:linus")
        assert after.scopes == ("crtr:llm", "crtr:act") and after.rev > before.rev
        assert [a.action for a in ws.desk.log(next(r.id for r in ws.desk.runs() if r.user_id == "user:linus"))][-1:] \
            == ["grant set scopes"]


async def test_an_empty_question_and_an_event_without_a_type_stay_in_their_forms(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await pilot.press("3")
        app.main.pane("runs").select_key(run.id)
        app.main.pane("runs").focus_main()
        await settle(pilot)
        events = len(ws.desk.detail(run.id).events)
        await refused_then_fixed(pilot, "e", "type", "  ", "an event needs a type", "node.activity")
        assert ws.desk.detail(run.id).events[-1]["type"] == "node.activity"
        assert len(ws.desk.detail(run.id).events) == events + 1  # the refused one appended nothing
        await refused_then_fixed(pilot, "a", "title", "   ", "Type the question to ask first.", "Merge it?",
                                 logged=False)  # the form checks it
        detail = ws.desk.detail(run.id)
        assert detail.status == "waiting_on_user" and detail.question["title"] == "Merge it?"
        assert [a.action for a in ws.desk.log(run.id)] == ["emit", "ask"]


async def test_an_empty_reason_and_an_empty_truth_stay_in_the_judgments_forms(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        first = (await ws.insights.list())[0]
        pane = app.main.pane("judgments")
        pane.select_key(f"insight:{first.id}")
        await settle(pilot)
        pane.focus_main()
        await refused_then_fixed(pilot, "y", "truth", "  ", "the approved truth is empty", "Answers lead, reasons follow.")
        approved = await ws.insights.get(first.id)
        assert approved.status == "approved" and approved.text == "Answers lead, reasons follow."
        okf = next(i for i in await ws.okf.queue() if i.state == "pending")
        pane.select_key(f"okf:{okf.id}")
        await settle(pilot)
        pane.focus_main()
        await refused_then_fixed(pilot, "n", "reason", "", "a rejection needs a reason", "too specific")
        rejected = next(i for i in await ws.okf.queue() if i.id == okf.id)
        assert rejected.state == "rejected" and rejected.reason == "too specific"


async def test_an_empty_message_to_a_node_stays_in_its_form(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("2")
        await settle(pilot)
        node = app.main.pane("inbox").node
        assert node
        total = (await ws.canvas.inbox(node)).total
        await refused_then_fixed(pilot, "m", "body", "", "a message needs a body", "water the basil")
        assert any(n.message == "Message sent to the node." for n in raised(app))
        assert (await ws.canvas.inbox(node)).total == total + 1  # one message: the refused one left nothing
