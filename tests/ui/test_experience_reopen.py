"""Reopening a workspace adds nothing: the in-memory cloud is seeded again with the sample world on
every launch, over the canvas, outbox and knowledge stores kept in the folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.clock import FakeClock
from services.workspace import Settings
from workbench.app import make_app

from .conftest import ready


async def _inventory(ws: Any) -> dict[str, Any]:
    canvas = ws.canvas
    nodes = await canvas.list_objects(type="node", limit=500)
    inboxes = {}
    for node in nodes.items:
        page = await canvas.inbox(node.id, limit=500)
        inboxes[node.id] = sorted((e.kind, e.summary, e.body or "") for e in page.items)
    status = await ws.outbox.status()
    queue = await ws.okf.queue() if ws.okf is not None else []
    return {
        "objects": await canvas.count_objects(),
        "nodes": sorted(n.id for n in nodes.items),
        "inboxes": inboxes,
        "pending memory": status.pending_total,
        "judgments": sorted((item.id, item.state, item.attempt) for item in queue),
        "insight reviews": len(await ws.insights.list()),
    }


async def test_reopening_a_workspace_adds_no_node_message_or_judgment(tmp_path: Path) -> None:
    seen = []
    for _ in range(3):
        app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()))
        async with app.run_test(size=(160, 48)) as pilot:
            ws = await ready(pilot)
            seen.append(await _inventory(ws))
            seen[-1]["run rows"] = app.main.query_one("#runs-table").row_count
    assert seen[0]["nodes"], "the sample world made no run nodes"
    assert any(seen[0]["inboxes"].values()), "the sample world filed no message"
    # The first launch also lists the judge's runs of that launch (the notes are judged once, so
    # later launches run no judge): the runs table never grows.
    assert seen[2]["run rows"] == seen[1]["run rows"] <= seen[0]["run rows"]
    for inventory in seen:
        inventory.pop("run rows")
    assert seen[1] == seen[0]
    assert seen[2] == seen[0]
