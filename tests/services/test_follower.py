"""The run follower applies a queued batch of run changes to the canvas in one transaction, in order;
a change the canvas refuses is recorded and published, and every other change of its batch is still
applied (the batch is applied again one change at a time); a settled run is captured once, also
across a re-open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event

from services.canvas import Canvas, RunBridge
from services.changes import Change, ChangeFeed
from services.clock import FakeClock
from services.cloud import FakeCloud, FakeRun, generate_private_key_pem
from services.desk import Desk, RunDetail
from services.desk.embedded import embedded_desk
from services.follower import RunFollower
from services.sdk import Crouter, MemoryConnectionStore, OAuth2Client
from services.served.control import ControlApp


@pytest.fixture
async def canvas(tmp_path: Path) -> AsyncIterator[Canvas]:
    canvas = await Canvas.open(tmp_path / "canvas.db")
    yield canvas
    await canvas.close()


@pytest.fixture
def feed() -> ChangeFeed:
    return ChangeFeed()


@pytest.fixture
def cloud(feed: ChangeFeed) -> FakeCloud:
    return FakeCloud(client_id="app", changes=feed, clock=FakeClock(1_800_000_000.0))


@pytest.fixture
def desk(cloud: FakeCloud, feed: ChangeFeed) -> Desk:
    return embedded_desk(cloud, ControlApp(cloud, "", change_log=False), feed, clock=cloud.clock)


def commits(canvas: Canvas) -> list[int]:
    """Every transaction the canvas commits from now on (one entry each)."""
    seen: list[int] = []
    event.listen(canvas.engine, "commit", lambda _conn: seen.append(1))
    return seen


@pytest.fixture
async def app(cloud: FakeCloud) -> AsyncIterator[Crouter]:
    """The app's SDK client, as ``user:o1``."""
    store = MemoryConnectionStore()
    await cloud.connect(store, "user:o1", scopes=["crtr:llm", "crtr:act"])
    async with OAuth2Client(client_id="app", issuer=cloud.issuer, transport=cloud.transport,
                            private_key=generate_private_key_pem(), redirect_uri="https://app.test/callback",
                            store=store, clock=cloud.clock) as oauth:
        yield await oauth.client("user:o1")


async def a_run(cloud: FakeCloud, app: Crouter) -> FakeRun:
    run = cloud.runs.get((await app.runs.start(prompt="hello")).id)
    run.reply("first answer", chunks=2)
    run.emit("node.message.received", {"message": {"id": "m1", "text": "a queued note"}, "start_turn": False})
    return run


async def texts(canvas: Canvas, run_id: str) -> list[object]:
    return [e.data.get("text") for e in reversed(await canvas.events(run_id, limit=200))
            if e.type == "node.output_text.done"]


async def test_a_queued_batch_is_applied_in_one_canvas_transaction(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas) -> None:
    runs = [await a_run(cloud, app) for _ in range(3)]
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    seen = commits(canvas)
    await follower.start()  # the runs that exist are caught up: one batch
    await follower.idle()
    await follower.stop()
    assert list(follower.errors) == []
    assert len(seen) == 1
    for run in runs:
        node = await canvas.read(run.id)
        assert node.node is not None and node.node.status == "idle"
        assert await texts(canvas, run.id) == ["first answer"]
        assert [e.body for e in (await canvas.inbox(run.id)).items] == ["a queued note"]


async def test_a_catch_up_writes_a_batch_of_events_a_statement_per_table_not_one_per_event(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas) -> None:
    runs = [await a_run(cloud, app) for _ in range(3)]
    for run in runs:
        run.emit_many([("custom.step", {"step": step}) for step in range(100)])
    inserts: list[str] = []
    event.listen(canvas.engine, "before_cursor_execute", lambda _conn, _cursor, statement, *_rest: inserts.append(
        statement.split()[2]) if statement.startswith("INSERT INTO") else None)
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    await follower.start()
    await follower.idle()
    await follower.stop()
    assert list(follower.errors) == []
    for run in runs:
        steps = [e for e in await canvas.events(run.id, limit=500) if e.type == "custom.step"]
        assert len(steps) == 100 and await texts(canvas, run.id) == ["first answer"]
    # 300 steps and a turn a run: a node's creation and configuration, a message filed, the rest in bulk
    assert inserts.count("events") <= 5 * len(runs)


async def test_a_change_the_canvas_refuses_is_recorded_and_the_rest_of_its_batch_is_applied(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas, tmp_path: Path) -> None:
    document = (await canvas.write("notes/plain", preview="a document, not a node", owner="user:o1")).object
    run = await a_run(cloud, app)
    run.emit("custom.note", {"text": "on a document"}, node_id=document.id)  # refused inside the transaction
    run.reply("after the refused change", chunks=1)
    run.settle(result="done")
    settled: list[RunDetail] = []

    async def on_settled(detail: RunDetail) -> None:
        settled.append(detail)

    errors: list[Change] = []
    feed.subscribe(lambda c: errors.append(c) if c.kind == "follower.error" else None)
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas), on_settled=on_settled,
                           state_path=tmp_path / "follower.json")
    await follower.start()
    await follower.idle()
    # a change that carries an event the bridge cannot read is refused before any transaction
    feed.publish(Change("cloud", "run.event", run.id, {"event": {"type": "custom.note", "run_id": run.id}}))
    await follower.idle()
    await follower.stop()
    assert list(follower.errors) == [
        f"run.event {run.id}: BridgeInputError: the node id {document.id!r} names a document, not a node",
        f"run.event {run.id}: BridgeInputError: the event of run {run.id!r} has no valid 'node_id' (got None)",
    ]
    assert [c.id for c in errors] == [run.id, run.id]
    assert await texts(canvas, run.id) == ["first answer", "after the refused change"]
    node = await canvas.read(run.id)
    assert node.node is not None and node.node.status == "done" and node.node.outcome == "result"
    assert [d.id for d in settled] == [run.id]
    assert settled[0].events[-1]["type"] == "node.settled" and isinstance(settled[0].events[-1]["at"], float)

    again = RunFollower(desk, feed, bridge=RunBridge(canvas), on_settled=on_settled,
                        state_path=tmp_path / "follower.json")
    await again.start()  # the canvas holds the run's last event: nothing is applied or captured again
    await again.idle()
    await again.stop()
    assert [d.id for d in settled] == [run.id]
    assert list(again.errors) == []


async def test_a_run_record_names_each_turn_time_as_the_wire_writes_it(
        cloud: FakeCloud, app: Crouter, desk: Desk) -> None:
    from services.follower import run_record

    run = await a_run(cloud, app)
    record = run_record(desk.detail(run.id))
    wire = {f"{run.id}:{e['seq']}": e["at"] for e in run.events}
    assert record["thread"] == run.id
    turns = record["turns"]
    assert isinstance(turns, list) and [t["role"] for t in turns] == ["user", "assistant"]
    assert all(t["ts"] == wire[t["id"]] for t in turns)


async def node_events(canvas: Canvas, run_id: str) -> list[str]:
    return [e.type for e in reversed(await canvas.events(run_id, limit=500))]


async def test_a_relaunch_over_a_caught_up_canvas_writes_nothing_and_then_only_the_new_events(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas, tmp_path: Path) -> None:
    runs = [await a_run(cloud, app) for _ in range(3)]
    runs[1].settle(result="done")

    read = desk.read_events

    async def read_logged(run_id: str, after: int = 0, upto: int | None = None, *,
                          exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
        events = await read(run_id, after, upto, exclude=exclude)
        assert "node.output_text.delta" in exclude  # the follower reads no text deltas
        reads.append((run_id, after, len(events)))
        return events

    desk.read_events = read_logged  # type: ignore[method-assign]
    reads: list[tuple[str, int, int]] = []

    async def launch() -> list[int]:
        """One launch of the follower over the canvas: the canvas's commits while it catches up (and
        ``applied`` says how many changes it queued and applied; ``reads`` what it read of each run)."""
        reads.clear()
        follower = RunFollower(desk, feed, bridge=RunBridge(canvas), state_path=tmp_path / "follower.json")
        seen: list[int] = []

        def commit(_conn: object) -> None:
            seen.append(1)

        event.listen(canvas.engine, "commit", commit)
        try:
            await follower.start()
            await follower.idle()
            await follower.stop()
        finally:
            event.remove(canvas.engine, "commit", commit)
        assert list(follower.errors) == []
        applied.append(follower.applied)
        return seen

    applied: list[int] = []

    assert len(await launch()) == 1  # a fresh canvas: every run in one batch
    before = {run.id: await node_events(canvas, run.id) for run in runs}
    assert {run_id for run_id, after, _ in reads if after == 0} >= {run.id for run in runs}  # a fresh canvas reads all
    assert await launch() == []  # caught up: not one write
    assert applied[-1] == 0  # nor one change queued (the settle is captured by no one here: not queued either)
    assert all(after > 0 and count <= 3 for _, after, count in reads), reads  # only what the nodes may lack

    runs[0].emit("custom.note", {"text": "one"})
    runs[0].emit("node.output_text.delta", {"delta": "ignored", "entry_id": "e9"})
    runs[0].emit("custom.note", {"text": "two"})
    runs[0].emit("node.output_text.delta", {"delta": "ignored too", "entry_id": "e9"})
    assert len(await launch()) == 1  # only the new events, in one batch
    after = {run.id: await node_events(canvas, run.id) for run in runs}
    assert after[runs[0].id] == before[runs[0].id] + ["custom.note", "custom.note"]
    assert after[runs[1].id] == before[runs[1].id] and after[runs[2].id] == before[runs[2].id]
    assert applied[-1] == 2
    assert [(run_id, count) for run_id, _, count in reads if count] == [(runs[0].id, 2)]  # the new notes alone
    assert await launch() == [] and applied[-1] == 0
    # only the run whose last events are deltas is looked at again (after its last note), and none is read
    assert [(run_id, count) for run_id, _, count in reads] == [(runs[0].id, 0)]


async def test_a_capture_that_failed_is_tried_again_at_the_next_launch_without_canvas_writes(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas, tmp_path: Path) -> None:
    run = await a_run(cloud, app)
    run.settle(result="done")
    settled: list[str] = []

    async def on_settled(detail: RunDetail) -> None:
        if not settled:
            settled.append("failed")
            raise OSError("the disk is full")
        settled.append(detail.id)

    first = RunFollower(desk, feed, bridge=RunBridge(canvas), on_settled=on_settled, state_path=tmp_path / "follower.json")
    await first.start()
    await first.idle()
    await first.stop()
    assert settled == ["failed"] and len(first.errors) == 1
    again = RunFollower(desk, feed, bridge=RunBridge(canvas), on_settled=on_settled, state_path=tmp_path / "follower.json")
    seen = commits(canvas)
    await again.start()
    await again.idle()
    await again.stop()
    assert settled == ["failed", run.id] and list(again.errors) == []
    assert seen == []  # the canvas held the run already: only the capture was made


async def test_what_the_cloud_does_while_the_catch_up_reads_is_applied_after_it(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas) -> None:
    runs = [await a_run(cloud, app) for _ in range(2)]
    read = desk.read_events
    done: list[str] = []

    async def read_while_the_cloud_moves(run_id: str, after: int = 0, upto: int | None = None, *,
                                         exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
        if not done:  # the catch-up is reading: another run moves on meanwhile, a run starts
            done.append(run_id)
            runs[1].emit("custom.note", {"text": "made while the catch-up read"})
            fresh = cloud.runs.get((await app.runs.start(prompt="started meanwhile")).id)
            fresh.reply("its answer", chunks=1)
            done.append(fresh.id)
        return await read(run_id, after, upto, exclude=exclude)

    desk.read_events = read_while_the_cloud_moves  # type: ignore[method-assign]
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    await follower.start()
    await follower.idle()
    await follower.stop()
    assert list(follower.errors) == []
    notes = [e.data["seq"] for e in await canvas.events(runs[1].id, limit=500) if e.type == "custom.note"]
    assert notes == [runs[1].seq]  # once: the catch-up may read it too, the canvas skips it
    assert await texts(canvas, done[1]) == ["its answer"]
    for run in runs:
        assert await texts(canvas, run.id) == ["first answer"]


async def test_a_catch_up_in_the_background_is_waited_for_by_idle_and_a_failed_one_leaves_the_live_path_working(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas) -> None:
    runs = [await a_run(cloud, app) for _ in range(2)]
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    await follower.start(background=True)  # returns before the runs that exist are read
    await follower.idle()  # waits for the catch-up, then for what it queued
    for run in runs:
        assert await texts(canvas, run.id) == ["first answer"]
    await follower.stop()

    read = desk.read_events

    async def broken(run_id: str, after: int = 0, upto: int | None = None, *,
                     exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
        raise RuntimeError("the store is gone")

    desk.read_events = broken  # type: ignore[method-assign]
    later = await a_run(cloud, app)  # the canvas lacks it: the catch-up would read it
    again = RunFollower(desk, feed, bridge=RunBridge(canvas))
    await again.start(background=True)
    await again.idle()
    assert [e for e in again.errors if e.startswith("catch-up: RuntimeError: the store is gone")]
    desk.read_events = read  # type: ignore[method-assign]
    later.reply("a live answer", chunks=1)  # the live path still applies what the feed gives
    await again.idle()
    await again.stop()
    assert "a live answer" in await texts(canvas, later.id)


async def test_a_relaunch_finds_a_run_with_text_to_repair_current_and_writes_nothing(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas) -> None:
    runs = [await a_run(cloud, app) for _ in range(3)]
    runs[1].set_activity("thinking \udc00 hard")  # the node holds it repaired (U+FFFD)
    runs[1].name = "split \ud83d name"
    for _ in range(2):
        follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
        seen = commits(canvas)
        await follower.start()
        await follower.idle()
        await follower.stop()
        assert list(follower.errors) == []
    assert seen == [] and follower.applied == 0  # the second launch: the run's node is current, once repaired
    assert (await canvas.get(runs[1].id)).name == "split \ufffd name"


async def test_a_catch_up_in_chunks_applies_each_while_the_next_is_read_and_what_comes_meanwhile_after_it_all(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A background catch-up reads a chunk of runs at a time and applies each chunk while it reads
    the next; an event the cloud gives meanwhile, of a run not read yet, waits until the whole
    catch-up is applied: the canvas holds every event of every run, once, in order."""
    import services.follower as follower_module

    monkeypatch.setattr(follower_module, "CATCH_UP_CHUNK", 1)  # a run a chunk
    runs = [await a_run(cloud, app) for _ in range(4)]
    for run in runs:
        run.emit_many([("custom.step", {"step": step}) for step in range(50)])
    read = desk.read_events
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    applied_before: list[int] = []

    async def read_while_the_cloud_moves(run_id: str, after: int = 0, upto: int | None = None, *,
                                         exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
        if run_id == runs[2].id and not applied_before:  # the first chunks are being applied; the last run moves on
            for _ in range(2000):  # a catch-up that applied nothing before its end never gets past this
                if follower.applied:
                    break
                await asyncio.sleep(0.005)
            applied_before.append(follower.applied)
            runs[3].emit("custom.step", {"step": "live"})
        return await read(run_id, after, upto, exclude=exclude)

    desk.read_events = read_while_the_cloud_moves  # type: ignore[method-assign]
    await follower.start(background=True)
    await follower.idle()
    await follower.stop()
    assert list(follower.errors) == []
    assert applied_before and applied_before[0] > 0  # a chunk was applied while a later one was read
    for run in runs:
        seqs = [e.data["seq"] for e in reversed(await canvas.events(run.id, limit=500))
                if e.type == "custom.step"]
        assert len(seqs) == (51 if run is runs[3] else 50) and seqs == sorted(seqs)
        assert await texts(canvas, run.id) == ["first answer"]


async def test_stopping_a_catch_up_in_the_background_leaves_no_task_behind(
        cloud: FakeCloud, app: Crouter, desk: Desk, feed: ChangeFeed, canvas: Canvas,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``stop`` while a background catch-up reads a later chunk (an earlier one queued to apply):
    the catch-up and what applies its chunks both end, and the follower stops at once."""
    import services.follower as follower_module

    monkeypatch.setattr(follower_module, "CATCH_UP_CHUNK", 1)
    runs = [await a_run(cloud, app) for _ in range(3)]
    read = desk.read_events
    reading = asyncio.Event()

    async def stuck_on_the_last(run_id: str, after: int = 0, upto: int | None = None, *,
                                exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
        if run_id == runs[2].id:
            reading.set()
            await asyncio.Event().wait()  # never answers
        return await read(run_id, after, upto, exclude=exclude)

    desk.read_events = stuck_on_the_last  # type: ignore[method-assign]
    before = asyncio.all_tasks()
    follower = RunFollower(desk, feed, bridge=RunBridge(canvas))
    await follower.start(background=True)
    await asyncio.wait_for(reading.wait(), 10)
    await asyncio.wait_for(follower.stop(), 10)
    await asyncio.sleep(0)
    assert {t for t in asyncio.all_tasks() - before if not t.done()} == set()
