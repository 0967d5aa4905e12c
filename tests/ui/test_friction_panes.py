"""Friction a newcomer met in the panes, each checked as it reads on screen: the key help, the palette,
the wording of toasts, details and badges, the footer's keys, and the tables and inbox at 200x50."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Input, Static
from textual.widgets._footer import FooterKey

from screens.dialogs import FormDialog
from screens.help import HelpScreen, key_table
from screens.runs import RunsPane
from screens.text import counted
from screens.widgets.fit_table import FitTable
from tests.toasts import said as toasts_said

from .conftest import ready, run_named, settle, show_run


def shown(widget: Any) -> str:
    return str(widget.render())


async def test_the_key_help_lists_each_key_once_apart_from_its_words_and_only_the_workbench_keys(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("3", "question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = key_table(app.screen.groups).plain
        lines = [line for line in text.splitlines() if line.startswith("  ")]
        assert "  ctrl+c / super+c  Copy selected text" in lines  # the key column is wider than the longest keys
        assert all("  " in line.strip() for line in lines), [line for line in lines if "  " not in line.strip()]
        everywhere = text.split("Everywhere\n")[1].split("\n\n")[0].splitlines()
        keys = [line.split("  ")[1] for line in everywhere]
        assert keys.count("ctrl+p") == 1 and keys.count("tab") == 1 and keys.count("shift+tab") == 1
        assert "Cursor up" not in text and "Page Left" not in text and "In the runs list" not in text


async def test_the_palette_lists_an_exact_canvas_hit_once(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        ada = await ws.canvas.get("ada")
        items = await app.main.pane("canvas").palette_search("ada")
        assert items[0][1] == ada.id
        assert [key for _label, key in items].count(ada.id) == 1
        assert len({key for _label, key in items}) == len(items)


async def test_a_settled_run_says_how_it_ended_in_words(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await ws.desk.settle(run.id, "result", "merged")
        await show_run(pilot, run.id)
        await pilot.press("s")
        await settle(pilot)
        said = toasts_said(app)
        assert any(m.endswith("nothing to settle. It ended with a result.") for m in said), said
        assert RunsPane._outcome(type("R", (), {"outcome": {"outcome": "deadline_exceeded"}})()) == "past its deadline"


async def test_an_empty_question_is_refused_in_the_words_of_its_field(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "patch review")
        await show_run(pilot, run.id)
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, FormDialog)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, FormDialog)  # stays open
        assert shown(app.screen.query_one("#form-error")) == "Type the question to ask first."
        assert "title" not in shown(app.screen.query_one("#form-error"))
        assert ws.desk.detail(run.id).question is None


async def test_a_revoked_grant_says_its_refusal_and_counts_read_in_the_right_number(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await ws.desk.revoke("user:grace", "grant_revoked")
        await pilot.press("4")
        app.main.pane("grants").select_key("user:grace")
        await settle(pilot)
        detail = shown(app.main.query_one("#grant-detail", Static))
        assert "current refusal: grant_revoked (the grant is revoked; u restores it)" in detail
        assert "none" not in detail.split("current refusal:")[1].splitlines()[0]
        runs = ws.desk.grants()
        grace = next(g for g in runs if g.user_id == "user:grace")
        assert f"· {counted(grace.runs, 'run')}" in detail and "1 runs" not in detail
        badges = app.main.query_one("#badges")
        badges.refusals = 1
        assert "‼ 1 refusal/min" in badges.render().plain
        assert app.main.pane("grants").headline().startswith("4 grants · 1 revoked")


async def test_the_inbox_says_statuses_like_the_runs_pane_and_only_what_it_knows(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("2")
        await settle(pilot)
        nodes = app.main.query_one("#inbox-nodes", DataTable)
        statuses = [str(nodes.get_row_at(i)[1]) for i in range(nodes.row_count)]
        assert "waiting on user" in statuses and not any("_" in s for s in statuses)
        detail = shown(app.main.query_one("#inbox-detail", Static))
        assert "by —" not in detail and "on user" not in detail
        assert "object user" in detail
        assert ws is not None


async def test_footer_keys_are_chips_set_apart_from_their_labels(app) -> None:
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.press("2")
        await settle(pilot)
        keys = {key.key: key.render() for key in app.screen.query(FooterKey)}
        space: Text = keys["space"]
        assert space.plain == " space  Mark read  "
        chip = [span for span in space.spans if span.start == 0 and span.end == len(" space ")]
        assert chip and chip[-1].style != [s for s in space.spans if s.start == len(" space ")][-1].style


async def test_at_200x50_tables_show_columns_whole_and_the_zoomed_inbox_has_no_gap(app) -> None:
    app.layout = "dashboard"
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await pilot.press("3")
        await settle(pilot, 5)
        for table in app.main.query(FitTable):
            if table.keep is None or not table.row_count:
                continue
            labels = [str(c.label) for c in table.ordered_columns]
            assert labels == table.shown_labels[: len(labels)], table.id
            width = sum(c.get_render_width(table) for c in table.ordered_columns)
            assert width <= table.scrollable_content_region.width, (table.id, labels)
        judgments = app.main.query_one("#judgments-table", FitTable)
        assert all(label in ("kind", "what", "state", "verdicts", "created") for label in judgments.shown_labels)
        await pilot.press("2", "z")
        await settle(pilot, 5)
        nodes = app.main.query_one("#inbox-nodes", DataTable)
        entries = app.main.query_one("#inbox-table", DataTable)
        detail = app.main.query_one("#inbox-detail", Static)
        assert nodes.region.height == nodes.row_count + 1  # every node, and no rows of nothing under them
        assert entries.region.y - nodes.region.bottom <= 1
        assert detail.region.y - entries.region.bottom <= 1  # the message right below its entry
        assert isinstance(app.screen.focused, (DataTable, Input))
