"""A fed run mirror (a window attached to a server) is a bounded cache, never a copy of every log:
each run keeps its newest ``tail`` events, at most ``keep`` runs and ``budget`` events are held, and
it says exactly how far back each run is held (``held_from``, ``covers``)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event as sa_event

from services.desk import RunMirror, seq_of
from tests.served.test_run_events_page import _stored_cloud


def _events(first: int, last: int) -> list[dict[str, object]]:
    return [{"seq": n, "type": "node.output_text.delta", "at": "2026-12-05T01:00:00Z"} for n in range(first, last + 1)]


def test_a_whole_log_longer_than_the_tail_keeps_its_newest_events_and_says_from_where() -> None:
    mirror = RunMirror(tail=100, keep=8, budget=1_000)
    mirror.hold("run_a", _events(1, 250))
    assert [seq_of(e) for e in mirror.events("run_a")] == list(range(151, 251))
    assert mirror.held_from("run_a") == 150 and mirror.last_seq("run_a") == 250
    assert mirror.covers("run_a", 150) and not mirror.covers("run_a", 149)
    assert all(isinstance(e["at"], float) for e in mirror.events("run_a"))
    mirror.hold("run_b", _events(41, 60), lo=40)  # a window read of a longer log
    assert mirror.held_from("run_b") == 40 and mirror.covers("run_b", 45) and not mirror.covers("run_b", 39)
    assert mirror.held_from("run_c") is None and not mirror.covers("run_c", 0) and mirror.events("run_c") == ()


def test_events_the_stream_carries_grow_a_run_and_cut_it_back_to_its_tail() -> None:
    mirror = RunMirror(tail=100, keep=8, budget=1_000)
    mirror.hold("run_a", _events(1, 10))
    for event in _events(11, 500):
        mirror.append("run_a", event)
    held = mirror.events("run_a")
    assert 100 <= len(held) <= 120 and seq_of(held[-1]) == 500
    assert [seq_of(e) for e in held] == list(range(mirror.held_from("run_a") + 1, 501))  # no gap
    assert mirror.since("run_a", 498) == list(held[-2:])


def test_a_run_first_met_on_the_stream_is_held_from_that_event() -> None:
    mirror = RunMirror(tail=100, keep=8, budget=1_000)
    mirror.append("run_x", _events(70, 70)[0])
    mirror.append("run_x", _events(71, 71)[0])
    assert mirror.held_from("run_x") == 69 and [seq_of(e) for e in mirror.events("run_x")] == [70, 71]
    assert not mirror.covers("run_x", 0)  # the events before 70 are the server's to answer


def test_at_most_keep_runs_and_budget_events_are_held_the_least_recently_read_going_first() -> None:
    mirror = RunMirror(tail=100, keep=3, budget=250)
    for name in ("a", "b", "c"):
        mirror.hold(f"run_{name}", _events(1, 80))
    mirror.events("run_a")  # read: the most recently used now
    mirror.hold("run_d", _events(1, 80))  # 320 events > 250, and 4 runs > 3
    held = [r for r in ("run_a", "run_b", "run_c", "run_d") if mirror.held_from(r) is not None]
    assert held == ["run_a", "run_c", "run_d"]  # the least recently read (b) went first
    total = sum(len(mirror.events(r)) for r in held)
    assert total <= 250
    for event in _events(81, 1_000):  # a run streaming on never holds more than its tail and the budget
        mirror.append("run_d", event)
    assert len(mirror.events("run_d")) <= 120 and mirror.last_seq("run_d") == 1_000
    assert sum(len(mirror.events(r)) for r in ("run_a", "run_b", "run_c", "run_d")) <= 250


def test_a_read_older_than_the_stream_keeps_what_the_stream_carried_and_its_own_start() -> None:
    mirror = RunMirror(tail=100, keep=8, budget=1_000)
    mirror.append("run_a", _events(31, 31)[0])  # the stream went ahead of the read
    mirror.hold("run_a", _events(21, 30), lo=20)
    assert mirror.held_from("run_a") == 20 and [seq_of(e) for e in mirror.events("run_a")] == list(range(21, 32))


def test_over_a_live_source_a_long_log_keeps_its_newest_events_converted_and_answers_every_read_whole() -> None:
    log = _events(1, 1_000)
    mirror = RunMirror(source=lambda run_id: log if run_id == "run_a" else [], keep=4, tail=100, budget=300)
    assert [seq_of(e) for e in mirror.since("run_a", 990)] == list(range(991, 1_001))
    assert mirror.held_from("run_a") == 0  # a live source answers every read
    whole = mirror.events("run_a")
    assert [seq_of(e) for e in whole] == list(range(1, 1_001)) and all(isinstance(e["at"], float) for e in whole)
    assert [seq_of(e) for e in mirror.since("run_a", 0)] == list(range(1, 1_001))
    assert [seq_of(e) for e in mirror.since("run_a", 450)] == list(range(451, 1_001))
    log.extend(_events(1_001, 1_500))  # the log grows: the newest are converted, the held ones cut back
    assert [seq_of(e) for e in mirror.events("run_a")] == list(range(1, 1_501))
    assert [seq_of(e) for e in mirror.since("run_a", 1_490)] == list(range(1_491, 1_501))
    held = mirror._runs["run_a"].events
    assert len(held) <= 120 and seq_of(held[-1]) == 1_500  # what stays converted is the tail, not the log
    assert mirror.events("run_a")[-1] is held[-1]  # the held read models are answered as they are


async def test_over_a_stored_log_a_whole_read_again_keeps_the_held_events_and_reads_only_the_older_part(
        tmp_path: Path) -> None:
    """A serving window's run whose older events are in ``cloud.db``: each read of them gives new
    objects, yet the mirror knows the log is the one it read (the same first and last events), so a
    second whole read converts nothing held again and reads the store for the older part alone."""
    cloud, store, run_id = await _stored_cloud(tmp_path / "cloud.db", 3_000)
    try:
        log = cloud.runs.get(run_id).events
        assert log.in_memory < 100  # the rest is stored
        mirror = RunMirror(source=lambda run: cloud.runs.get(run).events, tail=500)
        first = mirror.events(run_id)
        assert [seq_of(e) for e in first] == list(range(1, 3_001))
        statements: list[str] = []

        def seen(_conn: object, _cursor: object, sql: str, *_: object) -> None:
            statements.append(sql)

        sa_event.listen(store.engine, "before_cursor_execute", seen)
        try:
            again = mirror.events(run_id)
        finally:
            sa_event.remove(store.engine, "before_cursor_execute", seen)
        assert again == first and again[-1] is first[-1]  # the held read models, not converted again
        assert len(statements) <= 3, statements  # its first event, its last one read, and the older part
        cloud.runs.get(run_id).emit("custom.step", {"step": 1})  # the log grows: only the new event is converted
        grown = mirror.events(run_id)
        assert seq_of(grown[-1]) == 3_001 and grown[-2] is first[-1]
        cloud.runs.get(run_id).expire_events(100)  # cut at its start: read afresh
        assert seq_of(mirror.events(run_id)[0]) == 101
    finally:
        await store.close()
