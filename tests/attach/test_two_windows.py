"""Two windows on one served workspace: each attaches to the server, acts through its control API
and sees the other's actions through its change stream; the server's own state agrees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from screens.widgets.stream import EventStream
from services.desk import OperatorError
from services.workspace import Settings, Workspace
from tests.ui.conftest import ready, settle, type_text
from workbench.app import make_app


async def until(pilot: Any, condition: Callable[[], bool], rounds: int = 300) -> bool:
    """Let the windows run until ``condition`` holds (bounded in rounds, never asserted on time)."""
    for _ in range(rounds):
        if condition():
            return True
        await pilot.pause(0.02)
    return condition()


def stream_text(app: Any) -> str:
    stream = app.main.query_one("#runs-stream", EventStream)
    stream.flush()
    return "\n".join(stream.shown)


async def select(pilot: Any, pane_id: str, key: str, number: str) -> Any:
    await pilot.press(number)
    pane = pilot.app.main.pane(pane_id)
    pane.select_key(key)
    pane.focus_main()
    await settle(pilot)
    assert pane.selected == key
    return pane


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


async def test_a_reply_and_a_revoke_in_one_window_show_in_the_other_and_on_the_server(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "what is on the list?")
    first, second = make_app(Settings(path=served.path)), make_app(Settings(path=served.path))
    async with first.run_test(size=(120, 40)) as one, second.run_test(size=(120, 40)) as two:
        a, b = await ready(one), await ready(two)
        for window in (a, b):  # no second cloud: both windows are on the served one
            assert window.cloud is None and window.attached.url == served.server.url
            assert window.header_status.startswith(f"attached to {served.server.url}")
        assert "attached to" in first.main.query_one("#badges").status
        header = first.main.query_one("#badges").render().plain
        # where the cloud is comes first; memory on the same server is named by its path on it
        assert header.index("attached to") < header.index("memory → /honcho")

        await select(one, "runs", run_id, "3")
        await select(two, "runs", run_id, "3")
        await one.press("r")
        await settle(one)
        await type_text(one, "Three things today")
        await one.press("ctrl+s")
        await settle(one)
        assert first.errors == []
        server_run = served.cloud.runs.get(run_id)
        assert any(e.get("text") == "Three things today" for e in server_run.events)  # the server agrees
        assert await until(two, lambda: "Three things today" in stream_text(second)), stream_text(second)
        assert b.desk.detail(run_id).status == server_run.status == "idle"

        await select(two, "grants", "user:ada", "4")
        await two.press("k")
        await settle(two)
        await two.press("ctrl+s")
        await settle(two)
        assert second.errors == []
        assert served.cloud.user("user:ada").grant.state["state"] == "revoked"
        grants = first.main.pane("grants")
        assert await until(one, lambda: grants._views["user:ada"].state == "revoked")
        assert {g.user_id: g.state for g in a.desk.grants()} == {g.user_id: g.state for g in b.desk.grants()}


async def test_a_settle_the_other_window_already_made_is_refused_and_the_first_outcome_kept(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "settle me")
    a = await Workspace.open(served.path)
    b = await Workspace.open(served.path)
    try:
        await a.desk.settle(run_id, "result", "done")
        assert served.cloud.runs.get(run_id).settled
        with pytest.raises(OperatorError) as refused:  # b's view may not have caught up: the server refuses
            await b.desk.settle(run_id, "declined", "no")
        assert "settled" in str(refused.value)
        assert served.cloud.runs.get(run_id).outcome["outcome"] == "result"
        assert served.cloud.runs.get(run_id).result == "done"
    finally:
        await a.close()
        await b.close()


async def test_an_insight_approved_in_one_window_is_redrawn_in_the_other_and_the_serving_one(served: Any) -> None:
    acting = await Workspace.open(served.path)
    seen: list[Any] = []
    unsubscribe = served.feed.subscribe(lambda c: seen.append(c) if c.source == "insights" else None)
    watcher = make_app(Settings(path=served.path))
    try:
        async with watcher.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await pilot.press("5")
            await settle(pilot)
            pane = watcher.main.pane("judgments")
            review = (await acting.insights.list("pending"))[0]
            assert f"insight:{review.id}" in pane.items
            before = pane.waiting
            await acting.insights.approve(review.id)
            assert await until(pilot, lambda: pane.waiting == before - 1), (before, pane.waiting)
            assert pane.items[f"insight:{review.id}"].status == "approved"
            assert any(c.kind == "review.approved" and c.id == review.id for c in seen)  # the serving window too
            assert (await served.insights.get(review.id)).status == "approved"
            assert list(acting.desk.errors) == []
    finally:
        unsubscribe()
        await acting.close()
