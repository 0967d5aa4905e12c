"""``c`` on one run, then ``c`` on another, compares them side by side with the first difference selected;
``n`` / ``N`` move between differences and ``esc`` closes."""

from __future__ import annotations

from screens.diff import DiffScreen, DiffTable

from .conftest import ready, settle


async def test_c_on_two_runs_opens_the_comparison_at_its_first_difference(app) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        runs = app.main.pane("runs")
        first, second = [v.id for v in ws.desk.runs() if not v.system][:2]
        runs.select_key(first)
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert runs.compare_with == first and not isinstance(app.screen, DiffScreen)
        runs.select_key(second)
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen) and screen.differences
        table = screen.query_one("#diff-table", DiffTable)
        assert table.cursor_row == screen.differences[0]
        if len(screen.differences) > 1:
            await pilot.press("n")
            assert table.cursor_row == screen.differences[1]
            await pilot.press("N")
            assert table.cursor_row == screen.differences[0]
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main and runs.compare_with is None
