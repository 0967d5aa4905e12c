"""A burst of a run's events appended at once reaches the runs pane whole: each event drawn once, in
order, in the conversation and in the raw view, and the run's row and info line follow it."""

from __future__ import annotations

from typing import Any

from screens.widgets.stream import EventStream
from tests.ui.conftest import ready, run_named, settle, show_run


def _shown(pilot: Any) -> list[str]:
    stream = pilot.app.main.query_one("#runs-stream", EventStream)
    stream.flush()
    return stream.shown


async def test_a_burst_is_drawn_once_in_order_in_both_views(app: Any) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        run = run_named(ws, "talk outline")
        pane = await show_run(pilot, run.id)
        fake = ws.cloud.runs.get(run.id)
        before = len(_shown(pilot))
        deltas = [("node.output_text.delta", {"delta": f"d{i} ", "entry_id": "eb"}) for i in range(2000)]
        fake.emit_many([("node.turn.started", {"input": {"text": "burst please", "message_ids": []}, "entry_id": "eb"}),
                        *deltas,
                        ("node.output_text.done", {"text": "the whole burst", "entry_id": "eb"}),
                        ("node.turn.completed", {"stop_reason": "end_turn", "error": None, "entry_id": "eb"})])
        fake.emit_many([("node.question.opened", {"question": {"id": "q_burst", "title": "Which one?"}})])
        await settle(pilot)
        added = _shown(pilot)[before:]
        assert [line.split(" ", 1)[1] for line in added] == [
            "» turn: burst please", "model: the whole burst", "? question: Which one?"]
        assert pane._seq == fake.seq
        assert pane._table_rows[run.id][2].plain == "waiting on user"  # the row followed the burst's last event
        await pilot.press("v")  # the raw view: every event of the burst, once, in order
        await settle(pilot)
        raw = _shown(pilot)
        seqs = [int(line.split()[0]) for line in raw]
        assert seqs == [e["seq"] for e in fake.events]
        assert ws.desk.detail(run.id).events[-1]["seq"] == fake.seq
