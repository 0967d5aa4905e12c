"""The canvas pane answers "who sees this, and who has it loaded" on the sample world: ``b`` shows a
node's boot context, ``L`` who loads a document, ``v`` reads the canvas as a chosen node; and the
judgments pane says which nodes load a listener once an insight is approved."""

from __future__ import annotations

from typing import Any

from textual.widgets import OptionList, Static, Tree

from screens.dialogs.choose import ChooseDialog
from screens.dialogs.delivery import DeliveryDialog
from tests.toasts import raised
from tests.ui.conftest import ready, settle

GARDEN = "run_sample_garden"
"""Ada's node in the sample world (the run "garden plan")."""
TALK = "run_sample_talk"
"""Grace's node."""
PREVIEW = "When testing delivery, read this because it is private to Ada."


def dialog_text(app: Any) -> str:
    screen = app.screen
    assert isinstance(screen, DeliveryDialog), screen
    return str(screen.query_one("#delivery-body", Static).render())


async def select(pilot: Any, ref: str) -> Any:
    await pilot.press("1")
    pane = pilot.app.main.pane("canvas")
    pane.select_key(ref)
    await settle(pilot)
    pane.focus_main()
    await settle(pilot)
    return pane


async def test_b_shows_a_nodes_boot_context_with_level_and_why(app: Any) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        await ready(pilot)
        pane = await select(pilot, GARDEN)
        assert ("Boot context of this node", "b", "boot_context") in pane.palette_actions()
        await pilot.press("b")
        await settle(pilot)
        text = dialog_text(pilot.app)
        assert "loads (1), in boot order" in text
        assert "1. ada/insights/writing · preview" in text
        assert "why: rule {on: boot, deliver: preview} of ada" in text
        assert "ada/preferences/replies  no rule for this event: no rule delivers it on boot" in text
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(pilot.app.screen, DeliveryDialog)


async def test_L_shows_who_loads_a_document_and_why_the_others_dont(app: Any) -> None:  # noqa: N802 - the key
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        listener = await ws.canvas.get("ada/insights/writing")
        pane = await select(pilot, listener.id)
        assert ("Who loads this document", "L", "who_loads") in pane.palette_actions()
        await pilot.press("L")
        await settle(pilot)
        text = dialog_text(pilot.app)
        assert "✓ garden plan (run_sample_garden) at preview" in text
        assert "✗ talk outline (run_sample_talk) not eligible: its owner user:ada is not in this node's view" in text


async def test_b_on_a_document_says_to_select_a_node(app: Any) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        doc = await ws.canvas.get("ada/preferences/replies")
        await select(pilot, doc.id)
        await pilot.press("b")
        await settle(pilot)
        assert not isinstance(pilot.app.screen, DeliveryDialog)
        assert any("Select a node" in str(n.message) for n in raised(pilot.app))


async def _read_as(pilot: Any, label: str) -> None:
    await pilot.press("v")
    await settle(pilot)
    chooser = pilot.app.screen
    assert isinstance(chooser, ChooseDialog)
    index = next(i for i, (name, _) in enumerate(chooser.choices) if name == label)
    options = chooser.query_one(OptionList)
    options.highlighted = index
    options.action_select()
    await settle(pilot, 5)


def _document_count(pane: Any) -> str:
    tree = pane.query_one("#canvas-tree", Tree)
    labels = [str(child.label) for heading in tree.root.children for child in heading.children]
    return next(label for label in labels if label.startswith("document ("))


async def test_v_reads_the_canvas_as_a_chosen_node(app: Any) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        diary = await ws.canvas.write("diary", owner="user:ada", privacy="private", preview=PREVIEW, body="mine")
        pane = await select(pilot, GARDEN)
        everything = _document_count(pane)
        assert ("Read the canvas as a node…", "v", "read_as") in pane.palette_actions()
        await _read_as(pilot, "talk outline")
        viewing = pane.query_one("#canvas-viewing", Static)
        assert viewing.display and "Reading as node talk outline" in str(viewing.render())
        assert _document_count(pane) != everything  # Ada's private diary is gone from Grace's view
        pane.select_key(diary.object.id)
        await settle(pilot)
        assert pane.selected is None  # as if it did not exist
        await _read_as(pilot, "garden plan")
        pane.select_key(diary.object.id)
        await settle(pilot)
        assert pane.selected == diary.object.id  # Ada's own node may read it
        await _read_as(pilot, "operator")
        assert not pane.query_one("#canvas-viewing", Static).display
        assert _document_count(pane) == everything


async def test_an_approved_insight_says_which_nodes_now_load_its_listener(app: Any) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        review = next(r for r in await ws.insights.list() if r.proposal.listener)
        await ws.insights.approve(review.id)
        await pilot.press("5")
        pane = pilot.app.main.pane("judgments")
        pane.select_key(f"insight:{review.id}")
        await settle(pilot, 5)
        text = str(pane.query_one("#judgment-text", Static).render())
        assert "nodes that now load the listener at boot: garden plan (preview), mail digest (preview)" in text
