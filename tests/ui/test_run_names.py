"""A run is named by its one display name (``run_title``) wherever the window names it: the judgments
pane's rows, outcome list and detail name a run record by its run's title, not its id (issue 37)."""

from __future__ import annotations

from textual.widgets import DataTable, SelectionList, Static

from .conftest import ready, settle


async def test_the_judgments_pane_names_a_run_record_by_its_run_title(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        run = ws.desk.view("run_sample_garden")
        assert run.name == "garden plan"
        for key in [k for k in pane.items if k.startswith("okf:")]:
            pane.select_key(key)
            await settle(pilot)
            if any(o.input_kind == "record" for o in pane.detail.outcomes):
                break
        else:
            raise AssertionError("no judgment of a run record in the sample world")
        table = pane.query_one("#judgments-table", DataTable)
        rows = " ".join(str(table.get_row(k)[1]) for k in [row.key.value for row in table.ordered_rows])
        assert "garden plan" in rows and "run_sample_garden" not in rows
        outcomes = pane.query_one("#judgment-outcomes", SelectionList)
        labels = " ".join(str(outcomes.get_option_at_index(i).prompt) for i in range(outcomes.option_count))
        assert "record garden plan" in labels and "run_sample_garden" not in labels
        detail = str(pane.query_one("#judgment-text", Static).render())
        assert "record garden plan" in detail and "record run_sample_garden" not in detail
