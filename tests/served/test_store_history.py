"""A served cloud's run events live in ``cloud.db``: a restart reads none of them, a run keeps only a
bounded tail in memory, and every read of older events (a resumed stream, an export, an index) is
answered from the store, exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event

from services.cloud import FakeCloud
from services.cloud.event_log import EventLog
from services.cloud.state import export_state
from services.sdk import MemoryConnectionStore
from services.served.persist import CloudStore

URL = "http://127.0.0.1:9"
KEEP = 16


def _statements(store: CloudStore) -> list[str]:
    """Every SQL statement the store's engine runs from now on."""
    seen: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    return seen


async def _workspace(path: Path, *, runs: int, events: int) -> tuple[FakeCloud, CloudStore, list[str]]:
    """A stored cloud with ``runs`` runs of ``events`` events each (and a question in the first)."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(path, keep_events=KEEP)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    ids = []
    for index in range(runs):
        run = await client.runs.start(prompt=f"run {index}")
        fake = cloud.runs.get(run.id)
        if index == 0:
            fake.ask(title="which one?")
        fake.emit_many([("node.output_text.delta", {"delta": f"d{n}"}) for n in range(events - fake.seq)])
        ids.append(run.id)
        await store.flush()
    await client.aclose()
    await store.close()
    return cloud, store, ids


async def test_a_restart_reads_the_runs_but_none_of_their_events(tmp_path: Path) -> None:
    before, _, ids = await _workspace(tmp_path / "cloud.db", runs=3, events=1500)
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db", keep_events=KEEP)
    statements = _statements(store)
    assert await store.load(cloud)
    assert statements and not [s for s in statements if "cloud_event" in s]  # start reads no event
    for run_id in ids:
        fake = cloud.runs.get(run_id)
        assert isinstance(fake.events, EventLog) and fake.events.in_memory == 0
        assert len(fake.events) == 1500 and fake.seq == 1500
        assert fake.status == before.runs.get(run_id).status
    # read on demand, exactly what was stored
    first = cloud.runs.get(ids[0])
    assert first.events[-1] == before.runs.get(ids[0]).events[-1]
    assert [e["seq"] for e in first.events[100:103]] == [101, 102, 103]
    assert export_state(cloud)["runs"] == export_state(before)["runs"]
    # what the events told a loaded cloud is known without them: the question, the next ids
    question = first.question
    assert question is not None and cloud.state.questions[question["id"]] is first
    client = cloud.crouter("user:a")
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    assert (await client.questions.get(question["id"]))["title"] == "which one?"
    later = await client.runs.start(prompt="after the restart")
    assert later.id not in ids
    assert int(cloud.runs.get(later.id).ask(title="again").split("_")[1][:4]) > int(question["id"].split("_")[1][:4])
    await client.aclose()
    await store.close()


async def test_a_stream_resumed_from_an_old_cursor_gets_exactly_the_missing_events_from_the_store(
    tmp_path: Path,
) -> None:
    _, _, ids = await _workspace(tmp_path / "cloud.db", runs=1, events=5000)
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db", keep_events=KEEP)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    fake = cloud.runs.get(ids[0])
    statements = _statements(store)
    stream = client.runs.events(fake.id, after=123)
    seqs = []
    async for item in stream:
        seqs.append(item.seq)
        if item.seq == 4000:
            fake.emit("node.output_text.delta", {"delta": "live"})  # appended while the backlog is read
        if item.seq == 5001:
            break
    await stream.aclose()
    assert seqs == list(range(124, 5002))
    assert [s for s in statements if "cloud_event" in s]  # the missing events came from the store
    assert fake.events.in_memory <= KEEP + 1
    await client.aclose()
    await store.close()


async def test_the_events_a_run_holds_in_memory_stay_under_the_bound_while_a_producer_emits(
    tmp_path: Path,
) -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db", keep_events=KEEP)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    run = await client.runs.start(prompt="many")
    fake = cloud.runs.get(run.id)
    most = 0
    for burst in range(60):
        fake.emit_many([("node.output_text.delta", {"delta": f"{burst}.{n}"}) for n in range(100)])
        await store.flush()
        most = max(most, fake.events.in_memory)
    assert most <= KEEP
    assert len(fake.events) == fake.seq == 6000
    assert [e["seq"] for e in fake.events] == list(range(1, 6001))
    assert fake.events[-1]["delta"] == "59.99" and fake.events[0]["delta"] == "0.0"
    # a cursor before expired events is told so, and the rest is read from the store
    fake.expire_events(3000)
    assert len(fake.events) == 3000 and fake.events[0]["seq"] == 3001
    stream = client.runs.events(fake.id, after=10)
    kinds = []
    async for item in stream:
        kinds.append(item.type if item.seq is None else item.seq)
        if item.seq == 6000:
            break
    await stream.aclose()
    assert kinds == ["stream_gap", *range(3001, 6001)]
    await client.aclose()
    await store.close()


async def test_the_events_held_in_memory_in_all_stay_under_a_bound_however_many_runs_are_written(
    tmp_path: Path,
) -> None:
    hold = 50
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db", keep_events=KEEP, hold_events=hold)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    runs = []
    most = 0
    for index in range(30):  # 30 runs of 12 events: 360 written, each run under its own KEEP
        run = await client.runs.start(prompt=f"run {index}")
        fake = cloud.runs.get(run.id)
        fake.emit_many([("custom.step", {"n": n}) for n in range(12)])
        runs.append(fake)
        await store.flush()
        most = max(most, sum(r.events.in_memory for r in runs))
    assert most <= hold  # the bound is over every run, not each
    assert runs[-1].events.in_memory == 12 and runs[0].events.in_memory == 0  # the newest kept, the oldest let go
    # a run that let go of its events reads them back from the store, and keeps the new ones it is given
    cold = runs[0]
    assert [e["seq"] for e in cold.events] == list(range(1, 13)) and cold.events[5]["n"] == 5
    cold.emit("custom.step", {"n": 12})
    assert cold.events.in_memory == 1  # not written yet: held whatever the bound
    stream = client.runs.events(cold.id, after=3)
    seen = []
    async for item in stream:
        seen.append(item.seq)
        if item.seq == 13:
            break
    await stream.aclose()
    assert seen == list(range(4, 14))
    await store.flush()  # written now: the run is the newest written, and others let go for it
    assert sum(r.events.in_memory for r in runs) <= hold and cold.events.in_memory >= 1
    assert [e["seq"] for e in cold.events] == list(range(1, 14))
    exported = export_state(cloud)
    assert all(len(r["events"]) == 12 + (r["id"] == cold.id) for r in exported["runs"])
    await client.aclose()
    await store.close()
    again = FakeCloud("app", issuer=URL, runtime_url=URL)  # a restart reads every event back as it was
    reopened = CloudStore(tmp_path / "cloud.db", hold_events=hold)
    assert await reopened.load(again)
    assert [[e["seq"] for e in again.runs.get(r.id).events] for r in runs] == [[e["seq"] for e in r.events] for r in runs]
    await reopened.close()


def test_a_bad_bound_is_refused(tmp_path: Path) -> None:
    import pytest

    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="hold_events"):
            CloudStore(tmp_path / "cloud.db", hold_events=bad)  # type: ignore[arg-type]
