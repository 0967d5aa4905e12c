"""The runs list holds a window of its runs as table rows, not every run: a workspace of many runs
costs the list what it shows. The cursor still walks every run, the ends and a jump reach any run,
and a run outside the window still changes the list's counts."""

from __future__ import annotations

import re
from typing import Any

import pytest

import screens.runs as runs_module
from screens.widgets.fit_table import FitTable
from tests.ui.conftest import ready, settle, type_text

ROWS = 30
EDGE = 4
MORE = 90
"""Runs started beside the sample world's: three windows' worth."""
PALETTE = 10


@pytest.fixture(autouse=True)
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_module, "ROWS", ROWS)
    monkeypatch.setattr(runs_module, "EDGE", EDGE)
    monkeypatch.setattr(runs_module, "PALETTE_RUNS", PALETTE)


async def _many(pilot: Any) -> tuple[Any, Any, FitTable]:
    ws = await ready(pilot)
    client = ws.cloud.crouter("user:ada")
    for number in range(MORE):
        await client.runs.start(prompt=f"many {number}")
    await client.aclose()
    pane = pilot.app.main.pane("runs")
    await pilot.press("3")
    pane.reload()
    await settle(pilot)
    table = pane.query_one("#runs-table", FitTable)
    table.focus()
    await settle(pilot)
    return ws, pane, table


def _on_screen(pane: Any, table: FitTable) -> None:
    """The selected run is the cursor's row, and that row is on screen."""
    assert pane._order[table.cursor_row] == pane.selected
    assert 0 <= table.cursor_row - round(table.scroll_y) < table.scrollable_content_region.height


async def test_the_cursor_walks_every_run_through_a_window_of_rows(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)
        listed = [v.id for v in ws.desk.runs() if not v.system]
        assert pane._ids == listed and len(listed) > 3 * ROWS
        assert table.row_count == ROWS  # the table holds a window, the count names them all
        assert pane.count_label.startswith(f"{len(listed)} runs")
        await pilot.press("ctrl+home")
        await settle(pilot)
        assert pane.selected == listed[0]
        for index in range(1, len(listed)):
            await pilot.press("down")
            assert pane.selected == listed[index]
            _on_screen(pane, table)
            assert table.row_count == ROWS
        await pilot.press("down")  # past the last run: it stays
        assert pane.selected == listed[-1]
        for index in range(len(listed) - 2, -1, -1):
            await pilot.press("up")
            assert pane.selected == listed[index]
            _on_screen(pane, table)
        await settle(pilot)
        assert pane._order == listed[:ROWS] and table.cursor_row == 0 and round(table.scroll_y) == 0


async def test_the_ends_and_a_jump_reach_runs_outside_the_window(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)
        listed = pane._ids
        await pilot.press("ctrl+end")
        await settle(pilot)
        assert pane.selected == listed[-1] and pane._order[-1] == listed[-1]
        _on_screen(pane, table)
        await pilot.press("ctrl+home")
        await settle(pilot)
        assert pane.selected == listed[0] and pane._top == 0
        middle = listed[len(listed) // 2]
        assert middle not in pane._order
        pane.select_key(middle)  # a jump (the palette, a link) to a run no row holds
        await settle(pilot)
        assert pane.selected == middle
        _on_screen(pane, table)
        for _ in range(3):
            await pilot.press("pagedown")
        await settle(pilot)
        _on_screen(pane, table)
        assert listed.index(pane.selected) > listed.index(middle)


async def test_a_run_outside_the_window_still_changes_the_counts_and_a_new_run_keeps_the_cursor(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)
        await pilot.press("ctrl+home")
        await settle(pilot)
        far = pane._ids[-1]
        assert far not in pane._order
        waiting = ws.desk.waiting_on_user()
        ws.cloud.runs.get(far).ask(title="far away?")
        await settle(pilot)
        assert f"{waiting + 1} waiting on user" in pane.count_label
        assert pane._listed[far].status == "waiting_on_user"
        pane.select_key(far)
        await settle(pilot)
        assert pane._table_rows[far][2].plain == "waiting on user"
        before = len(pane._ids)
        client = ws.cloud.crouter("user:ada")
        await client.runs.start(prompt="one more")
        await client.aclose()
        await settle(pilot)
        assert len(pane._ids) == before + 1 and pane.count_label.startswith(f"{before + 1} runs")
        assert pane.selected == far  # a new run at the top moves no cursor
        _on_screen(pane, table)


async def test_the_palette_is_offered_a_page_of_runs_and_jumps_to_any(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)
        newest = [v.id for v in ws.desk.runs()][:PALETTE]
        assert [key for _label, key in await pane.palette_search("")] == newest
        found = await pane.palette_search("many 7")  # the query whole: many 7 and many 70 ... 79, as listed
        assert [label.split(" · ")[0] for label, _ in found] == [
            f"run {v.prompt}" for v in ws.desk.runs() if "many 7" in v.prompt][:PALETTE]
        loose = await pane.palette_search("mny 8")  # its letters in order, as the palette's fuzzy match takes them
        assert 0 < len(loose) <= PALETTE
        assert all(re.search("m.*n.*y.* .*8", f"go to {label}".lower()) for label, _ in loose)
        assert await pane.palette_search("no such run at all") == []
        old = ws.desk.view(next(run_id for run_id in reversed(pane._ids) if run_id not in pane._order))
        await pilot.press("ctrl+p")
        await settle(pilot)
        await type_text(pilot, old.id)
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert pane.selected == old.id
        _on_screen(pane, table)


def _drawn(pane: Any) -> tuple[Any, ...]:
    """What the list shows: its title, its runs in order, the table's rows (as text), the selection, the window's top."""
    rows = {key: tuple(cell.plain if hasattr(cell, "plain") else str(cell) for cell in cells)
            for key, cells in pane._table_rows.items()}
    return pane.count_label, list(pane._ids), rows, pane.selected, pane._top


def _count_reloads(pane: Any) -> list[None]:
    """Each whole redraw of the list from here on, as an item of the list answered."""
    whole, seen = pane.reload, []

    def counted() -> None:
        seen.append(None)
        whole()

    pane.reload = counted
    return seen


async def test_a_status_changed_in_place_draws_what_a_whole_redraw_draws(app: Any) -> None:
    """A run's new status is taken into its row and the title's counts where it is, inside the table's
    window or beyond it, and what is drawn is what the list made again whole would draw; a run the
    filter no longer keeps makes it again."""
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)

        inside, beyond = pane._order[2], pane._ids[-1]
        assert beyond not in pane._table_rows
        whole, reloads = pane.reload, _count_reloads(pane)
        waiting = pane.count_label
        for run_id in (inside, beyond):  # as the runtime does it, not an operator's action
            ws.cloud.runs.get(run_id).ask(title="which one?")
            await settle(pilot)
        ws.cloud.runs.get(beyond).settle(result="done")
        await settle(pilot)
        assert not reloads  # each status was taken in place
        assert pane.count_label != waiting and ws.desk.view(beyond).status == "settled"
        in_place = _drawn(pane)
        pane.forget_drawn()
        whole()
        await settle(pilot)
        assert _drawn(pane) == in_place

        pane.filter_text = "status:waiting"
        await settle(pilot)
        kept = list(pane._ids)
        assert inside in kept
        ws.cloud.runs.get(inside).settle(result="done asking")
        await settle(pilot)
        assert reloads and inside not in pane._ids and len(pane._ids) == len(kept) - 1


async def test_a_run_started_elsewhere_is_taken_in_where_a_whole_redraw_puts_it(app: Any) -> None:
    """Runs another client starts are listed in place (no whole redraw) where the list made again
    would put them, the table's rows drawn again only when one falls among them; with a filter typed
    the list is made again."""
    async with app.run_test(size=(120, 40)) as pilot:
        ws, pane, table = await _many(pilot)

        whole, reloads = pane.reload, _count_reloads(pane)
        client = ws.cloud.crouter("user:grace")
        before = len(pane._ids)
        started = []
        for n in range(3):
            ws.settings.clock.advance(1.0)  # each started after every run listed
            started.append((await client.runs.start(prompt=f"elsewhere {n}")).id)
        await settle(pilot)
        assert not reloads and pane._ids[:3] == started[::-1] and len(pane._ids) == before + 3
        in_place = _drawn(pane)
        pane.forget_drawn()
        whole()
        await settle(pilot)
        assert _drawn(pane) == in_place

        await pilot.press("ctrl+end")  # the table's window at the far end: a new run is not among its rows
        await settle(pilot)
        far = _drawn(pane)
        ws.settings.clock.advance(1.0)
        newest = (await client.runs.start(prompt="while far")).id
        await settle(pilot)
        assert not reloads and pane._ids[0] == newest and pane._top == far[4] + 1
        assert pane._table_rows.keys() == far[2].keys()  # the same rows, none drawn again
        in_place = _drawn(pane)
        pane.forget_drawn()
        whole()
        await settle(pilot)
        again = _drawn(pane)  # the same runs in the same rows (their ages drawn at another now)
        assert (again[0], again[1], list(again[2]), again[3]) == (in_place[0], in_place[1], list(in_place[2]), in_place[3])

        pane.filter_text = "elsewhere"
        await settle(pilot)
        reloads.clear()
        ws.settings.clock.advance(1.0)
        await client.runs.start(prompt="elsewhere again")
        await settle(pilot)
        assert len(reloads) == 1 and len(pane._ids) == 4
        await client.aclose()
