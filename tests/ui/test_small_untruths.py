"""The window says only what is true (issue 37): an outcome's box is ticked only when it is, the footer
offers space (tick) only where there are outcomes to tick, the who-loads dialog says its subject once,
and the copy toast repeats a curl command with its URL whole."""

from __future__ import annotations

from textual.widgets import Static
from textual.widgets._footer import FooterKey

from screens.dialogs.delivery import DeliveryDialog
from tests.toasts import said

from .conftest import ready, settle


def footer_keys(app) -> list[str]:
    return [k.key_display for k in app.main.query(FooterKey) if "-command-palette" not in k.classes]


async def test_outcome_boxes_are_ticked_only_when_ticked_and_space_is_offered_only_for_outcomes(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        outcomes = pane.query_one("#judgment-outcomes")
        harvest = next(k for k in pane.items if k.startswith("okf:") and pane.items[k].state == "pending"
                       and pane.items[k].inputs > 1)
        pane.select_key(harvest)
        await settle(pilot)
        assert outcomes.display and outcomes.option_count > 1
        assert list(outcomes.selected) == []
        assert "none ticked" in str(pane.query_one("#judgment-text", Static).render())
        boxes = [outcomes.render_line(y).text[:3] for y in range(outcomes.option_count)]
        assert all("X" not in box for box in boxes), boxes
        assert "space" in footer_keys(app) and "c" not in footer_keys(app)
        outcomes.toggle(outcomes.get_option_at_index(0).value)
        await settle(pilot)
        assert "X" in outcomes.render_line(0).text[:3] and "X" not in outcomes.render_line(1).text[:3]
        insight = next(k for k in pane.items if k.startswith("insight:"))
        pane.select_key(insight)
        await settle(pilot)
        assert "space" not in footer_keys(app) and "c" in footer_keys(app)


async def test_who_loads_says_its_subject_once(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        await pilot.press("1")
        await settle(pilot)
        canvas = app.main.pane("canvas")
        page = await app.workspace.canvas.list_objects(type="document", limit=5)
        canvas.select_key(page.items[0].id)
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)
        assert isinstance(app.screen, DeliveryDialog)
        title = str(app.screen.query_one("#delivery-title").render())
        body = str(app.screen.query_one("#delivery-body", Static).render())
        assert title.startswith("who loads ") and title.endswith(" on boot")
        assert "who loads" not in body


async def test_the_copy_toast_repeats_a_curl_command_whole(app) -> None:
    async with app.run_test(size=(160, 45)) as pilot:
        ws = await ready(pilot)
        await pilot.press("3")
        await settle(pilot)
        run_id = app.main.pane("runs").selected
        assert run_id
        await pilot.press("Y")
        await settle(pilot)
        await pilot.press("4")  # id, JSON, SDK call, curl
        await settle(pilot)
        toast = [text for text in said(app) if text.startswith("Copied")][-1]
        assert toast.endswith(f'"$CROUTER_RUNTIME_URL"/v1/runs/{run_id}'), toast
        assert ws is not None


async def test_the_guide_counts_the_sample_world_as_the_window_does(app) -> None:
    from pathlib import Path

    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        runs, canvas = app.main.pane("runs").headline(), app.main.pane("canvas").headline()
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("window.md", "reference.md"):
        text = " ".join((docs / page).read_text(encoding="utf-8").split())
        assert f"`3` `{runs}`" in text and f"`1` `{canvas}`" in text, (page, runs, canvas)


async def test_an_attached_header_at_160_columns_shows_where_memory_goes_whole(app) -> None:
    from screens.widgets.badges import BadgeBar

    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        badges = app.main.query_one("#badges", BadgeBar)
        await settle(pilot)
        # set and drawn in one step: the screen recounts the badges from the services every second
        badges.judgments, badges.waiting = 3, 1
        badges.status = "attached to http://127.0.0.1:8790 (served by process 4021337)"
        badges.memory = "http://127.0.0.1:8790/honcho (Honcho API, workspace workbench)"
        shown = badges.render()
        assert shown.cell_len <= 160
        assert shown.plain.rstrip().endswith("memory → /honcho (Honcho API, workspace workbench)"), shown.plain
        assert "attached to http://127.0.0.1:8790" in shown.plain
        badges.status = "attached to http://" + "a" * 150 + ".example:8790 (served by process 4021337)"
        assert badges.render().cell_len <= 160 and badges.render().plain.rstrip().endswith("…")


async def _body_rows(pilot, widget) -> list[str]:
    await settle(pilot)
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def test_wrapped_reasons_and_previews_keep_their_indent(app) -> None:
    """A boot context's why and preview and a judgment's reason wrap under themselves, not at column 0."""
    async with app.run_test(size=(100, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        pane.select_key(next(k for k in pane.items if k.startswith("okf:")))
        rows = await _body_rows(pilot, pane.query_one("#judgment-text", Static))
        reasons = [n for n, row in enumerate(rows) if row.startswith("    reason: ")]
        assert reasons and any(rows[n + 1].startswith(" " * 12) for n in reasons), rows
        for n in reasons:  # a reason's wrapped rows start under its first word
            follow = rows[n + 1]
            assert follow.startswith("    ") or not follow, rows[n:n + 2]
        await pilot.press("1")
        await settle(pilot)
        nodes = await ws.canvas.list_objects(type="node", limit=50)
        canvas = app.main.pane("canvas")
        canvas.select_key(next(o.id for o in nodes.items if o.name == "garden plan"))
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, DeliveryDialog)
        rows = await _body_rows(pilot, app.screen.query_one("#delivery-body", Static))
        items = [n for n, row in enumerate(rows) if row[:1].isdigit()]
        assert items, rows
        for n in items:
            block = []
            for row in rows[n + 1:]:
                if not row or row[:1].isdigit() or not row.startswith(" ") and block:
                    break
                block.append(row)
            assert all(row.startswith("     ") for row in block), rows[n:n + len(block) + 2]


async def test_toasts_leave_the_strip_the_footer_and_the_memory_search_results_clear(app) -> None:
    from textual.widgets import Footer
    from textual.widgets._toast import Toast

    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        ws = await ready(pilot)
        app.notify("a toast the operator reads", timeout=60)
        await settle(pilot)
        toasts = [t.region for t in app.screen.query(Toast)]
        assert toasts
        bottom = [app.main.query_one("#strip").region, app.main.query_one(Footer).region]
        assert not any(t.overlaps(b) for t in toasts for b in bottom), (toasts, bottom)
        await ws.outbox.capture_turn("conv_toast", "user:ada", [{"role": "user", "text": "the hives face south"}])
        await ws.outbox.sweep()
        await pilot.press("M")
        await settle(pilot)
        app.screen.query_one("#memory-search").value = "hives"
        await pilot.press("slash")
        await pilot.press("enter")
        await settle(pilot)
        app.notify("another toast", timeout=60)
        await settle(pilot)
        found = app.screen.query_one("#memory-found").region
        assert found.height > 0
        assert not any(t.region.overlaps(found) for t in app.screen.query(Toast)), found
