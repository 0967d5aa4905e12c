"""Canvas, inbox and judgments keys through the real App, asserting on the real canvas and reviews."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import DataTable

from screens.widgets.graph import NeighbourhoodGraph
from tests.ui.conftest import ready, settle, type_text


async def test_canvas_enter_follows_an_edge_backspace_goes_back_and_filter_narrows(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("1")
        await settle(pilot)
        pane = app.main.pane("canvas")
        architecture = await ws.canvas.get("garden-app/architecture")
        runbook = await ws.canvas.get("garden-app/runbook")
        pane.select_key(architecture.id)
        await settle(pilot)
        assert pane.detail.object.full_name == "garden-app/architecture"
        assert "scheduler owns every timer" in str(app.main.query_one("#canvas-meta").render())
        graph = app.main.query_one("#canvas-edges", NeighbourhoodGraph)
        pane.focus_main()
        await pilot.press("tab")
        assert app.focused is graph
        assert [(d, k, e.other.id) for d, k, e in graph.neighbours] == [("out", "links-to", runbook.id)]
        assert any("garden-app/runbook" in "".join(s.text for s in graph.render_line(y))
                   for y in range(graph.size.height))
        await pilot.press("enter")
        await settle(pilot)
        assert pane.selected == runbook.id
        assert pane.detail.document.body.startswith("# Runbook")
        assert [(d, k, e.other.id) for d, k, e in graph.neighbours] == [("in", "links-to", architecture.id)]
        await pilot.press("backspace")
        await settle(pilot)
        assert pane.selected == architecture.id
        pane.focus_main()
        await pilot.press("slash")
        await type_text(pilot, "runbook")
        await settle(pilot)
        tree = app.main.query_one("#canvas-tree")
        labels = [str(n.label) for n in tree.root.children[0].children]
        assert labels and all("runbook" in label for label in labels)
        assert pane.count_label == "1 match"
        await pilot.press("escape")
        await settle(pilot)
        assert str(tree.root.children[0].label) == "by type"


async def test_inbox_space_marks_read_R_marks_all_m_messages_and_bursts_coalesce(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("2")
        await settle(pilot)
        pane = app.main.pane("inbox")
        node = next(n for n in (await ws.canvas.list_objects(type="node")).items if n.name == "patch review")
        pane.select_key(node.id)
        await settle(pilot)
        before = await ws.canvas.inbox(node.id)
        assert before.unread >= 2
        pane.focus_main()
        first = pane.groups[0]
        await pilot.press("space")
        await settle(pilot)
        after = await ws.canvas.inbox(node.id)
        assert after.unread == before.unread - first.unread
        await pilot.press("R")
        await settle(pilot)
        assert (await ws.canvas.inbox(node.id)).unread == 0
        await pilot.press("m")
        await settle(pilot)
        await type_text(pilot, "please rerun the tests")
        await pilot.press("ctrl+s")
        await settle(pilot)
        page = await ws.canvas.inbox(node.id)
        assert any(e.kind == "message" and "please rerun the tests" in (e.body or e.summary) for e in page.items)
        table = app.main.query_one("#inbox-table", DataTable)
        assert table.row_count == len(pane.groups) >= 1
        await bursts_case(pilot, app, ws)


async def bursts_case(pilot: Any, app: Any, ws: Any) -> None:
    node = (await ws.canvas.spawn_node(name="burst target")).object
    doc = await ws.canvas.write("notes/burst", preview="When testing bursts, read this because it changes.",
                                body="v0", owner="user:ada")
    await ws.canvas.watch(doc.object.id, watcher=node.id, min_level=1)
    for i in range(5):
        await ws.canvas.edit(doc.object.id, body=f"v{i + 1}", base_revision=doc.revision + i)
    await pilot.press("2")
    pane = app.main.pane("inbox")
    pane.select_key(node.id)
    await settle(pilot)
    bursts = [g for g in pane.groups if g.count > 1]
    assert bursts and bursts[0].count == 5
    table = app.main.query_one("#inbox-table", DataTable)
    assert "×5" in [str(c) for c in table.get_row_at(pane.groups.index(bursts[0]))]


async def test_judgments_c_picks_a_candidate_y_edits_and_approves_into_the_canvas(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        pane = app.main.pane("judgments")
        review = (await ws.insights.list())[0]
        waiting = pane.waiting
        assert app.main.query_one("#badges").judgments == waiting >= 1
        pane.select_key(f"insight:{review.id}")
        await settle(pilot)
        pane.focus_main()
        assert pane.selected == f"insight:{review.id}"
        await pilot.press("c")
        await settle(pilot)
        assert pane.candidate == 1
        await pilot.press("y")
        await settle(pilot)
        area = app.screen.query_one("TextArea")
        assert area.text == review.proposal.candidates[1]
        area.text = "Ada acts on short replies."
        await pilot.press("ctrl+s")
        await settle(pilot)
        decided = await ws.insights.get(review.id)
        assert decided.status == "approved" and decided.text == "Ada acts on short replies." and decided.chosen == 1
        doc = await ws.canvas.read(decided.document)
        assert "Ada acts on short replies." in doc.document.body
        assert "written to" in str(app.main.query_one("#judgment-text").render())
        assert pane.waiting == waiting - 1


async def test_judgments_n_rejects_with_a_reason_and_an_empty_reason_is_refused(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        await pilot.press("5")
        await settle(pilot)
        review = (await ws.insights.list())[0]
        pane = app.main.pane("judgments")
        pane.select_key(f"insight:{review.id}")
        await settle(pilot)
        pane.focus_main()
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert any("say why" in e for e in app.errors)
        assert (await ws.insights.get(review.id)).status == "pending"
        assert "say why" in str(app.screen.query_one("#form-error").render())  # the form stays open
        await type_text(pilot, "too specific")
        await pilot.press("enter")
        await settle(pilot)
        decided = await ws.insights.get(review.id)
        assert decided.status == "rejected" and decided.reason == "too specific"


async def harvest_selected(pilot: Any) -> tuple[Any, Any]:
    ws = pilot.app.workspace
    await pilot.press("5")
    await settle(pilot)
    pane = pilot.app.main.pane("judgments")
    item = next(i for i in await ws.okf.queue() if i.state == "pending" and i.promote)
    pane.select_key(f"okf:{item.id}")
    await settle(pilot)
    pane.focus_main()
    assert pane.selected == f"okf:{item.id}" and pane.detail.item.id == item.id
    return pane, item


async def test_y_approves_a_harvest_judgment_and_the_base_file_really_changes(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        pane, item = await harvest_selected(pilot)
        files = (await ws.okf.detail(item.id)).files
        assert files, [(i.id, i.state, i.inputs, i.receipts, i.promote) for i in await ws.okf.queue()]
        assert "concept diff against the base" in str(app.main.query_one("#judgment-text").render())
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("y")  # the whole judgment: confirmed
        await settle(pilot, 5)
        done = next(i for i in await ws.okf.queue() if i.id == item.id)
        assert done.state == "approved"
        for change in files:
            target = ws.bases_path() / change.base / change.path
            assert (target.read_text("utf-8") if change.after is not None else None) == change.after
        shown = str(app.main.query_one("#judgment-text").render())
        assert "accepted" in shown and "digest" in shown


async def test_outcomes_are_approved_one_by_one_and_n_rejects_with_a_reason(app) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        pane, item = await harvest_selected(pilot)
        outcomes = app.main.query_one("#judgment-outcomes")
        outcomes.focus()
        await pilot.press("space")  # tick the first outcome only
        await settle(pilot)
        first = pane.detail.outcomes[0]
        assert list(outcomes.selected) == [first.input]
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("y")  # the confirmation names the outcomes a partial approval declines
        await settle(pilot, 5)
        detail = await ws.okf.detail(item.id)
        decisions = {o.input: o.decision for o in detail.outcomes}
        assert decisions[first.input] == "approved"
        assert all(decisions[o.input] != "approved" for o in detail.outcomes[1:])
        source = (await ws.okf.sources())[0]
        (Path(source.home) / "notes" / "pump.md").write_text(
            "We decided to run the pump at night because daytime power is shared.\n", encoding="utf-8")
        await ws.okf.capture_now(source.id)
        await settle(pilot)
        pending = [i for i in await ws.okf.queue() if i.state == "pending"]
        assert pending
        pane.select_key(f"okf:{pending[0].id}")
        await settle(pilot)
        pane.focus_main()
        await pilot.press("n")
        await settle(pilot)
        await type_text(pilot, "not durable")
        await pilot.press("enter")
        await settle(pilot, 5)
        rejected = next(i for i in await ws.okf.queue() if i.id == pending[0].id)
        assert rejected.state == "rejected" and rejected.reason == "not durable"
