"""The window's run mirror: each run's events converted once, kept current by the change feed, and
only the events after a pane's last one handed to it (the pane never reads the whole run again)."""

from __future__ import annotations

from services.changes import Change
from services.desk import seq_of
from services.workspace import Workspace

from .conftest import person_run


async def test_a_pane_is_handed_only_the_events_after_its_last_converted_once(ws: Workspace) -> None:
    desk, run_id = ws.desk, person_run(ws)
    whole = desk.detail(run_id).events
    last = seq_of(whole[-1])
    assert desk.events_since(run_id, last) == []
    run = ws.cloud.runs.get(run_id)
    run.emit("node.activity", {"text": "first"})
    run.emit("node.activity", {"text": "second"})
    fresh = desk.events_since(run_id, last)
    assert [e["text"] for e in fresh] == ["first", "second"]
    assert all(isinstance(e["at"], float) for e in fresh)
    assert [seq_of(e) for e in fresh] == [last + 1, last + 2]
    grown = desk.detail(run_id).events
    assert all(a is b for a, b in zip(grown[-2:], fresh))  # the very read models: not converted again
    assert all(a is b for a, b in zip(grown, whole))
    assert desk.events_since(run_id, last + 1) == [fresh[1]]


async def test_a_log_cut_at_its_start_is_read_again(ws: Workspace) -> None:
    desk, run_id = ws.desk, person_run(ws)
    before = desk.detail(run_id).events
    assert len(before) > 2
    ws.cloud.runs.get(run_id).expire_events(seq_of(before[1]))
    after = desk.detail(run_id).events
    assert [seq_of(e) for e in after] == [seq_of(e) for e in before[2:]]


async def test_a_change_carrying_no_usable_event_is_left_out(ws: Workspace) -> None:
    desk, run_id = ws.desk, person_run(ws)
    last = seq_of(desk.detail(run_id).events[-1])
    ws.feed.publish(Change("cloud", "run.event", run_id, {"event": "not an object"}))
    ws.feed.publish(Change("cloud", "run.event", run_id, {"event": {"seq": "not a number", "type": "x"}}))
    ws.feed.publish(Change("cloud", "run.event", run_id, {"event": {"seq": last, "type": "a repeat"}}))
    assert desk.events_since(run_id, last) == []
    assert [seq_of(e) for e in desk.detail(run_id).events] == [e["seq"] for e in ws.cloud.runs.get(run_id).events]


async def test_after_a_fresh_read_of_every_run_each_run_is_read_again(ws: Workspace) -> None:
    desk, run_id = ws.desk, person_run(ws)
    last = seq_of(desk.detail(run_id).events[-1])
    ws.feed.publish(Change("workspace", "attach.reloaded", "http://127.0.0.1:1"))
    ws.cloud.runs.get(run_id).emit("node.activity", {"text": "after"})  # the run is not held: the book has it
    assert [e["text"] for e in desk.events_since(run_id, last)] == ["after"]
