"""App actions from an attached window: start, message, cancel and fork go through the server,
which makes them as the app through the SDK over the cloud's own wire; the serving window and the
server's state see them, and the cloud's refusals come back in its own words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.attached.client import ControlError
from services.desk import OperatorError
from services.workspace import Settings, Workspace
from tests.attach.test_two_windows import stream_text, until
from tests.ui.conftest import ready, settle, type_text
from workbench.app import make_app


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


async def test_start_message_and_cancel_in_an_attached_window_reach_the_server_and_the_serving_window(
    served: Any,
) -> None:
    seen: list[Any] = []
    unsubscribe = served.feed.subscribe(lambda c: seen.append(c) if c.source == "cloud" else None)
    attached = make_app(Settings(path=served.path))
    try:
        async with attached.run_test(size=(120, 40)) as pilot:
            ws = await ready(pilot)
            assert ws.cloud is None and ws.attached is not None
            pane = attached.main.pane("runs")
            await pilot.press("3")
            pane.focus_main()
            await pilot.press("n")
            await settle(pilot)
            await pilot.press("tab")
            await type_text(pilot, "Book a table")
            await pilot.press("enter")
            await settle(pilot)
            assert attached.errors == []
            on_server = [r for r in served.cloud.runs.all if r.params.get("prompt") == "Book a table"]
            assert len(on_server) == 1 and on_server[0].user_id == "user:ada"  # one run, made as the app
            run_id = on_server[0].id
            assert any(c.kind == "run.started" and c.id == run_id for c in seen)  # the serving window saw it
            assert run_id in [r.id for r in served.desk.runs()]
            assert pane.selected == run_id

            await pilot.press("m")
            await settle(pilot)
            await type_text(pilot, "for two")
            await pilot.press("enter")
            await settle(pilot)
            assert [m["text"] for m in served.cloud.runs.get(run_id).messages] == ["for two"]
            await pilot.press("x", "y")
            await settle(pilot)
            assert attached.errors == []
            assert served.cloud.runs.get(run_id).outcome["outcome"] == "canceled"
            assert await until(pilot, lambda: ws.desk.detail(run_id).settled)
            assert [(a.action, a.by) for a in ws.desk.log(run_id)] == [
                ("start", "app"), ("message", "app"), ("cancel", "app")]
            assert "app → message: for two" in stream_text(attached)  # one line: the message, the app's
            assert stream_text(attached).count("for two") == 1
            calls = [c.op for c in served.cloud.calls]
            assert {"run.start", "run.message", "run.cancel"} <= set(calls)  # through the cloud's own wire
    finally:
        unsubscribe()


async def test_a_revoked_grants_refusal_reaches_the_attached_window_in_the_clouds_words(served: Any) -> None:
    run_id = await served.desk.start_run("user:ada", "before the revoke")
    window = await Workspace.open(served.path)
    try:
        await served.desk.revoke("user:ada", "grant_removed")
        runs_before = len(served.cloud.runs.all)
        with pytest.raises(OperatorError) as refused:
            await window.desk.start_run("user:ada", "after the revoke")
        assert "grant_removed" in str(refused.value)
        assert len(served.cloud.runs.all) == runs_before  # nothing was started
        with pytest.raises(OperatorError) as again:
            await window.desk.send_message(run_id, "still there?")
        assert "grant_removed" in str(again.value)
        assert served.cloud.runs.get(run_id).messages == []
        codes = [(r.user_id, r.code) for r in window.desk.refusals]
        assert ("user:ada", "grant_removed") in codes  # the badge and the stream show it as a refusal
        assert all(a.action != "start" for log in window.desk.actions.values() for a in log)
    finally:
        await window.close()


async def test_run_state_and_idempotency_errors_come_back_in_the_clouds_words(served: Any) -> None:
    window = await Workspace.open(served.path)
    try:
        run_id = await window.desk.start_run("user:ada", "cancel me")
        await window.desk.cancel_run(run_id)
        with pytest.raises(OperatorError) as settled:
            await window.desk.send_message(run_id, "too late")
        assert "run_settled" in str(settled.value) and "canceled" in str(settled.value)
        assert served.cloud.runs.get(run_id).messages == []

        body = {"prompt": "once", "idempotency_key": "k-once"}
        first = await window.remote.call("POST", "/people/user%3Aada/runs", body)
        second = await window.remote.call("POST", "/people/user%3Aada/runs", body)  # a resent call
        assert first["run_id"] == second["run_id"]
        assert len([r for r in served.cloud.runs.all if r.params.get("prompt") == "once"]) == 1
        with pytest.raises(ControlError) as conflict:
            await window.remote.call("POST", "/people/user%3Aada/runs", {"prompt": "other", "idempotency_key": "k-once"})
        assert conflict.value.code == "idempotency_conflict"
        with pytest.raises(OperatorError) as unknown:
            await window.desk.cancel_run("run_nope")
        assert "run_nope" in str(unknown.value)
    finally:
        await window.close()


async def test_unstorable_text_in_an_app_action_is_refused_before_anything_is_sent(served: Any) -> None:
    window = await Workspace.open(served.path)
    try:
        runs_before = len(served.cloud.runs.all)
        with pytest.raises(OperatorError) as refused:
            await window.desk.start_run("user:ada", "half an emoji \ud83d")
        assert "surrogate" in str(refused.value)
        with pytest.raises(ControlError) as direct:  # the route refuses it too, whoever calls it
            await window.remote.call("POST", "/people/user%3Aada/runs", {"prompt": "nul \x00 here"})
        assert direct.value.status == 400 and "prompt" in direct.value.message
        with pytest.raises(ControlError) as nobody:
            await window.remote.call("POST", "/people/user%3Anobody/runs", {"prompt": "hi"})
        assert nobody.value.code == "person_not_found"
        assert "user:nobody" not in served.cloud.people  # no person made as a side effect
        assert len(served.cloud.runs.all) == runs_before
    finally:
        await window.close()


async def test_a_fork_from_an_attached_windows_memory_creates_the_child_run(served: Any) -> None:
    await served.follower.idle()
    window = await Workspace.open(served.path)
    try:
        child = await window.outbox.fork("run_sample_garden", 1)
        run = served.cloud.runs.get(child)
        assert run.params["forked_from"] == "run_sample_garden"
        assert run.params["history"]
        assert window.desk.detail(child).user_id == served.cloud.runs.get("run_sample_garden").user_id
        assert [(a.action, a.by) for a in window.desk.log(child)] == [("fork", "app")]
        assert await window.outbox.owner_of(child)  # the pending fork record is in the shared outbox
    finally:
        await window.close()


async def test_a_grant_restored_from_an_attached_window_lets_its_app_actions_through_again(served: Any) -> None:
    window = await Workspace.open(served.path)
    try:
        await window.desk.revoke("user:ada", "grant_removed")
        with pytest.raises(OperatorError):  # the refusal removes the stored connection, as for any app
            await window.desk.start_run("user:ada", "refused")
        await window.desk.restore("user:ada")
        run_id = await window.desk.start_run("user:ada", "after the restore")
        assert served.cloud.runs.get(run_id).params["prompt"] == "after the restore"
        assert served.cloud.user("user:ada").grant.state["state"] == "active"
        served_run = await served.desk.start_run("user:ada", "the serving window too")  # same connection
        assert served.cloud.runs.get(served_run).user_id == "user:ada"
    finally:
        await window.close()


async def test_without_a_serving_window_the_server_acts_with_a_fresh_token_and_the_runtime_checks_the_grant(
    tmp_path: Path,
) -> None:
    from services.attached import ServedDesk
    from services.changes import ChangeFeed
    from services.cloud import FakeCloud
    from services.attached.client import RemoteCloud
    from services.sdk import MemoryConnectionStore
    from services.served.server import CloudServer, bind_socket, origin_url

    sock = bind_socket("127.0.0.1", 0)
    url = origin_url(*sock.getsockname()[:2])
    cloud = FakeCloud("app", issuer=url, runtime_url=url)
    await cloud.connect(MemoryConnectionStore(), "user:o1")
    server = CloudServer(cloud, sock)
    await server.start()
    remote = RemoteCloud(server.url, server.token)
    desk = ServedDesk(remote, ChangeFeed())
    try:
        await desk.start()
        run_id = await desk.start_run("user:o1", "headless")
        assert cloud.runs.get(run_id).params["prompt"] == "headless"
        assert [c.op for c in cloud.calls if c.op == "run.start"] == ["run.start"]  # through the runtime's wire
        cloud.user("user:o1").grant.revoke("grant_removed")
        with pytest.raises(OperatorError) as refused:
            await desk.send_message(run_id, "still there?")
        assert "grant_revoked" in str(refused.value)  # the runtime's own words
        assert cloud.runs.get(run_id).messages == []
    finally:
        await desk.stop()
        await remote.aclose()
        await server.stop()
