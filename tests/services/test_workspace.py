"""The Workspace and the operator's desk over the real fake cloud and SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.operator import OperatorError
from services.workspace import Workspace


@pytest.fixture
async def ws(tmp_path: Path):
    workspace = await Workspace.open(tmp_path / "ws")
    yield workspace
    await workspace.close()


async def test_a_new_workspace_has_the_sample_world(ws: Workspace) -> None:
    runs = ws.desk.runs()
    assert {r.status for r in runs} >= {"idle", "waiting_on_user", "settled"}
    assert [g.user_id for g in ws.desk.grants()] == ["user:ada", "user:grace", "user:linus"]
    assert ws.desk.waiting_on_user() == 1
    assert (ws.path).is_dir()


async def test_app_actions_go_through_the_sdk_and_are_attributed(ws: Workspace) -> None:
    run_id = await ws.desk.start_run("user:ada", "hello")
    assert [c.op for c in ws.cloud.calls][-1] == "run.start"
    ws.desk.reply(run_id, "hi there")
    await ws.desk.send_message(run_id, "and then?")
    await ws.desk.cancel_run(run_id)
    run = ws.desk.run(run_id)
    assert run.outcome["outcome"] == "canceled"
    assert [(a.action, a.by) for a in ws.desk.log(run_id)] == [
        ("start", "app"), ("reply", "operator"), ("message", "app"), ("cancel", "app"),
    ]


async def test_operator_errors_are_clear(ws: Workspace) -> None:
    with pytest.raises(OperatorError, match="no run"):
        ws.desk.reply("run_missing", "x")
    run_id = ws.desk.runs()[0].id
    with pytest.raises(OperatorError, match="not valid JSON"):
        ws.desk.emit(run_id, "custom.event", "{nope")
    with pytest.raises(OperatorError, match="model_error"):
        ws.desk.fail_turn(run_id, "bogus", "x")
    with pytest.raises(OperatorError, match="provider"):
        ws.desk.set_scopes("user:ada", ["notascope"])


async def test_revoke_refusal_and_restore(ws: Workspace) -> None:
    ws.desk.revoke("user:grace", "grant_removed")
    with pytest.raises(OperatorError, match="grant_removed"):
        await ws.desk.start_run("user:grace", "x")
    refusals = ws.desk.refusals_since(60)
    assert [(r.user_id, r.code) for r in refusals] == [("user:grace", "grant_removed")]
    assert refusals[0].rev == ws.cloud.user("user:grace").grant.state["rev"]
    await ws.desk.restore("user:grace")
    run_id = await ws.desk.start_run("user:grace", "back again")
    assert ws.desk.run(run_id).user_id == "user:grace"
