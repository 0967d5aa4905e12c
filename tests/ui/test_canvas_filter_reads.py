"""A filter keystroke in the canvas pane changes the tree only: the selected object's detail and
neighbourhood are not read again; a change to the canvas still reads them again."""

from __future__ import annotations

from typing import Any

from textual.widgets import Tree

from tests.ui.conftest import ready, settle

GARDEN = "run_sample_garden"


def labels(tree: Tree[Any]) -> list[str]:
    out: list[str] = []

    def walk(node: Any) -> None:
        for child in node.children:
            out.append(str(child.label))
            walk(child)
    walk(tree.root)
    return out


async def test_a_filter_keystroke_keeps_the_selected_objects_detail_and_a_change_reads_it_again(app: Any) -> None:
    async with app.run_test(size=(140, 44)) as pilot:
        ws = await ready(pilot)
        await pilot.press("1")
        pane = pilot.app.main.pane("canvas")
        pane.select_key(GARDEN)
        await settle(pilot)
        detail, edges = pane.detail, pane.neighbourhood
        assert detail is not None and detail.object.id == GARDEN and edges is not None
        pane.focus_main()
        await settle(pilot)
        await pilot.press("/")
        for key in "garden":
            await pilot.press(key)
        await settle(pilot)
        tree = pilot.app.main.query_one("#canvas-tree", Tree)
        shown = labels(tree)
        assert any("matching “garden”" in label for label in shown), shown
        assert pane.detail is detail and pane.neighbourhood is edges  # the same reads: nothing read again
        await pilot.press("escape")
        await settle(pilot)
        assert any(label.startswith("by type") for label in labels(tree))
        assert pane.detail is detail
        await ws.canvas.ensure_owner("user", "o1")
        await ws.canvas.write("ops/filter-note", owner="user:o1", preview="When filtering, read this because of a test.",
                              body="x")
        await settle(pilot)
        assert pane.detail is not detail and pane.detail.object.id == GARDEN  # a change reads the selection again
