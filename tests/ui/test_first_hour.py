"""What a newcomer meets in the first hour: system runs set apart, one name and one line per action,
refusals traced where they happened, help for every key (issue 37)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from services.desk import JUDGE_USER
from tests.ui.conftest import ready, settle


def listed(pilot: Any) -> list[str]:
    table = pilot.app.main.query_one("#runs-table", DataTable)
    return [str(key.value) for key in table.rows]


async def test_system_runs_are_hidden_counted_and_shown_by_A(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        ws = await ready(pilot)
        pane = pilot.app.main.pane("runs")
        judge = [v.id for v in ws.desk.runs() if v.user_id == JUDGE_USER]
        assert len(judge) == 2
        assert not set(judge) & set(listed(pilot))
        assert "· 2 system runs" in pane.count_label
        assert pane.count_label.startswith("4 runs")
        pane.focus_main()
        await pilot.press("A")
        await settle(pilot)
        assert set(judge) <= set(listed(pilot))
        assert "2 system runs shown" in pane.count_label
        table = pilot.app.main.query_one("#runs-table", DataTable)
        row = table.get_row(judge[0])
        assert row[1].plain.startswith("system · okf judgment")
        await pilot.press("A")
        await settle(pilot)
        assert not set(judge) & set(listed(pilot))


async def test_system_nodes_are_hidden_with_the_runs_and_the_grant_says_system(app) -> None:
    async with app.run_test(size=(160, 50)) as pilot:
        ws = await ready(pilot)
        inbox = pilot.app.main.pane("inbox")
        table = pilot.app.main.query_one("#inbox-nodes", DataTable)
        assert not [k for k in table.rows if str(k.value).startswith("run_judge")]
        assert inbox.count_label.endswith("· 2 system")
        pilot.app.main.pane("runs").focus_main()
        await pilot.press("A")
        await settle(pilot)
        names = [table.get_row_at(i)[0].plain for i in range(table.row_count)]
        judges = [n for n in names if n.startswith("okf judgment")]
        assert len(judges) == 2 and len(set(judges)) == 2  # one title: each with its short id
        assert inbox.count_label.endswith("+ 2 system")
        grants = pilot.app.main.pane("grants")
        grants.select_key(JUDGE_USER)
        await settle(pilot)
        detail = str(pilot.app.main.query_one("#grant-detail").render())
        assert "system: the workbench's own person" in detail
        assert ws.desk.runs()


async def test_a_started_run_has_one_name_everywhere(app) -> None:
    """A run started with ``n`` is its prompt's title in the toast, the canvas and the inbox (not its id);
    the inbox tells two runs of one title apart by a short id."""
    from tests.toasts import said
    from tests.ui.conftest import type_text

    async with app.run_test(size=(160, 50)) as pilot:
        ws = await ready(pilot)
        pane = pilot.app.main.pane("runs")
        pane.focus_main()
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("tab")
        await type_text(pilot, "Plan the bee inspection")
        await pilot.press("enter")
        await settle(pilot)
        await ws.follower.idle()
        await settle(pilot)
        run_id = next(r.id for r in ws.desk.runs() if r.prompt == "Plan the bee inspection")
        assert any(t.startswith("Run “Plan the bee inspection” started.") for t in said(pilot.app))
        node = await ws.canvas.get(run_id)
        assert node.name == "Plan the bee inspection"
        inbox = pilot.app.main.query_one("#inbox-nodes", DataTable)
        names = [inbox.get_row_at(i)[0].plain for i in range(inbox.row_count)]
        assert "Plan the bee inspection" in names


async def test_a_refused_start_is_not_traced_on_the_persons_earlier_run(app) -> None:
    """Starting a run for a revoked person is refused in the form once, in the cloud's words (the code not
    repeated), and the person's earlier run, which was not involved, shows no refusal."""
    from tests.ui.conftest import type_text

    async with app.run_test(size=(160, 45)) as pilot:
        ws = await ready(pilot)
        earlier = next(r for r in ws.desk.runs() if r.name == "talk outline")
        await ws.desk.revoke("user:grace", "grant_revoked")
        pane = pilot.app.main.pane("runs")
        pane.select_key(earlier.id)
        pane.focus_main()
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        from screens.dialogs.form import FormSelect

        pilot.app.screen.query_one(FormSelect).value = "user:grace"
        await settle(pilot)
        await pilot.press("tab")
        await type_text(pilot, "Plan the bee inspection")
        await pilot.press("enter")
        await settle(pilot)
        error = str(pilot.app.screen.query_one("#form-error").render())
        assert error.count("grant_revoked") == 1, error
        await pilot.press("escape")
        await settle(pilot)
        assert [r.start for r in ws.desk.refusals] == [True]
        pane.select_key(earlier.id)
        await settle(pilot)
        stream = pilot.app.main.query_one("#runs-stream")
        stream.flush()
        assert not [line for line in stream.shown if "refused" in line]
        assert "‼" not in str(pilot.app.main.query_one("#run-info").render())
