"""``space`` in the judgments pane ticks an outcome from the queue (no tab into the outcome list first)."""

from __future__ import annotations

from textual.widgets import DataTable, SelectionList

from .conftest import ready, settle


async def test_space_ticks_an_outcome_from_the_queue(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        outcomes = pane.query_one("#judgment-outcomes", SelectionList)
        for key in list(pane.items):
            if key.startswith("okf:"):
                pane.select_key(key)
                await settle(pilot)
                if outcomes.option_count >= 1 and outcomes.display:
                    break
        assert outcomes.option_count >= 1
        pane.query_one(DataTable).focus()
        await pilot.press("space")
        await settle(pilot)
        assert list(outcomes.selected) == [outcomes.get_option_at_index(0).value]
