"""Confirmation where it matters: ``x`` and ``d`` name the run; revoking a grant asks; a partial approval
names the outcomes it will decline; ``x`` on a settled run says nothing changed."""

from __future__ import annotations

from textual.widgets import Label, SelectionList

from screens.dialogs import ConfirmDialog, FormDialog
from tests.toasts import raised

from .conftest import ready, settle


def question(app) -> str:
    return str(app.screen.query_one(".dialog-title", Label).render())


async def test_cancel_and_delete_confirm_with_the_run_title(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        runs = app.main.pane("runs")
        view = next(v for v in ws.desk.runs() if v.status not in ("settled", "deleted") and v.name)
        runs.select_key(view.id)
        await settle(pilot)
        run_id, status = view.id, view.status
        assert runs.selected == run_id
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert f"Cancel run “{view.name}" in question(app) and run_id in question(app)
        await pilot.press("n")
        await settle(pilot)
        assert {v.id: v.status for v in ws.desk.runs()}[run_id] == status  # declined: nothing changed
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog) and f"Delete run “{view.name}" in question(app)
        await pilot.press("escape")
        await settle(pilot)
        assert run_id in {v.id for v in ws.desk.runs() if v.status != "deleted"}


async def test_cancel_of_a_settled_run_says_nothing_changed(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        runs = app.main.pane("runs")
        run_id = next(v.id for v in ws.desk.runs() if v.status == "settled")
        runs.select_key(run_id)
        await settle(pilot)
        assert ws.desk.detail(run_id).settled
        events = len(ws.desk.detail(run_id).events)
        await pilot.press("x")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmDialog)
        assert any("already settled: nothing to cancel" in n.message for n in raised(app))
        assert not any(n.message == "Run canceled." for n in raised(app))
        assert len(ws.desk.detail(run_id).events) == events  # nothing appended, nothing logged
        assert "cancel" not in [a.action for a in ws.desk.log(run_id)]


async def test_revoking_a_grant_asks_first(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("4")
        await settle(pilot)
        before = [(g.user_id, g.state) for g in ws.desk.grants()]
        await pilot.press("k")
        await settle(pilot)
        assert isinstance(app.screen, FormDialog)
        assert question(app).startswith("Revoke the grant of") and "?" in question(app)
        await pilot.press("escape")
        await settle(pilot)
        assert [(g.user_id, g.state) for g in ws.desk.grants()] == before


async def test_partial_approval_names_what_will_be_declined(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        outcomes = pane.query_one("#judgment-outcomes", SelectionList)
        for key in list(pane.items):
            if key.startswith("okf:"):
                pane.select_key(key)
                await settle(pilot)
                if outcomes.option_count >= 2:
                    break
        assert outcomes.option_count >= 2, "the sample world has a judgment with several outcomes"
        first = outcomes.get_option_at_index(0)
        outcomes.select(first.value)
        pending = [i.id for i in await ws.okf.queue() if i.state == "pending"]
        pane.focus()
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        text = question(app)
        assert f"Approve 1 of {outcomes.option_count} outcomes?" in text and "will be declined" in text
        assert str(outcomes.get_option_at_index(1).prompt)[:30] in text
        await pilot.press("n")
        await settle(pilot)
        assert [i.id for i in await ws.okf.queue() if i.state == "pending"] == pending  # nothing approved
