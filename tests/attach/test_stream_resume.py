"""The change stream resumes with ``Last-Event-ID``: a window whose stream dropped gets exactly the
changes it missed, and one that missed more than the server keeps reads everything again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.attached.client import RemoteCloud
from services.workspace import Settings, Workspace


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


async def until(condition: Callable[[], bool], rounds: int = 500) -> bool:
    """Let the loop run until ``condition`` holds (bounded in rounds, never asserted on time)."""
    for _ in range(rounds):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def texts(window: Any, run_id: str) -> list[str]:
    return [e.get("text", "") for e in window.desk.detail(run_id).events]


async def following(served: Any, window: Any) -> None:
    """Make one change and wait until the window has read it (so it holds a last event id)."""
    served.feed.announce("canvas", "object.updated", "obj_warmup")
    assert await until(lambda: window.desk.last_event_id is not None)


async def test_a_dropped_stream_resumes_with_nothing_missed_and_nothing_applied_twice(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "resume me")
    window = await Workspace.open(served.path)
    seen: list[Any] = []
    unsubscribe = window.feed.subscribe(seen.append)
    try:
        await following(served, window)
        await window.desk.drop_stream()
        # meanwhile, with no stream open: events on a run, a grant change, a canvas change
        await served.desk.reply(run_id, "while you were away")
        await served.desk.revoke("user:grace", "grant_removed")
        served.feed.announce("canvas", "object.updated", "obj_meanwhile")
        server_seqs = [e["seq"] for e in served.cloud.runs.get(run_id).events]
        assert await until(lambda: [e["seq"] for e in window.desk.detail(run_id).events] == server_seqs)
        assert await until(lambda: any(c.id == "obj_meanwhile" for c in seen))
        assert "while you were away" in texts(window, run_id)
        assert {g.user_id: g.state for g in window.desk.grants()}["user:grace"] == "revoked"
        canvas = [c for c in seen if c.source == "canvas" and c.id == "obj_meanwhile"]
        assert len(canvas) == 1  # replayed once, never twice
        run_events = [c.data["event"]["seq"] for c in seen if c.kind == "run.event" and c.id == run_id]
        assert sorted(run_events) == sorted(set(run_events))
        assert not any(c.kind == "attach.reloaded" for c in seen)  # resumed, not read again in full
        assert list(window.desk.errors) == []
    finally:
        unsubscribe()
        await window.close()


async def test_a_resume_from_an_id_older_than_the_log_reloads_everything(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "reload me")
    served.server.control.change_log.size = 3
    window = await Workspace.open(served.path)
    seen: list[Any] = []
    unsubscribe = window.feed.subscribe(seen.append)
    try:
        await following(served, window)
        await window.desk.drop_stream()
        had = {e["seq"] for e in window.desk.detail(run_id).events}
        await served.desk.reply(run_id, "more than the log keeps")  # several events: older ones are forgotten
        await served.desk.revoke("user:ada", "grant_removed")
        assert await until(lambda: any(c.kind == "attach.reloaded" and c.source == "canvas" for c in seen))
        missed = {e["seq"] for e in served.cloud.runs.get(run_id).events} - had
        published = [c.data["event"]["seq"] for c in seen if c.kind == "run.event" and c.id == run_id]
        assert sorted(published) == sorted(missed)  # each missed event published once, for panes and follower
        assert "more than the log keeps" in texts(window, run_id)
        assert [e["seq"] for e in window.desk.detail(run_id).events] == [
            e["seq"] for e in served.cloud.runs.get(run_id).events]
        assert {g.user_id: g.state for g in window.desk.grants()}["user:ada"] == "revoked"
        served.feed.announce("canvas", "object.updated", "obj_after")  # and it follows live again
        assert await until(lambda: any(c.id == "obj_after" for c in seen))
    finally:
        unsubscribe()
        await window.close()


async def test_an_id_from_another_server_process_is_answered_with_reset(served: Any) -> None:
    remote = RemoteCloud(served.server.url, served.server.token)
    try:
        batches = remote.change_batches("0badc0de-7")
        opened = await anext(batches)
        assert opened.subscribed
        first = await anext(batches)
        assert first.reset and first.changes == []
        assert first.last_id == served.server.control.change_log.last_id
        await batches.aclose()
    finally:
        await remote.aclose()


async def test_a_cloud_reset_or_replaced_state_makes_every_attached_window_read_everything_again(served: Any) -> None:
    window = await Workspace.open(served.path)
    seen: list[Any] = []
    unsubscribe = window.feed.subscribe(seen.append)
    try:
        assert window.desk.runs()
        state = await window.remote.export_state()
        await window.remote.reset()  # runs cleared on the server
        assert await until(lambda: window.desk.runs() == [])
        assert any(c.kind == "attach.reloaded" for c in seen)
        await window.remote.import_state(state)  # and put back
        assert await until(lambda: {r.id for r in window.desk.runs()} == {r.id for r in served.desk.runs()})
        assert list(window.desk.errors) == []
    finally:
        unsubscribe()
        await window.close()
