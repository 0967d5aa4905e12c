"""``CloudStore`` in process: a real FakeCloud, a real SQLite file, a second cloud reading it back."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.served.persist import CloudStore, StoreWriteError
from services.cloud.state import CloudStateError, export_state, import_state
from services.sdk import MemoryConnectionStore
from services.text import repair_value

URL = "http://127.0.0.1:9"


async def _reopened(path: Path) -> tuple[FakeCloud, CloudStore]:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(path)
    assert await store.load(cloud)
    return cloud, store


async def test_every_flushed_change_reads_back_the_same(tmp_path: Path) -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db")
    assert not await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    client = cloud.crouter("user:a")
    run = await client.runs.start(prompt="one", idempotency_key="k1")
    fake = cloud.runs.get(run.id)
    fake.reply("hi \ud800 and \x00")  # scripted in process: a served route refuses it (tests/security)
    fake.ask(title="why?")
    await client.runs.message(run.id, "because", start_turn=False)
    cloud.user("user:a").refuse("grant_suspended")
    cloud.user("user:a").memory.put("doc", "body")
    await store.flush()
    await client.aclose()
    reopened, other = await _reopened(tmp_path / "cloud.db")
    # read back the same, but text no answer could carry (a lone surrogate, NUL) is repaired
    assert export_state(reopened) == repair_value(export_state(cloud))[0]
    assert any("hi \ufffd and " in str(e.get("text")) for e in reopened.runs.get(run.id).events)
    assert reopened.runs.get(run.id).events[-1]["type"] == "node.message.received"
    token = cloud.state.mint_access(cloud.user("user:a"))[0]
    assert reopened.state.key.claims_of(token) is not None  # tokens from before still verify
    await other.close()
    await store.close()


async def test_a_deleted_run_id_started_again_keeps_both_runs_apart(tmp_path: Path) -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    client = cloud.crouter("user:a")
    await client.runs.start(prompt="first", id="run_same")
    cloud.runs.get("run_same").reply("first answer", chunks=3)
    await store.flush()
    cloud.runs.get("run_same").delete()
    await client.runs.start(prompt="second", id="run_same")
    cloud.runs.get("run_same").reply("second")
    await store.flush()
    await client.aclose()
    reopened, other = await _reopened(tmp_path / "cloud.db")
    assert export_state(reopened) == export_state(cloud)
    assert [r.params["prompt"] for r in reopened.runs.all] == [r.params["prompt"] for r in cloud.runs.all]
    assert reopened.runs.get("run_same").params["prompt"] == "second"
    await other.close()
    await store.close()


async def test_a_run_id_started_a_third_time_after_a_reopen_is_a_third_run(tmp_path: Path) -> None:
    # the store numbers a run id's generations as it goes and from what it loaded, not by counting
    path = tmp_path / "cloud.db"
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(path)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    client = cloud.crouter("user:a")
    for prompt in ("first", "second"):
        if cloud.runs.get("run_same") if "run_same" in cloud.state.runs else None:
            cloud.runs.get("run_same").delete()
        await client.runs.start(prompt=prompt, id="run_same")
        cloud.runs.get("run_same").reply(f"{prompt} answer")
        await store.flush()
    await client.aclose()
    await store.close()
    again, store = await _reopened(path)
    await again.connect(MemoryConnectionStore(), "user:a")
    client = again.crouter("user:a")
    again.runs.get("run_same").delete()
    await client.runs.start(prompt="other", id="run_other")  # a new run and a new generation in one flush
    await client.runs.start(prompt="third", id="run_same")
    again.runs.get("run_same").reply("third answer")
    again.runs.get("run_other").reply("other answer")
    await store.flush()
    await client.aclose()
    reopened, other = await _reopened(path)
    assert export_state(reopened) == export_state(again)
    assert [r.params["prompt"] for r in reopened.runs.all] == ["first", "second", "other", "third"]
    assert [r.events[-1].get("text") for r in reopened.runs.all if r.events] == [
        r.events[-1].get("text") for r in again.runs.all if r.events]
    await other.close()
    await store.close()


async def _keyed_cloud(path: Path) -> tuple[FakeCloud, CloudStore, Any]:
    """A stored cloud whose idempotency window keeps 8 keys, and a client of user:a on it."""
    from services.cloud.limits import Limits

    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    cloud.limits = Limits(idempotency_keys=8)
    store = CloudStore(path)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    return cloud, store, cloud.crouter("user:a")


async def test_the_idempotency_window_reads_back_as_it_was_after_keys_are_trimmed_and_dropped(tmp_path: Path) -> None:
    path = tmp_path / "cloud.db"
    cloud, store, client = await _keyed_cloud(path)
    started = []
    for number in range(12):  # past 8 + 8 // 8 keys the oldest are trimmed, between two flushes
        started.append(await client.runs.start(prompt=f"p{number}", idempotency_key=f"k{number}"))
        if number % 3 == 0:
            await store.flush()
    cloud.runs.get(started[-1].id).delete()  # its key is dropped with it
    await store.flush()
    await client.runs.start(prompt="after", idempotency_key="k-after")
    await store.flush()
    await client.aclose()
    assert ("user:a", "k11") not in cloud.state.idempotency and ("user:a", "k0") not in cloud.state.idempotency
    reopened, other = await _reopened(path)
    assert sorted(reopened.state.idempotency) == sorted(cloud.state.idempotency)
    assert export_state(reopened)["idempotency"] == export_state(cloud)["idempotency"]
    with sqlite3.connect(path) as db:
        assert sorted(db.execute("SELECT user_id, key FROM cloud_idempotency")) == sorted(cloud.state.idempotency)
    await other.close()
    await store.close()


def test_the_idempotency_window_notes_every_key_set_or_dropped() -> None:
    from services.cloud.shared import Keyed, KeyWindow

    def keyed() -> Keyed:
        return Keyed("run.start", "f", None, 200, {})

    keys = KeyWindow({("u", "a"): keyed()})
    assert keys.take_touched() == [("u", "a")] and keys.take_touched() == []
    keys[("u", "b")] = keyed()
    del keys[("u", "a")]
    keys.update({("u", "c"): keyed()})
    keys |= {("u", "d"): keyed()}
    keys.setdefault(("u", "e"), keyed())
    keys.pop(("u", "b"))
    assert keys.pop(("u", "x"), None) is None
    assert set(keys.take_touched()) == {("u", k) for k in "abcdex"}
    keys.popitem()
    keys.clear()
    assert set(keys.take_touched()) == {("u", k) for k in "cde"} and not keys


async def test_a_failed_commit_is_raised_and_the_next_flush_writes_everything(tmp_path: Path, monkeypatch) -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    client = cloud.crouter("user:a")
    run = await client.runs.start(prompt="x")
    real_connect = sqlite3.dbapi2.connect

    def full_disk(*args, **kwargs):  # the OS boundary: the database cannot be written
        raise sqlite3.OperationalError(errno.errorcode[errno.ENOSPC])

    store.engine.dispose()
    monkeypatch.setattr(sqlite3.dbapi2, "connect", full_disk)
    cloud.runs.get(run.id).reply("not yet on disk")
    with pytest.raises(StoreWriteError, match="ENOSPC"):  # an OSError: the server answers 507 with it
        await store.flush()
    assert store.broken
    monkeypatch.setattr(sqlite3.dbapi2, "connect", real_connect)
    await store.flush()
    await client.aclose()
    reopened, other = await _reopened(tmp_path / "cloud.db")
    assert export_state(reopened) == export_state(cloud)
    await other.close()
    await store.close()


def test_a_state_document_that_is_not_one_is_refused_and_changes_nothing() -> None:
    cloud = FakeCloud("app")
    before = export_state(cloud)
    for doc in (None, [], {"format": "x"}, {"format": "workbench-cloud-state", "version": 2},
                {**before, "users": [{"no": "id"}]}, {**before, "runs": [{"id": 5}]},
                {**before, "meta": {**before["meta"], "signing_key": {"pem": "nope", "kid": "k"}}}):
        with pytest.raises(CloudStateError):
            import_state(cloud, doc)
        assert export_state(cloud) == before


async def test_state_with_text_that_is_not_valid_unicode_exports_exactly_and_imports_repaired(tmp_path: Path) -> None:
    from workbench.served import export_state as export_file

    from services.served.persist import read_state_file

    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "ws" / "cloud.db")
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    client = cloud.crouter("user:a")
    run = await client.runs.start(prompt="plain")
    cloud.runs.get(run.id).reply("lone \udc80 surrogate and NUL \x00 kept")
    await client.aclose()
    await store.close()
    await export_file(tmp_path / "ws", tmp_path / "state.json")
    doc = read_state_file(tmp_path / "state.json")
    assert doc == export_state(cloud)
    other = FakeCloud("app", issuer=URL, runtime_url=URL)
    import_state(other, doc)
    # what no answer could carry is repaired on the way in (U+FFFD, NUL removed), so every read works
    assert other.runs.get(run.id).events[-2]["text"] == "lone \ufffd surrogate and NUL  kept"


async def test_a_change_no_client_is_sent_is_committed_anyway(tmp_path: Path) -> None:
    import asyncio

    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    store = CloudStore(tmp_path / "cloud.db")
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a")
    client = cloud.crouter("user:a")
    run = await client.runs.start(prompt="x")
    await store.flush()
    cloud.runs.get(run.id).reply("the operator's reply, typed in the window")  # no client asks after it
    reader = CloudStore(tmp_path / "cloud.db")
    for _ in range(200):  # bounded: the background commit comes within a tenth of a second
        stored = await asyncio.to_thread(reader.stored_state)
        events = next(r for r in stored["runs"] if r["id"] == run.id)["events"]
        if events and events[-1]["type"] == "node.turn.completed":
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the operator's reply was never committed")
    reader.engine.dispose()
    await client.aclose()
    await store.close()


def test_an_idempotent_answer_is_kept_as_text_and_read_as_a_new_object_each_time() -> None:
    from services.cloud.shared import Keyed

    body = {"id": "run_1", "params": {"prompt": "caf\u00e9 \ud800"}, "pending": []}
    keyed = Keyed("run.start", "f", "run_1", 200, body)
    body["params"]["prompt"] = "changed after"  # what the cloud answered stays what it was
    first = keyed.body
    assert first == {"id": "run_1", "params": {"prompt": "caf\u00e9 \ud800"}, "pending": []}
    first["pending"].append("x")
    assert keyed.body["pending"] == [] and keyed.body is not keyed.body
    assert keyed == Keyed("run.start", "f", "run_1", 200, keyed.body) != Keyed("run.start", "g", "run_1", 200, {})


async def test_after_a_restart_the_idempotency_window_trims_its_oldest_keys_not_the_first_by_name(tmp_path: Path) -> None:
    path = tmp_path / "cloud.db"
    cloud, store, client = await _keyed_cloud(path)
    made = {}
    for name in ("z", "y", "x", "b", "a"):  # the newest keys first by name: a is the last made
        made[name] = (await client.runs.start(prompt=name, idempotency_key=name)).id
        await store.flush()
    for name in ("q", "p"):  # two in one flush: written in the order they were made
        made[name] = (await client.runs.start(prompt=name, idempotency_key=name)).id
    await store.flush()
    await client.aclose()
    await store.close()
    assert [key for _, key in cloud.state.idempotency] == ["z", "y", "x", "b", "a", "q", "p"]
    again, store = await _reopened(path)
    again.limits = cloud.limits
    assert [key for _, key in again.state.idempotency] == ["z", "y", "x", "b", "a", "q", "p"]
    await again.connect(MemoryConnectionStore(), "user:a")
    client = again.crouter("user:a")
    for name in ("n", "m", "l"):  # past 8 + 8 // 8 keys: the two oldest go (z and y), not a and b
        await client.runs.start(prompt=name, idempotency_key=name)
    assert [key for _, key in again.state.idempotency] == ["x", "b", "a", "q", "p", "n", "m", "l"]
    replayed = await client.runs.start(prompt="a", idempotency_key="a")  # a retry of a key made before the restart
    assert replayed.id == made["a"]
    await store.flush()
    await client.aclose()
    reopened, other = await _reopened(path)
    assert [key for _, key in reopened.state.idempotency] == ["x", "b", "a", "q", "p", "n", "m", "l"]
    assert export_state(reopened)["idempotency"] == export_state(again)["idempotency"]
    await other.close()
    await store.close()
