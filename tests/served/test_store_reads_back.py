"""A restarted served cloud holds none of its runs: each is read back from ``cloud.db`` when asked
for, is the same object on every read after, and is written as itself when it changes. Lists, pages
and exports read stored runs without holding them. A real FakeCloud, a real SQLite file, the control
API over ASGI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.cloud import FakeCloud
from services.cloud.state import CloudStateError, export_state
from services.sdk import MemoryConnectionStore
from services.served.asgi import CONTROL_PREFIX, CloudApp
from services.served.control import ControlApp
from services.served.persist import CloudStore

URL = "http://127.0.0.1:9"


def _held(cloud: FakeCloud) -> int:
    return sum(1 for slot in cloud.state.run_log.slots if slot.run is not None)


async def _built(path: Path) -> dict[str, str]:
    """A stored cloud: settled, idle and running runs of two people, a question, messages, and a
    deleted run whose id was started again. Returns the ids worth naming."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(path)
    await store.load(cloud)
    ids: dict[str, str] = {}
    for person in ("user:a", "user:b"):
        await cloud.connect(MemoryConnectionStore(), person, scopes=["crtr:llm"])
    a, b = cloud.crouter("user:a"), cloud.crouter("user:b")
    for n in range(6):
        run = await (a if n % 2 else b).runs.start(prompt=f"run {n}")
        fake = cloud.runs.get(run.id)
        fake.reply(f"answer {n}")
        if n % 3 == 0:
            fake.settle(result=f"done {n}")
    asked = await a.runs.start(prompt="asks")
    ids["question"] = cloud.runs.get(asked.id).ask(title="which one?")
    ids["asked"] = asked.id
    talked = await a.runs.start(prompt="talks")
    await a.runs.message(talked.id, "more", start_turn=False)
    ids["talked"] = talked.id
    await a.runs.start(prompt="first", id="run_same")
    cloud.runs.get("run_same").reply("old")
    cloud.runs.get("run_same").delete()
    await a.runs.start(prompt="second", id="run_same")
    cloud.runs.get("run_same").reply("new")
    await store.flush()
    await a.aclose()
    await b.aclose()
    await store.close()
    return ids


async def _reopened(path: Path) -> tuple[FakeCloud, CloudStore]:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(path)
    assert await store.load(cloud)
    return cloud, store


async def _control(cloud: FakeCloud, store: CloudStore, path: str, **params: str) -> Any:
    app = ControlApp(cloud, "t", store=store)
    transport = httpx.ASGITransport(app=CloudApp(cloud, control=app))
    async with httpx.AsyncClient(transport=transport, base_url=URL + CONTROL_PREFIX,
                                 headers={"Authorization": "Bearer t"}) as client:
        answer = await client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_a_restart_holds_no_run_and_lists_pages_and_exports_every_one_without_holding_them(tmp_path: Path) -> None:
    ids = await _built(tmp_path / "cloud.db")
    before, first = await _reopened(tmp_path / "cloud.db")
    every = export_state(before)
    listed = await _control(before, first, "/runs")
    assert _held(before) == 0
    for run in listed["runs"]:
        run.pop("streams")
    await first.close()
    # what a list, a page, a run and an export answer is what the runs held would answer
    cloud, store = await _reopened(tmp_path / "cloud.db")
    assert _held(cloud) == 0 and len(cloud.state.run_log) == len(every["runs"])
    assert [r["id"] for r in listed["runs"]] == [r["id"] for r in every["runs"]]
    mine = await _control(cloud, store, "/runs", user="user:b")
    assert [r["id"] for r in mine["runs"]] == [r["id"] for r in every["runs"] if r["user_id"] == "user:b"]
    page = await _control(cloud, store, f"/runs/{ids['talked']}/events", after="0")
    assert page["events"] and page["events"][-1]["type"] == "node.message.received"
    one = await _control(cloud, store, f"/runs/{ids['asked']}")
    assert one["question"]["id"] == ids["question"] and one["events"]
    assert _held(cloud) == 0  # read, not held
    with_events = await _control(cloud, store, "/runs", events="1")
    assert [len(r["events"]) for r in with_events["runs"]] == [len(r["events"]) for r in every["runs"]]
    assert await _control(cloud, store, "/state") == every == export_state(cloud)
    assert _held(cloud) == 0
    # held afterwards, each list entry is the same as before
    for slot in cloud.state.run_log.slots:
        cloud.state.runs.held_runs([slot])
    again = await _control(cloud, store, "/runs")
    for run in again["runs"]:
        assert run.pop("streams") == 0
    assert again == listed
    await store.close()


async def test_a_run_read_back_is_the_same_run_on_every_read_and_is_written_as_itself(tmp_path: Path) -> None:
    ids = await _built(tmp_path / "cloud.db")
    cloud, store = await _reopened(tmp_path / "cloud.db")
    run = cloud.runs.get(ids["talked"])
    assert cloud.runs.get(ids["talked"]) is run is cloud.state.runs[ids["talked"]]
    assert _held(cloud) == 1
    seq = run.seq
    run.reply("after the restart")
    await store.flush()
    await store.close()
    cloud, store = await _reopened(tmp_path / "cloud.db")
    with sqlite3.connect(tmp_path / "cloud.db") as db:  # changed in place: still one row, its events after
        assert db.execute("SELECT count(*) FROM cloud_run WHERE run_id = ?", (ids["talked"],)).fetchone() == (1,)
    again = cloud.runs.get(ids["talked"])
    assert again.seq > seq and again.events[-1]["type"] == "node.turn.completed"
    assert [e["seq"] for e in again.events] == list(range(again.first_seq, again.seq + 1))
    await store.close()


async def test_a_deleted_run_and_the_run_started_again_under_its_id_stay_apart_across_restarts(tmp_path: Path) -> None:
    await _built(tmp_path / "cloud.db")
    cloud, store = await _reopened(tmp_path / "cloud.db")
    same = [slot for slot in cloud.state.run_log.slots if slot.id == "run_same"]
    assert [(slot.gen, slot.deleted) for slot in same] == [(0, True), (1, False)]
    current = cloud.runs.get("run_same")
    assert not current.deleted and current.events[-2]["text"] == "new"
    current.delete()
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    await client.runs.start(prompt="third", id="run_same")
    cloud.runs.get("run_same").reply("third")
    await store.flush()
    await client.aclose()
    await store.close()
    cloud, store = await _reopened(tmp_path / "cloud.db")
    runs = [r for r in export_state(cloud)["runs"] if r["id"] == "run_same"]
    assert [(r["deleted"], r["events"][-2]["text"]) for r in runs] == [(True, "old"), (True, "new"), (False, "third")]
    await store.close()


async def test_a_stored_runs_question_and_ids_are_known_without_reading_the_run(tmp_path: Path) -> None:
    ids = await _built(tmp_path / "cloud.db")
    cloud, store = await _reopened(tmp_path / "cloud.db")
    stored_ids = [slot.id for slot in cloud.state.run_log.slots]
    assert cloud.state.questions.get("q_nothing") is None
    assert _held(cloud) == 0
    run = cloud.state.questions[ids["question"]]
    assert run is cloud.runs.get(ids["asked"]) and run.question["id"] == ids["question"]
    # new ids continue after every id the stored runs made (runs, messages, questions)
    fresh = cloud.state.new_id("run")
    serial = int(fresh.split("_")[1][:-6])
    made = [*stored_ids, ids["question"], *(m["id"] for m in cloud.runs.get(ids["talked"]).messages)]
    assert all(serial > int(i.split("_")[1][:-6]) for i in made if i.startswith(("run_0", "q_", "msg_")))
    await store.close()


async def test_a_file_from_before_the_run_columns_is_read_and_given_them_once(tmp_path: Path) -> None:
    ids = await _built(tmp_path / "cloud.db")
    cloud, store = await _reopened(tmp_path / "cloud.db")
    every = export_state(cloud)
    await store.close()
    with sqlite3.connect(tmp_path / "cloud.db") as db:  # as an older server left it
        db.execute("DROP INDEX cloud_run_heads")
        for column in ("user_id", "status", "deleted", "serial", "top_entry", "dto"):
            db.execute(f"ALTER TABLE cloud_run DROP COLUMN {column}")
        db.execute("DROP TABLE cloud_question")
    cloud, store = await _reopened(tmp_path / "cloud.db")
    assert export_state(cloud) == every and _held(cloud) == 0
    assert cloud.state.questions[ids["question"]].id == ids["asked"]
    await store.close()
    with sqlite3.connect(tmp_path / "cloud.db") as db:
        assert db.execute("SELECT count(*) FROM cloud_run WHERE user_id IS NULL OR dto IS NULL").fetchone() == (0,)


async def test_a_malformed_stored_run_is_refused_by_name_when_read_and_the_others_still_read(tmp_path: Path) -> None:
    ids = await _built(tmp_path / "cloud.db")
    with sqlite3.connect(tmp_path / "cloud.db") as db:
        data = json.loads(db.execute("SELECT data FROM cloud_run WHERE run_id = ?", (ids["talked"],)).fetchone()[0])
        data["params"] = "not an object"
        db.execute("UPDATE cloud_run SET data = ? WHERE run_id = ?", (json.dumps(data), ids["talked"]))
        broken = db.execute("SELECT data FROM cloud_run WHERE run_id = ?", (ids["talked"],)).fetchone()
    cloud, store = await _reopened(tmp_path / "cloud.db")  # the load reads no run
    with pytest.raises(CloudStateError, match=r"run\.params must be an object"):
        cloud.runs.get(ids["talked"])
    assert cloud.runs.get(ids["asked"]).question["id"] == ids["question"]
    await store.flush()
    await store.close()
    with sqlite3.connect(tmp_path / "cloud.db") as db:  # nothing rewritten over it
        assert db.execute("SELECT data FROM cloud_run WHERE run_id = ?", (ids["talked"],)).fetchone() == broken


async def _holding_none(tmp_path: Path) -> tuple[FakeCloud, CloudStore, Any]:
    """A new stored cloud that lets go of every run it may after each write, and an app's client."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db", hold_runs=0)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    return cloud, store, cloud.crouter("user:a")


async def test_past_hold_runs_the_runs_used_least_recently_are_let_go_and_read_back_as_themselves(tmp_path: Path) -> None:
    import gc

    cloud, store, client = await _holding_none(tmp_path)
    started = [await client.runs.start(prompt=f"run {n}") for n in range(5)]
    for run in started:
        cloud.runs.get(run.id).reply(f"answer for {run.id}")
    kept = cloud.runs.get(started[0].id)  # someone still holds the first run
    streamed = cloud.runs.get(started[1].id)
    stream = client.runs.events(started[1].id, after=streamed.seq - 1)
    first = await stream.__anext__()  # a stream open on the second
    assert first.seq == streamed.seq
    del streamed
    await store.flush()
    held = {slot.id for slot in cloud.state.run_log.slots if slot.run is not None}
    assert held == {started[1].id}  # none is kept but the one streamed
    # still held by someone: the same run again, and its change is written as its own
    assert cloud.runs.get(started[0].id) is kept
    kept.reply("after it was let go of")
    await store.flush()
    # held by nobody: read back from the store, whole
    gc.collect()
    again = cloud.runs.get(started[2].id)
    assert again.events[-2]["text"] == f"answer for {started[2].id}" and again.seq == len(again.events)
    await stream.aclose()
    await client.aclose()
    await store.close()
    cloud, store = await _reopened(tmp_path / "cloud.db")
    with sqlite3.connect(tmp_path / "cloud.db") as db:
        assert db.execute("SELECT count(*), max(gen) FROM cloud_run").fetchone() == (5, 0)
    first_run = cloud.runs.get(started[0].id)
    assert [e["seq"] for e in first_run.events] == list(range(1, first_run.seq + 1))
    assert first_run.events[-2]["text"] == "after it was let go of"
    await store.close()


async def test_a_question_of_a_run_let_go_of_is_found_again(tmp_path: Path) -> None:
    cloud, store, client = await _holding_none(tmp_path)
    run = await client.runs.start(prompt="asks")
    question_id = cloud.runs.get(run.id).ask(title="which?")
    await store.flush()
    assert cloud.state.run_log.slots[0].run is None and question_id not in list(cloud.state.questions)
    answer = await client.questions.get(question_id)  # the app's read finds it through the store
    assert answer["id"] == question_id and answer["status"] == "open"
    found = cloud.state.questions[question_id]
    assert found is cloud.runs.get(run.id) and found.question["id"] == question_id
    await client.aclose()
    await store.close()


async def test_a_responder_replying_on_a_run_let_go_of_writes_the_reply_as_that_runs(tmp_path: Path) -> None:
    import asyncio

    cloud, store, client = await _holding_none(tmp_path)
    go = asyncio.Event()

    async def slow(ctx: Any) -> None:
        await go.wait()
        ctx.run.reply("late reply")

    cloud.runs.respond(slow)
    run = await client.runs.start(prompt="wait for it")
    await store.flush()
    assert cloud.state.run_log.slots[-1].run is None  # written, so let go of, while the responder waits
    go.set()
    await cloud.settle_tasks()
    assert cloud.runs.get(run.id).events[-2]["text"] == "late reply"
    await store.flush()
    await client.aclose()
    await store.close()
    cloud, store = await _reopened(tmp_path / "cloud.db")
    with sqlite3.connect(tmp_path / "cloud.db") as db:
        assert db.execute("SELECT count(*), max(gen), max(ordinal) FROM cloud_run").fetchone() == (1, 0, 1)
    again = cloud.runs.get(run.id)
    assert again.events[-2]["text"] == "late reply"
    assert [e["seq"] for e in again.events] == list(range(1, again.seq + 1))
    await store.close()
