"""The run bridge's bulk step (``batch_step``, what the follower's catch-up writes with) leaves the
canvas exactly as applying the same runs and events one by one does (the live path): the same nodes,
events, inbox entries, edges, watches and counters, row for row and id for id (a stretch of runs: in
the same order), and the same changes published, on both engines; and it writes a batch's events and
inbox entries in a statement each."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text

from services.canvas import Canvas, RunBridge
from services.changes import Change, ChangeFeed
from services.clock import FakeClock

from .conftest import pg_server, plain, with_schema

TABLES = {"objects": "pk", "nodes": "object_id", "events": "id", "inbox": "id", "edges": "id", "watches": "id",
          "object_counts": "type, owner_id, privacy", "inbox_counts": "owner_id"}
"""Every table the bridge writes, with the order its rows are compared in."""


@pytest.fixture
def twin_url(engine_name: str, tmp_path) -> Iterator[str]:
    """Where a second canvas lives, on the same engine as ``canvas_url``."""
    if engine_name == "sqlite":
        yield str(tmp_path / "twin.db")
        return
    url = pg_server()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(url, schema)
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


async def opened(url: str) -> tuple[Canvas, list[Change]]:
    feed = ChangeFeed()
    changes: list[Change] = []
    feed.subscribe(lambda c: changes.append(c) if c.source == "canvas" else None)
    return await Canvas.open(url, changes=feed, clock=FakeClock(1_800_000_000.0)), changes


@pytest.fixture
async def canvases(canvas_url: str, twin_url: str) -> AsyncIterator[tuple[tuple[Canvas, list[Change]], ...]]:
    one, bulk = await opened(canvas_url), await opened(twin_url)
    yield one, bulk
    await one[0].close()
    await bulk[0].close()


def dto(run_id: str, **over: Any) -> dict[str, Any]:
    run = {"id": run_id, "user_id": "user:o1", "name": None, "status": "running", "activity": "thinking",
           "params": {"prompt": f"the prompt of {run_id}"}, "outcome": None, "pending": [], "question": None,
           "last_turn_error": None}
    run.update(over)
    return run


def history(run_id: str) -> list[dict[str, Any]]:
    """A run's events: turns with deltas, steps, a queued message, a child node, a question, a rename,
    text to repair, a failed turn, replays (events already applied), a settle and a reopen."""
    seq = 0
    out: list[dict[str, Any]] = []

    def add(type_: str, node_id: str = run_id, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        out.append({"id": str(seq), "seq": seq, "run_id": run_id, "node_id": node_id, "type": type_, **fields})

    for turn in range(3):
        add("node.turn.started", input={"text": f"turn {turn} of {run_id}"}, entry_id=f"e{turn}")
        add("node.output_text.delta", delta="some ", entry_id=f"e{turn}")
        add("node.activity", activity="writing")
        add("node.output_text.done", text=f"the answer {turn}", entry_id=f"e{turn}")
        add("custom.step", step=turn)
        add("node.turn.completed", stop_reason="end_turn", entry_id=f"e{turn}")
    add("node.message.received", message={"id": "m1", "text": "a queued note\nsecond line"}, start_turn=False)
    add("node.turn.started", "child_" + run_id, input={"text": "a child's turn"})
    add("node.output_text.done", "child_" + run_id, text="the child's answer")
    add("node.question.opened", question={"id": "q1", "title": "which one?"})
    add("node.question.answered", question_id="q1")
    add("run.renamed", name="a renamed run")
    add("node.output_text.done", text="broken \ud800 text\x00")
    add("node.turn.completed", stop_reason="error", error={"code": "boom"})
    add("node.idle", "child_" + run_id)
    add("run.interrupted")
    out += out[3:6]  # replays: already applied, skipped
    add("node.message.received", message={"id": "m2", "text": "start now"}, start_turn=True)
    add("node.settled", outcome={"outcome": "result"})
    add("node.reopened")
    add("node.settled", outcome={"outcome": "declined"})
    return out


def dump(canvas: Canvas) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``TABLES`` (the documents that made the people named by their names: their ids are random)."""
    with canvas.engine.connect() as conn:
        named = dict(conn.execute(text("SELECT id, name FROM objects WHERE type = 'document'")).all())
        return {table: [tuple(named.get(value, value) for value in row)
                        for row in conn.execute(text(f"SELECT * FROM {table} ORDER BY {order}"))]
                for table, order in TABLES.items()}


async def prepare(canvas: Canvas, runs: list[str]) -> None:
    """What both canvases hold before the events: each run's node, a person watching the first, the
    second made private with a watcher who may not read it, and a fork of the first."""
    bridge = RunBridge(canvas)
    for run_id in runs:
        await bridge.apply_run(dto(run_id, params={"prompt": "p", **({"forked_from": runs[0], "forked_at_turn": 1}
                                                                       if run_id == runs[2] else {})}))
    for person in ("user:o2", "user:o3"):
        await canvas.write("notes/hello", preview="When testing, read this because it makes the person.", owner=person)
    await canvas.watch(runs[0], watcher="user:o2", pattern="*", min_level=1)
    await canvas.watch(runs[1], watcher="user:o3", pattern="node.*", min_level=3)
    with canvas.engine.begin() as conn:
        conn.execute(text("UPDATE objects SET privacy = 'private' WHERE id = :id"), {"id": runs[1]})


def finals(runs: list[str]) -> list[dict[str, Any]]:
    return [dto(run_id, status="settled", activity=None, name="a renamed run", outcome={"outcome": "declined"},
                pending=[{"id": "m3", "text": "still pending"}]) for run_id in runs]


async def test_events_in_bulk_leave_the_canvas_as_applying_them_one_by_one_does(canvases) -> None:
    (one, one_changes), (bulk, bulk_changes) = canvases
    runs = ["run_a", "run_b", "run_c"]
    await prepare(one, runs)
    await prepare(bulk, runs)
    one_changes.clear()
    bulk_changes.clear()

    live = RunBridge(one)
    for run_id in runs:
        for item in history(run_id):
            await live.apply_event(item)
    for final in finals(runs):
        await live.apply_run(final)

    bridge = RunBridge(bulk)
    steps = [bridge.events_step([bridge.prepare_event(item) for run_id in runs for item in history(run_id)])]
    steps += [bridge.run_step(final) for final in finals(runs)]
    await bridge.apply_steps(steps)

    expected, got = dump(one), dump(bulk)
    assert len(expected["inbox"]) > 20 and len(expected["events"]) > 60  # deliveries and events to compare
    for table in TABLES:
        assert got[table] == expected[table], table
    assert [(c.kind, c.id, c.data) for c in bulk_changes] == [(c.kind, c.id, c.data) for c in one_changes]


async def test_a_run_of_events_is_written_a_statement_per_table(canvas: Canvas) -> None:
    bridge = RunBridge(canvas)
    await bridge.apply_run(dto("run_a"))
    await canvas.write("notes/hello", preview="When testing, read this because it makes the person.", owner="user:o2")
    await canvas.watch("run_a", watcher="user:o2", pattern="*", min_level=1)
    statements: list[str] = []
    event.listen(canvas.engine, "before_cursor_execute", lambda *a: statements.append(a[2].split()[2]
                                                                                       if a[2].startswith("INSERT") else ""))
    steps = [{"id": str(seq), "seq": seq, "run_id": "run_a", "node_id": "run_a", "type": "custom.step", "step": seq}
             for seq in range(1, 401)]
    await bridge.apply_steps([bridge.events_step([bridge.prepare_event(step) for step in steps])])
    assert len((await canvas.inbox("user:o2", limit=500)).items) == 400
    assert statements.count("events") <= 2 and statements.count("inbox") <= 2  # PostgreSQL: in pages of rows


def by_node(canvas: Canvas) -> dict[str, Any]:
    """Each object's row, node row, events, inbox entries, edges and watches, by its id (without the
    row ids: runs made by table are numbered in a different order across runs, never within one)."""
    with canvas.engine.connect() as conn:
        named = dict(conn.execute(text("SELECT id, name FROM objects WHERE type = 'document'")).all())

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(named.get(value, value) for value in row) for row in conn.execute(text(sql))]

        return {
            "objects": sorted(rows("SELECT id, type, kind, name, handle, owner_id, privacy, status, created_at, "
                                   "updated_at FROM objects WHERE type <> 'document'")),
            "nodes": sorted(rows("SELECT * FROM nodes")),
            "events": rows("SELECT object_id, type, level, actor_id, at, data FROM events ORDER BY object_id, id"),
            "inbox": rows("SELECT owner_id, kind, object_id, object_name, event_type, level, summary, body, ref "
                          "FROM inbox ORDER BY owner_id, id"),
            "edges": sorted(rows("SELECT src_id, dst_id, kind FROM edges")),
            "watches": sorted(rows("SELECT watcher_id, object_id, pattern, min_level FROM watches")),
            "object_counts": sorted(rows("SELECT * FROM object_counts")),
            "inbox_counts": sorted(rows("SELECT * FROM inbox_counts")),
        }


def per_object(changes: list[Change]) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for change in changes:
        out.setdefault(change.id, []).append((change.kind, change.data))
    return out


async def test_runs_in_bulk_leave_each_node_as_applying_them_one_by_one_does(canvases) -> None:
    """``batch_step`` of runs alone: the nodes the canvas lacks made by table, then each run applied;
    every node ends with the same row, journal, inbox, edges and watches, and the same changes are
    published for it, in its order, as ``run_step`` run after run gives."""
    (one, one_changes), (bulk, bulk_changes) = canvases
    for canvas in (one, bulk):
        await prepare(canvas, ["run_a", "run_b", "run_c"])  # existing nodes: a watched one, a private one, a fork
    one_changes.clear()
    bulk_changes.clear()
    runs = [
        dto("run_a", status="settled", activity=None, outcome={"outcome": "result"}),  # exists, watched
        dto("run_b", activity="reading"),  # exists, private, watched by one who may not read it
        dto("run_new1"),
        dto("run_new2", status="settled", activity=None, outcome={"outcome": "runtime_error"}, name="named \ud800 run",
            user_id="user:o9"),  # a new person, text to repair
        dto("run_new3", status="waiting_on_user", params={"prompt": "a fork", "kind": "general",
                                                          "forked_from": "run_a", "forked_at_turn": 2},
            pending=[{"id": "m1", "text": "waiting \x00 here"}, {"id": "m2", "text": "and this"}]),
        dto("run_new4", status="idle", activity=None, params={"prompt": "forked from one made just now",
                                                              "forked_from": "run_new1"}),
        dto("run_new1", activity="writing"),  # the same run twice in one batch
    ]
    live = RunBridge(one)
    for run in runs:
        await live.apply_run(run)
    bridge = RunBridge(bulk)
    await bridge.apply_steps([bridge.batch_step(runs)])

    expected, got = by_node(one), by_node(bulk)
    assert len(expected["events"]) > 20 and expected["inbox"]
    for table in expected:
        assert got[table] == expected[table], table
    assert per_object(bulk_changes) == per_object(one_changes)
    assert in_order(bulk) == in_order(one)  # the events and inbox entries in the order they were written
    people = {"user:o9"}  # a person the step makes is made with the nodes, before the runs are applied
    assert [(c.kind, c.id, c.data) for c in bulk_changes if c.id not in people] == [
        (c.kind, c.id, c.data) for c in one_changes if c.id not in people]


async def one_by_one(bridge: RunBridge, items: list[Any]) -> None:
    """``items`` (run DTOs and events) applied as the live path applies them, one at a time."""
    for item in items:
        if "seq" in item:
            await bridge.apply_event(item)
        else:
            await bridge.apply_run(item)


def in_order(canvas: Canvas) -> dict[str, list[tuple[Any, ...]]]:
    """The events and inbox entries as written (by id), without their ids (documents by name)."""
    with canvas.engine.connect() as conn:
        named = dict(conn.execute(text("SELECT id, name FROM objects WHERE type = 'document'")).all())

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(named.get(value, value) for value in row) for row in conn.execute(text(sql))]

        return {"events": rows("SELECT object_id, type, level, actor_id, at, data FROM events ORDER BY id"),
                "inbox": rows("SELECT owner_id, kind, object_id, object_name, event_type, level, summary, body, ref "
                              "FROM inbox ORDER BY id")}


async def test_a_stretch_of_runs_and_events_in_one_step_leaves_the_canvas_as_one_by_one_does(canvases) -> None:
    """``batch_step`` as the follower's catch-up gives it: a run started, its events, the next run,
    its events, and each run read again at the end; the same rows, in the same order."""
    (one, one_changes), (bulk, bulk_changes) = canvases
    for canvas in (one, bulk):
        await prepare(canvas, ["run_a", "run_b", "run_c"])
    one_changes.clear()
    bulk_changes.clear()
    fresh = ["run_x", "run_y"]
    items: list[Any] = []
    for run_id in fresh:
        items.append(dto(run_id, pending=[{"id": f"p_{run_id}", "text": f"pending for {run_id}"}]))
        items += history(run_id)
    items += history("run_a")[:8]
    items += finals(fresh + ["run_a"])

    await one_by_one(RunBridge(one), items)
    bridge = RunBridge(bulk)
    await bridge.apply_steps([bridge.batch_step([bridge.prepare_event(i) if "seq" in i else i for i in items])])

    expected, got = by_node(one), by_node(bulk)
    assert len(expected["events"]) > 60 and len(expected["inbox"]) > 10
    for table in expected:
        assert got[table] == expected[table], table
    assert in_order(bulk) == in_order(one)
    assert [(c.kind, c.id, c.data) for c in bulk_changes] == [(c.kind, c.id, c.data) for c in one_changes]


async def test_runs_in_bulk_refuse_a_bad_run_before_any_write(canvas: Canvas) -> None:
    bridge = RunBridge(canvas)
    with pytest.raises(Exception, match="pending"):
        bridge.batch_step([dto("run_fine"), dto("run_bad", pending="not a list")])
    step = bridge.batch_step([dto("run_fine"), dto("bad id with spaces")])
    with pytest.raises(Exception, match="not a valid handle"):
        await bridge.apply_steps([step])
    assert await canvas.count_objects(type="node") == 0  # nothing of the step was written


def event_updates(changes: list[Change]) -> list[Change]:
    """The ``node.updated`` changes an event publishes (a node's status, its event and seq)."""
    return [c for c in changes if c.kind == "node.updated" and "event" in c.data]


async def test_a_coalesced_step_writes_the_same_rows_and_names_each_node_once_with_its_newest_event(canvases) -> None:
    """``batch_step(coalesce=True)``, as the follower writes: the rows are those of applying the items
    one by one, every other change is published as then, in its order, and each node's events
    publish one ``node.updated`` at the end, the one its newest event publishes one by one."""
    (one, one_changes), (bulk, bulk_changes) = canvases
    for canvas in (one, bulk):
        await prepare(canvas, ["run_a", "run_b", "run_c"])
    one_changes.clear()
    bulk_changes.clear()
    items: list[Any] = []
    for run_id in ["run_x", "run_y"]:
        items.append(dto(run_id))
        items += history(run_id)
    items += history("run_a")[:8]
    items += finals(["run_x", "run_y", "run_a"])

    await one_by_one(RunBridge(one), items)
    bridge = RunBridge(bulk)
    await bridge.apply_steps([bridge.batch_step([bridge.prepare_event(i) if "seq" in i else i for i in items],
                                                coalesce=True)])

    expected, got = by_node(one), by_node(bulk)
    for table in expected:
        assert got[table] == expected[table], table
    assert in_order(bulk) == in_order(one)
    coalesced = event_updates(bulk_changes)
    newest = {c.id: c.data for c in event_updates(one_changes)}  # each node's last one
    assert len(event_updates(one_changes)) > 3 * len(newest)  # many events a node, one change a node
    assert sorted(c.id for c in coalesced) == sorted(newest) and {c.id: c.data for c in coalesced} == newest
    others = [c for c in one_changes if c not in event_updates(one_changes)]
    assert [(c.kind, c.id, c.data) for c in bulk_changes if c not in coalesced] == [
        (c.kind, c.id, c.data) for c in others]
