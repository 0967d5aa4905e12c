"""``TimeStore``: versions valid from one moment until the next, pages in the pane's order, a batch
written whole or not at all, and a file that is not a history refused in words (the workspace sets it
aside and keeps a new one)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from services.clock import FakeClock
from services.timeline import HistoryError, TimeStore, Version, frame_at
from services.workspace import Settings, Workspace


def moment(kind: str = "x", item: str = "", run: str | None = None, seq: int | None = None, at: float = 1.0):
    return (at, "test", kind, item, run, seq)


def test_an_item_reads_as_it_was_at_each_moment(tmp_path: Path) -> None:
    store = TimeStore(tmp_path / "h.db")
    one = store.record([moment()], [Version("grant", "ada", {"state": "active"}, sort="ada")])
    two = store.record([moment()], [Version("grant", "ada", {"state": "revoked"}, sort="ada"),
                                    Version("grant", "bo", {"state": "active"}, sort="bo")])
    three = store.record([moment()], [Version("grant", "ada", None)])
    same = store.record([moment()], [Version("grant", "bo", {"state": "active"}, sort="bo")])  # unchanged: no row
    assert (one, two, three, same) == (1, 2, 3, 4)
    assert store.get("grant", "ada", 1) == {"state": "active"}
    assert store.get("grant", "ada", 2) == {"state": "revoked"}
    assert store.get("grant", "ada", 3) is None
    assert store.every("grant", 1) == {"ada": {"state": "active"}}
    assert [k for k, _ in store.page("grant", 2)] == ["ada", "bo"]
    assert store.count("grant", 2) == 2 and store.count("grant", 4) == 1
    assert store._all("SELECT count(*) FROM rows WHERE key = 'bo'")[0][0] == 1
    assert [store.count("grant", m) for m in range(5)] == [len(store.every("grant", m)) for m in range(5)] == [0, 1, 2, 1, 1]


def test_a_key_twice_in_one_batch_keeps_the_newer(tmp_path: Path) -> None:
    store = TimeStore(tmp_path / "h.db")
    store.record([moment()], [Version("run", "r", {"n": 1})])
    store.record([moment()], [Version("run", "r", {"n": 2}), Version("run", "r", {"n": 3}), Version("run", "s", {"n": 1}),
                              Version("run", "s", None), Version("run", "s", {"n": 4}), Version("run", "t", {"n": 1}),
                              Version("run", "t", None)])
    many = [Version("run", f"k{i}", {"i": i}) for i in range(1200)]  # more keys than one read of current rows takes
    store.record([moment()], many + [Version("run", "k5", {"i": -5})])
    assert store.get("run", "k5", 3) == {"i": -5} and store.count("run", 3) == 1202
    assert store.get("run", "k5", 2) is None and "t" not in store.every("run", 2)
    assert {k: v for k, v in store.every("run", 2).items()} == {"r": {"n": 3}, "s": {"n": 4}}
    assert store.count("run", 2) == 2 and store.count("run", 1) == 1
    assert store.every("run", 1) == {"r": {"n": 1}}


def test_streams_and_times(tmp_path: Path) -> None:
    store = TimeStore(tmp_path / "h.db")
    store.record([moment("run.event", "r", "r", 1, at=10.0), moment("run.event", "r", "r", 2, at=20.0),
                  moment("other", at=30.0), moment("run.event", "r", "r", 3, at=40.0)], [])
    assert [store.seq_at("r", m) for m in (1, 2, 3, 4)] == [1, 2, 2, 3]
    assert store.at_or_before(25.0) == 2 and store.at_or_before(5.0) == 0 and store.at_or_before(99.0) == 4
    assert store.between(1, 4) == 3 and store.first() == 1 and store.last() == 4


def test_a_batch_that_fails_half_way_leaves_nothing(tmp_path: Path) -> None:
    store = TimeStore(tmp_path / "h.db")
    store.record([moment()], [Version("grant", "ada", {"state": "active"})])
    with pytest.raises(TypeError):  # the second version cannot be written as JSON
        store.record([moment(), moment()], [Version("grant", "ada", {"state": "revoked"}),
                                            Version("grant", "bo", {"when": object()})])
    assert store.last() == 1
    assert store.every("grant") == {"ada": {"state": "active"}}
    store.record([moment()], [Version("grant", "ada", {"state": "revoked"})])  # the store goes on
    assert store.every("grant", 2) == {"ada": {"state": "revoked"}}


def test_a_file_that_is_not_a_history_is_refused_in_words(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match="junk.db"):
        TimeStore(junk)
    other = tmp_path / "other.db"
    TimeStore(other).close()
    with sqlite3.connect(other) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(HistoryError, match="layout '99'"):
        TimeStore(other)


async def test_the_workspace_sets_an_unreadable_history_aside_and_keeps_a_new_one(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    settings = Settings(path=folder, clock=FakeClock(1_800_000_000.0))
    ws = await Workspace.open(settings=settings)
    await ws.close()
    (folder / "history.db").write_bytes(b"garbage" * 1000)
    for extra in ("history.db-wal", "history.db-shm"):
        (folder / extra).unlink(missing_ok=True)
    ws = await Workspace.open(settings=settings)
    try:
        assert ws.timeline is not None
        await ws.timeline.settled()
        aside = sorted(folder.glob("history.db.unreadable-*"))
        assert len(aside) == 1 and aside[0].read_bytes() == b"garbage" * 1000  # nothing of it is lost
        assert frame_at(ws.timeline.store)["run"]  # the new history holds where things stand
        assert ws.timeline.notice is not None and "set aside" in ws.timeline.notice
    finally:
        await ws.close()


async def test_what_changed_while_no_window_kept_the_history_is_read_at_the_next_open(tmp_path: Path) -> None:
    """A clean close keeps the canvas's fingerprint: the next open reads the canvas again only when it
    changed meanwhile (a document written, an entry read, an object deleted by another process)."""
    from services.canvas import Canvas
    from tests.services.timeline.test_history_property import quiet

    folder = tmp_path / "ws"
    settings = Settings(path=folder, clock=FakeClock(1_800_000_000.0))

    async def reopened() -> None:
        ws = await Workspace.open(settings=settings)
        try:
            assert ws.timeline is not None
            live = await quiet(ws)
            got = frame_at(ws.timeline.store)
            for kind in live:
                assert got[kind] == live[kind], (kind, {k: (got[kind].get(k), live[kind].get(k)) for k in set(got[kind]) | set(live[kind]) if got[kind].get(k) != live[kind].get(k)})
        finally:
            await ws.close()

    await reopened()
    await reopened()  # nothing changed: the canvas is not read again, and the history still agrees
    canvas = await Canvas.open(folder / "canvas.db")
    try:
        await canvas.write("notes/written-while-closed.md", preview="p", body="b", owner="user:ada")
        owner = (await canvas.inbox_owners())[0]
        await canvas.mark_read(owner)
        doomed = (await canvas.list_objects(type="document", limit=1)).items[0]
        await canvas.delete(doomed.id)
    finally:
        await canvas.close()
    await reopened()


async def test_a_stream_read_again_is_no_change(tmp_path: Path) -> None:
    """Events a window sees twice (its stream read again after a reconnect) are recorded once: a run's
    recorded seqs only grow, and its stream as of any moment is read in one step of an index."""
    from services.changes import Change, RunEvents

    ws = await Workspace.open(settings=Settings(path=tmp_path / "ws", clock=FakeClock(1_800_000_000.0)))
    try:
        assert ws.timeline is not None
        await ws.timeline.settled()
        store = ws.timeline.store
        run_id = "run_seen_twice"
        before = store.last()
        ws.feed.publish_many(RunEvents("cloud", run_id, [{"seq": n, "type": "x"} for n in (1, 2, 3)], {}))
        ws.feed.publish_many(RunEvents("cloud", run_id, [{"seq": n, "type": "x"} for n in (2, 3, 4)], {}))
        ws.feed.publish(Change("cloud", "run.event", run_id, {"event": {"seq": 4, "type": "x"}}))
        ws.feed.publish(Change("cloud", "run.event", run_id, {"event": {"seq": 5, "type": "x"}}))
        await ws.timeline.settled()
        seqs = [m.seq for m in store.moments(before, 100) if m.run_id == run_id and m.kind == "run.event"]
        assert seqs == [1, 2, 3, 4, 5]
        assert [store.seq_at(run_id, m) for m in range(before, store.last() + 1)][-1] == 5
    finally:
        await ws.close()
