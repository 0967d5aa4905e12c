"""No stale screens: every banner is drawn from the current state (the latest turn, the grant as it
is now), never from the last event seen; a state that has passed takes its banner with it."""

from __future__ import annotations

from typing import Any

import pytest
from rich.cells import cell_len
from textual.widgets import Static

from .conftest import ready, run_named, settle, show_run




def run_info(pilot: Any) -> str:
    return str(pilot.app.main.query_one("#run-info", Static).render())


def grant_detail(pilot: Any) -> str:
    return str(pilot.app.main.query_one("#grant-detail", Static).render())


async def test_a_failed_turn_banner_goes_once_a_later_turn_succeeds(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        await show_run(pilot, run.id)
        await ws.desk.fail_turn(run.id, "model_error", "the model failed")
        await settle(pilot)
        assert "✗ model_error" in run_info(pilot)
        await ws.desk.reply(run.id, "all good now")
        await settle(pilot)
        assert "model_error" not in run_info(pilot)
        assert "✗ turn failed: model_error" in "\n".join(pilot.app.main.query_one("#runs-stream").shown)  # history stays


async def test_a_refusal_banner_goes_once_the_grant_is_restored(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        runs = await show_run(pilot, run.id)
        await ws.desk.revoke("user:grace", "grant_suspended")
        runs.act("", lambda: ws.desk.send_message(run.id, "hello"))
        await settle(pilot)
        assert [r.code for r in ws.desk.refusals] == ["grant_suspended"]
        assert "‼ grant_suspended" in run_info(pilot)
        assert app.main.query_one("#badges").refusals == 1
        await ws.desk.restore("user:grace")
        await settle(pilot)
        assert app.main.query_one("#badges").refusals == 0  # within the minute, but the grant refuses no more
        assert ws.desk.refusals  # the record is kept: the stream still shows it as history
        assert "‼" not in run_info(pilot)
        assert "‼ refused grant_suspended" in "\n".join(pilot.app.main.query_one("#runs-stream").shown)
        await pilot.press("4")
        app.main.pane("grants").select_key("user:grace")
        await settle(pilot)
        detail = grant_detail(pilot)
        assert "current refusal: none" in detail and "revoked with" not in detail
        assert "before the grant was restored" in detail


LONG = "Summarise every open question from the quarterly planning notes and draft replies for each owner"


def table_line(table: Any, key: str) -> str:
    """The row ``key`` as the table draws it now (its cells, padded, as one line of text)."""
    row = table.get_row_index(key)
    table.scroll_to(y=max(0, row - 1), animate=False, immediate=True)
    return table.render_line(row + 1 - int(table.scroll_y)).text.rstrip()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_cut_run_title_ends_with_an_ellipsis_at_every_size(app, size) -> None:
    async with app.run_test(size=size) as pilot:
        ws = await ready(pilot)
        run_id = await ws.desk.start_run("user:ada", LONG)
        short = await ws.desk.start_run("user:ada", "hi")
        await settle(pilot)
        await show_run(pilot, run_id)
        table = app.main.query_one("#runs-table")
        line = table_line(table, run_id)
        assert cell_len(line) <= table.scrollable_content_region.width
        start = line.index(LONG[:12])  # the title comes right after the status glyph, so it is always shown
        cut = line[start:line.index("…", start)]
        assert len(cut) >= 12 and LONG.startswith(cut) and LONG not in line, line
        assert LONG in run_info(pilot)  # whole in the info line
        assert "hi " in table_line(table, short) and "…" not in table_line(table, short)  # a title that fits is not cut


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_every_judgments_row_says_what_it_judges_in_either_layout(app, size) -> None:
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        assert app.main.compact == (size[0] < 160)
        table = app.main.query_one("#judgments-table")
        assert len(pane.items) >= 3
        shown = []
        for key, item in pane.items.items():
            what = pane._what(key, item)
            line = table_line(table, key)
            start = line.index(what[:10])  # second column: never the one a narrow pane clips
            shown.append(line[start:].split("  ")[0])
            assert what.startswith(shown[-1].rstrip("…")), line
        assert len(set(shown)) == len(shown), shown  # rows that judge different things read differently


@pytest.mark.parametrize("flex", [0, -1])
@pytest.mark.parametrize("width", [30, 50, 120])
async def test_a_fit_table_cuts_its_title_column_with_an_ellipsis_at_any_width(flex, width) -> None:
    """The widget every pane's list uses: the flexible column (first or last) fits the room left and
    ends in … when cut; a title that fits is whole."""
    from rich.text import Text
    from textual.app import App, ComposeResult

    from screens.widgets.fit_table import FitTable, fit_cell

    title = "A run title long enough to be cut in any pane narrower than the whole terminal"

    class One(App[None]):
        def compose(self) -> ComposeResult:
            table = FitTable(flex=flex, min_width=12)
            table.add_columns(*(["title", "status", "person"] if flex == 0 else ["status", "person", "title"]))
            cells = [fit_cell(Text(title)), Text("idle"), Text("user:ada")]
            short = [fit_cell(Text("short")), Text("idle"), Text("user:ada")]
            table.add_row(*(cells if flex == 0 else cells[1:] + cells[:1]), key="long")
            table.add_row(*(short if flex == 0 else short[1:] + short[:1]), key="short")
            yield table

    app = One()
    async with app.run_test(size=(width, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(FitTable)
        long_line, short_line = table_line(table, "long"), table_line(table, "short")
        assert cell_len(long_line) <= width
        if width >= 120:
            assert title in long_line and "…" not in long_line
        else:
            start = long_line.index("A run")
            cut = long_line[start:long_line.index("…", start)]
            assert title.startswith(cut) and len(cut) >= 5
        assert "short" in short_line and "…" not in short_line


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_canvas_title_too_long_for_the_tree_ends_with_an_ellipsis(app, size) -> None:
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.press("1")
        await settle(pilot)
        tree = app.main.query_one("#canvas-tree")
        width = tree.scrollable_content_region.width
        lines = [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]
        titled = [line for line in lines if "knowledge/garden-" in line]
        assert titled, lines
        for line in lines:
            assert cell_len(line) <= width
        whole = "knowledge/garden-layout · document"
        assert all(whole in line or line.endswith("…") for line in titled), titled
        assert size[0] > 100 or any(line.endswith("…") for line in titled)  # 80 columns cut it
