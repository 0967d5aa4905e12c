"""A window attached to a served workspace holds what it shows, not every event the workspace ever
held: it reads the runs without their events, keeps each run's newest events in a bounded mirror, and
reads the rest from the server when a reader needs it (a whole run for a fork, turns, a diff) or the
operator scrolls to it. What every reader answers is the same as in the window that owns the cloud."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import pytest

from screens.widgets.stream import EventStream
from services.desk import FED_BUDGET, FED_TAIL, seq_of
from services.desk.mirror import SOURCE_TAIL
from services.workspace import Settings, Workspace
from tests.attach.test_two_windows import until
from tests.ui.conftest import ready, settle, show_run
from workbench.app import make_app


@pytest.fixture
async def served(tmp_path: Any) -> Any:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


async def long_run(served: Workspace, deltas: int, *, turns: int = 2) -> str:
    """A run of ``turns`` turns whose first turn streams ``deltas`` text deltas (made in the serving window)."""
    run_id = await served.desk.start_run("user:ada", "a long one")
    assert served.cloud is not None
    fake = served.cloud.runs.get(run_id)
    for turn in range(1, turns + 1):
        count = deltas if turn == 1 else 3
        fake.emit_many([
            ("node.turn.started", {"input": {"text": f"question {turn}", "message_ids": []}}),
            *(("node.output_text.delta", {"delta": f"t{turn}d{n} "}) for n in range(count)),
            ("node.output_text.done", {"text": f"answer {turn}"}),
            ("node.turn.completed", {"stop_reason": "end_turn", "error": None}),
        ])
    return run_id


def held_events(ws: Workspace) -> int:
    """How many events the window's mirror holds in all."""
    return sum(len(ws.desk.mirror.events(run_id)) for run_id in ws.desk.run_ids()
               if ws.desk.mirror.held_from(run_id) is not None)


async def test_attaching_reads_no_whole_log_and_every_whole_run_reader_gets_the_whole_run(served: Any) -> None:
    run_id = await long_run(served, 12_000)
    owner = served.desk
    ws = await Workspace.open(served.path)
    try:
        assert ws.attached is not None
        desk = ws.desk
        held = desk.mirror.events(run_id)
        assert 0 < len(held) <= FED_TAIL and desk.holds(run_id, 2_000) and not desk.holds(run_id)
        assert held_events(ws) <= FED_BUDGET
        expected = [(e["seq"], e["type"]) for e in owner.detail(run_id).events]
        whole = await desk.read_events(run_id)
        assert [(e["seq"], e["type"]) for e in whole] == expected
        assert all(isinstance(e["at"], float) for e in whole)
        middle = await desk.read_events(run_id, 100, 200)
        assert [seq_of(e) for e in middle] == list(range(101, 201))
        detail = await desk.read_detail(run_id)
        assert len(detail.events) == len(expected) and detail.seq == owner.detail(run_id).seq
        assert [(t.number, t.text) for t in await desk.read_turns(run_id)] == [
            (t.number, t.text) for t in owner.turns(run_id)] == [(1, "question 1"), (2, "question 2")]
        child = await desk.fork_at(run_id, 1)  # turn 1 started long before the events the mirror holds
        assert ws.attached is not None
        history = served.desk.detail(child, events=False).params["history"]
        assert [m["text"] for m in history] == ["question 1"]
        assert held_events(ws) <= FED_BUDGET  # a whole read is answered, not kept
        with pytest.raises(Exception, match="no run"):
            await desk.read_events("run_missing")
    finally:
        await ws.close()


def stream_of(app: Any) -> EventStream:
    return app.main.query_one("#runs-stream", EventStream)


def held_size(ws: Workspace, stream: EventStream) -> int:
    """Bytes of what the window holds of the runs' events: the mirror's read models and the stream's
    lines and rows (the objects themselves, shallowly: their keys and values are counted once each)."""
    size = 0
    for run_id in ws.desk.run_ids():
        if ws.desk.mirror.held_from(run_id) is None:
            continue
        for event in ws.desk.mirror.events(run_id):
            size += sys.getsizeof(event) + sum(sys.getsizeof(v) for v in event.values())
    size += sum(sys.getsizeof(line) for line in stream.shown) + sum(sys.getsizeof(row) for row in stream.lines)
    return size


async def test_a_reader_that_needs_no_deltas_reads_none_in_the_serving_and_the_attached_window(served: Any) -> None:
    run_id = await long_run(served, 25_000)  # more than the serving window holds converted (SOURCE_TAIL)
    owner = served.desk
    quiet = frozenset({"node.output_text.delta"})
    everything = [(seq_of(e), e["type"]) for e in await owner.read_events(run_id)]
    expected = [(seq, kind) for seq, kind in everything if kind not in quiet]
    assert len(everything) > SOURCE_TAIL and 6 <= len(expected) < 20
    assert owner.mirror._runs[run_id].lo > 0  # the oldest events are read from the store, not held
    ws = await Workspace.open(served.path)
    try:
        assert ws.attached is not None
        for desk in (owner, ws.desk):
            whole = await desk.read_events(run_id, exclude=quiet)
            assert [(seq_of(e), e["type"]) for e in whole] == expected
            assert all(isinstance(e["at"], float) for e in whole)
            upto = expected[-2][0]
            part = await desk.read_events(run_id, 10, upto, exclude=quiet)
            assert [(seq_of(e), e["type"]) for e in part] == [(s, k) for s, k in expected if 10 < s <= upto]
            newest = await desk.read_events(run_id, everything[-40][0], exclude=quiet)  # from the held part alone
            assert [(seq_of(e), e["type"]) for e in newest] == [(s, k) for s, k in expected if s > everything[-40][0]]
    finally:
        await ws.close()


async def test_many_runs_are_read_a_few_requests_at_a_time_and_each_as_read_alone(served: Any) -> None:
    long_id = await long_run(served, 12_000)  # more than a page, and more than the mirror holds of it
    short = [await long_run(served, 5) for _ in range(6)]
    owner = served.desk
    quiet = frozenset({"node.output_text.delta"})
    ws = await Workspace.open(served.path)
    try:
        assert ws.attached is not None
        desk = ws.desk
        assert desk.mirror.held_from(long_id) not in (None, 0)  # its newest events held, the rest not
        desk.mirror.forget(short[0])  # one short run not held at all
        calls: list[tuple[str, str]] = []
        call = desk.control.call

        async def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((method, path))
            return await call(method, path, *args, **kwargs)

        desk.control.call = counted  # type: ignore[method-assign]
        wanted = {long_id: 0, **{run_id: 2 * n for n, run_id in enumerate(short)}, "run_missing": 0}
        for exclude in (frozenset(), quiet):
            calls.clear()
            found = await desk.read_events_many(wanted, exclude=exclude)
            assert set(found) == set(wanted) - {"run_missing"}  # an unknown run is left out
            for run_id, after in wanted.items():
                if run_id in found:
                    alone = await owner.read_events(run_id, after, exclude=exclude)
                    assert [(seq_of(e), e["type"]) for e in found[run_id]] == [(seq_of(e), e["type"]) for e in alone]
                    assert all(isinstance(e["at"], float) for e in found[run_id])
            reads = [path for method, path in calls if method == "POST"]
            assert set(reads) == {"/runs/events"} and calls == [("POST", "/runs/events")] * len(reads)
            assert len(reads) == (3 if not exclude else 1)  # 12,000 events 5,000 a request; a few without deltas
    finally:
        await ws.close()


def _same_model(mine: Any, theirs: Any) -> None:
    """Two read models alike, their times within the millisecond the wire carries them to."""
    a, b = asdict(mine), asdict(theirs)
    for key in ("created_at", "updated_at"):
        assert abs(a.pop(key) - b.pop(key)) < 0.002, key
    assert a == b


async def test_the_book_holds_no_run_s_sent_messages_and_every_read_model_is_the_same(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "a chatty one")
    assert served.cloud is not None
    fake = served.cloud.runs.get(run_id)
    for n in range(20):
        await served.desk.send_message(run_id, f"message {n} " + "words " * 50, start_turn=False)
        fake.reply(f"answer {n}", chunks=1)
    assert len(fake.messages) == 20  # every one kept by the run, with its text
    ws = await Workspace.open(served.path)
    try:
        assert ws.attached is not None
        desk = ws.desk
        dto = desk.book.run_dto(run_id)
        assert dto is not None and "messages" not in dto  # the history of what it was sent: not held
        assert all("messages" not in d for d in desk.book.run_dtos())
        _same_model(desk.view(run_id), served.desk.view(run_id))
        _same_model(desk.detail(run_id, events=False), served.desk.detail(run_id, events=False))
        assert [(t.number, t.text) for t in await desk.read_turns(run_id)] == [
            (t.number, t.text) for t in served.desk.turns(run_id)]
        await desk.reply(run_id, "one more")  # an action's answer is kept the same way
        dto = desk.book.run_dto(run_id)
        assert dto is not None and "messages" not in dto
    finally:
        await ws.close()


async def test_scrolling_a_100k_event_run_from_end_to_start_and_back_keeps_the_window_bounded(served: Any) -> None:
    run_id = await long_run(served, 100_000)
    total = served.desk.detail(run_id, events=False).seq
    app = make_app(Settings(path=served.path))
    async with app.run_test(size=(120, 40)) as pilot:
        ws = await ready(pilot)
        assert ws.attached is not None
        pane = await show_run(pilot, run_id)
        await pilot.press("v")  # raw events: a line for every event
        await settle(pilot)
        stream = stream_of(app)
        assert await until(pilot, lambda: bool(stream.shown) and pane._above > 0)
        assert seq_of_line(stream.shown[-1]) == total  # the newest event is drawn first
        assert "earlier events above" in str(app.main.query_one("#stream-state").render())
        whole_size = None
        peak_lines = peak_held = peak_size = 0
        for _ in range(200):  # from the end to the start, a page at a time
            stream.scroll_home(animate=False, immediate=True)
            await settle(pilot)
            peak_lines = max(peak_lines, len(stream.shown))
            peak_held = max(peak_held, held_events(ws))
            peak_size = max(peak_size, held_size(ws, stream))
            if pane._above <= pane._floor:
                break
            stream.scroll_to(y=5, animate=False, immediate=True, force=True)  # off the top: the next home is a scroll
            await pilot.pause()
        assert pane._above <= pane._floor, pane._above
        assert seq_of_line(stream.shown[0]) == 1  # the run's first event, read from the server
        assert "later events below" in str(app.main.query_one("#stream-state").render())
        assert peak_lines <= 14_000 and peak_held <= FED_BUDGET
        # what the whole run would cost held as read models and lines, against what the window held
        whole = await ws.desk.read_events(run_id)
        whole_size = sum(sys.getsizeof(e) + sum(sys.getsizeof(v) for v in e.values()) for e in whole) * 2
        del whole
        assert peak_size < whole_size / 3, (peak_size, whole_size)

        for _ in range(200):  # and back to the end: following again
            stream.scroll_end(animate=False, immediate=True)
            await settle(pilot)
            peak_lines = max(peak_lines, len(stream.shown))
            if pane._below is None:
                break
            stream.scroll_to(y=max(0, stream.max_scroll_y - 5), animate=False, immediate=True, force=True)
            await pilot.pause()
        assert pane._below is None and seq_of_line(stream.shown[-1]) == total
        assert peak_lines <= 14_000
        assert served.cloud is not None
        served.cloud.runs.get(run_id).emit("node.activity", {"text": "still here"})
        served.cloud.runs.get(run_id).emit("node.output_text.done", {"text": "one more"})
        assert await until(pilot, lambda: seq_of_line(stream_of(app).shown[-1]) == total + 2)  # followed live
        assert app.errors == []


def seq_of_line(line: str) -> int:
    """The event's sequence number a raw line starts with."""
    return int(line.split()[0])


async def test_many_runs_read_say_which_runs_text_needs_no_scan(served: Any) -> None:
    """``read_events_many(clean=)`` names the runs whose events all came in answers with no escape of
    a NUL or a surrogate (storable as they are, not scanned again): a run with an emoji (an escaped
    pair on the wire) and one whose newest events came from the mirror are not named."""
    plain = [await long_run(served, 5) for _ in range(2)]
    assert served.cloud is not None
    emoji = await long_run(served, 5)
    served.cloud.runs.get(emoji).emit("node.output_text.done", {"text": "done \U0001f600"})
    held = await long_run(served, 5)
    ws = await Workspace.open(served.path)
    try:
        assert ws.attached is not None
        desk = ws.desk
        for run_id in (*plain, emoji):
            desk.mirror.forget(run_id)  # read from the server alone
        desk.mirror.forget(held)
        await desk.hold_tail(held, 4)  # its newest events from the mirror, the older ones from the server
        assert desk.mirror.held_from(held) not in (None, 0)
        clean: set[str] = set()
        found = await desk.read_events_many({run_id: 0 for run_id in plain}, clean=clean)
        assert set(found) == clean == set(plain)
        wanted = {run_id: 0 for run_id in (*plain, held)}
        clean = set()
        found = await desk.read_events_many(wanted, clean=clean)
        assert set(found) == set(wanted) and clean == set(plain)  # the held run's newest part: the mirror's
        wanted = {run_id: 0 for run_id in (*plain, emoji)}
        clean = set()
        found = await desk.read_events_many(wanted, clean=clean)
        assert set(found) == set(wanted) and clean == set()  # one answer, an escaped pair in it: all scanned
        texts = [e.get("text") for e in found[emoji] if e["type"] == "node.output_text.done"]
        assert "done \U0001f600" in texts  # read whole, only not vouched for
    finally:
        await ws.close()
