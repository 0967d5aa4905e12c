"""The time cursor's promise: moved to any moment, every pane reads what it read then.

A workspace is driven through random actions (operator and app actions on runs, grant changes,
canvas writes, moves, deletions, messages and reads, judgments) with a seeded random source; at
random moments every pane's read models are read from the live services (``read_frame``) and kept
with the history's newest moment. Afterwards the cursor goes to each kept moment (in a shuffled
order, stepping and jumping) and must read exactly those read models back, on both canvas engines
and in a window attached to a served workspace.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.desk import OperatorError
from services.timeline import KINDS, TimeCursor, frame_at, read_frame
from services.workspace import Settings, Workspace
from tests.services.canvas.conftest import pg_schema_url  # noqa: F401  (a fixture)
from tests.services.canvas.conftest import pg_server  # noqa: F401

SEEDS = (1, 2, 3)
STEPS = 40


async def frame_of(ws: Workspace) -> dict[str, Any]:
    return await read_frame(ws.desk, ws.canvas, ws.okf, ws.insights, ws.outbox)


async def quiet(ws: Workspace) -> dict[str, Any]:
    """Let every change reach the read models, the follower, the stores and the history, until two
    reads in a row agree and nothing new reached the history between them; answer that frame."""
    assert ws.timeline is not None
    before = None
    for _ in range(100):
        await ws.desk.caught_up()
        if ws.follower is not None:
            await ws.follower.idle()
        await ws.timeline.settled()
        last = ws.timeline.store.last()
        frame = await frame_of(ws)
        await asyncio.sleep(0.02)
        await ws.timeline.settled()
        if before == (last, frame) and ws.timeline.store.last() == last:
            return frame
        before = (ws.timeline.store.last(), frame)
    raise AssertionError("the workspace did not come to rest")


async def act(ws: Workspace, rng: random.Random, step: int) -> bool:
    """One random action; one the services refuse (a settled run replied to) is part of the game."""
    desk, canvas = ws.desk, ws.canvas
    assert canvas is not None
    runs = [v for v in desk.runs() if not v.deleted]
    live = [v for v in runs if v.status != "settled"]
    people = [g.user_id for g in desk.grants() if not g.user_id.startswith("user:operator")]
    choice = rng.randrange(12)
    try:
        if choice == 0 or not live:
            await desk.start_run(rng.choice(people), f"question {step}")
        elif choice == 1:
            await desk.reply(rng.choice(live).id, f"answer {step}", chunks=rng.randint(1, 4))
        elif choice == 2:
            await desk.send_message(rng.choice(live).id, f"more {step}")
        elif choice == 3:
            await desk.settle(rng.choice(live).id, "result", f"done {step}")
        elif choice == 4:
            await desk.fail_turn(rng.choice(live).id, "model_error", f"broke {step}")
        elif choice == 5:
            person = rng.choice(people)
            grant = next(g for g in desk.grants() if g.user_id == person)
            await (desk.restore(person) if grant.state != "active" else desk.revoke(person, "grant_revoked"))
        elif choice == 6:
            await canvas.write(f"notes/n{rng.randrange(6)}.md", preview=f"p {step}", owner=rng.choice(people),
                               body=f"see [[notes/n{rng.randrange(6)}.md]]")
        elif choice == 7:
            nodes = (await canvas.list_objects(type="node", limit=20)).items
            await canvas.message_send(f"hello {step}", to=rng.choice(nodes).id)
        elif choice == 8:
            owners = await canvas.inbox_owners()
            if owners:
                await canvas.mark_read(rng.choice(owners))
        elif choice == 9:
            docs = (await canvas.list_objects(type="document", name_filter="notes/", limit=20)).items
            if docs:
                await canvas.delete(rng.choice(docs).id)
        elif choice == 10:
            await canvas.spawn_node(name=f"helper {step}", kind="general")
        else:
            pending = [k for k, v in (await frame_of(ws))["judgment"].items() if v.get("state") == "pending"
                       and k.startswith("okf:")]
            if pending and ws.okf is not None:
                await ws.okf.approve(pending[0].split(":", 1)[1])
            else:
                await desk.go_idle(rng.choice(live).id) if live else None
    except Exception as exc:  # a refusal is an outcome like any other
        if not isinstance(exc, (OperatorError, ValueError, LookupError)) and "Error" not in type(exc).__name__:
            raise
        return False
    return True


async def play(ws: Workspace, seed: int) -> None:
    rng = random.Random(seed)
    assert ws.timeline is not None
    frame = await quiet(ws)
    kept: list[tuple[int, dict[str, Any]]] = [(ws.timeline.store.last(), frame)]
    done = 0
    for step in range(STEPS):
        done += await act(ws, rng, step)
        if rng.random() < 0.35:
            frame = await quiet(ws)
            kept.append((ws.timeline.store.last(), frame))
    frame = await quiet(ws)
    kept.append((ws.timeline.store.last(), frame))
    assert ws.timeline.errors == []
    assert len({m for m, _ in kept}) > 3, "the actions made too few moments to check"
    assert done > STEPS // 2, f"only {done} of {STEPS} actions were taken"
    assert any(k.startswith("doc_") and v["name"].startswith("notes/") for m, f in kept for k, v in f["object"].items())

    store = ws.timeline.store
    cursor = TimeCursor(store)
    rng.shuffle(kept)
    for moment, frame in kept:
        got = frame_at(store, moment)
        for kind in KINDS:
            assert got[kind] == frame[kind], (kind, moment, {k: (got[kind].get(k), frame[kind].get(k)) for k in set(got[kind]) | set(frame[kind]) if got[kind].get(k) != frame[kind].get(k)})
        await cursor.step(moment - cursor.moment)  # the cursor's own reads, reached by stepping
        assert cursor.moment == moment
        for kind in KINDS:
            assert await cursor.every(kind) == frame[kind], f"{kind} as of {moment}"
            assert await cursor.count(kind) == len(frame[kind]), f"{kind} counted as of {moment}"
        for run_id, run in frame["run"].items():
            assert await cursor.seq(run_id) == run["seq"]
    # a jump to a moment's own time lands on the last moment of that time, never past the newest
    newest = max(m for m, _ in kept)
    await cursor.jump(float("inf"))
    assert cursor.moment == store.last() >= newest


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_every_kept_moment_reads_back_exactly(engine: str, seed: int, tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_schema_url") if engine == "postgresql" else None
    ws = await Workspace.open(settings=Settings(path=tmp_path / "ws", canvas_url=url,
                                                clock=FakeClock(1_800_000_000.0)))
    try:
        await play(ws, seed)
    finally:
        await ws.close()


@pytest.mark.parametrize("seed", SEEDS[:2])
async def test_an_attached_window_reads_back_exactly(seed: int, tmp_path: Path) -> None:
    served = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    try:
        window = await Workspace.open(settings=Settings(path=served.path))
        try:
            assert window.attached is not None and window.timeline is not None
            await play(window, seed)
        finally:
            await window.close()
    finally:
        await served.close()


@pytest.mark.parametrize("attached", [False, True], ids=["embedded", "attached"])
async def test_a_baseline_over_more_runs_than_a_page_holds_every_run(attached: bool, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A window's history starts from every run as it is, read a page of runs at a time (``PAGE``):
    with pages of one or two, the moment a window's history opened shows each run, deleted ones too,
    as the desk reads it."""
    import services.timeline.frames as frames

    monkeypatch.setattr(frames, "PAGE", 2 if attached else 1)
    first = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0 if attached else None))
    try:
        if attached:  # a served cloud keeps its runs: one more than two pages, one of them deleted
            for number in range(3):
                await first.desk.start_run("user:ada", f"one more {number}")
            await first.desk.delete_run(first.desk.run_ids()[-1])
        window = await Workspace.open(settings=Settings(path=tmp_path / "ws")) if attached else first
        try:
            assert window.timeline is not None and (window.attached is not None) == attached
            frame = await quiet(window)
            store = window.timeline.store
            opened = max(m.id for m in store.moments(0, 100_000) if m.kind == "history.opened")
            ids = window.desk.run_ids()
            assert len(ids) > 2 * frames.PAGE
            assert any(v.deleted for v in window.desk.runs(include_deleted=True)) == attached
            assert set(frame_at(store, opened)["run"]) == set(ids)
            assert frame_at(store, opened)["run"] == frame["run"]
            assert window.timeline.errors == []
        finally:
            if attached:
                await window.close()
    finally:
        await first.close()
