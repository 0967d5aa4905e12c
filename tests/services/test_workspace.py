"""The Workspace and the operator's desk over the real fake cloud and SDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.desk import OperatorError
from services.workspace import Workspace


@pytest.fixture
async def ws(tmp_path: Path):
    workspace = await Workspace.open(tmp_path / "ws")
    yield workspace
    await workspace.close()


async def test_a_new_workspace_has_the_sample_world(ws: Workspace) -> None:
    runs = ws.desk.runs()
    assert {r.status for r in runs} >= {"idle", "waiting_on_user", "settled"}
    assert [g.user_id for g in ws.desk.grants()] == ["user:ada", "user:grace", "user:linus", "user:operator"]
    assert ws.desk.waiting_on_user() == 1
    assert (ws.path).is_dir()


async def test_app_actions_go_through_the_sdk_and_are_attributed(ws: Workspace) -> None:
    run_id = await ws.desk.start_run("user:ada", "hello")
    assert [c.op for c in ws.cloud.calls][-1] == "run.start"
    await ws.desk.reply(run_id, "hi there")
    await ws.desk.send_message(run_id, "and then?")
    await ws.desk.cancel_run(run_id)
    run = ws.cloud.runs.get(run_id)
    assert run.outcome["outcome"] == "canceled"
    assert [(a.action, a.by) for a in ws.desk.log(run_id)] == [
        ("start", "app"), ("reply", "operator"), ("message", "app"), ("cancel", "app"),
    ]


async def test_operator_errors_are_clear(ws: Workspace) -> None:
    with pytest.raises(OperatorError, match="no run"):
        await ws.desk.reply("run_missing", "x")
    run_id = ws.desk.runs()[0].id
    with pytest.raises(OperatorError, match="not valid JSON"):
        await ws.desk.append_event(run_id, "custom.event", "{nope")
    with pytest.raises(OperatorError, match="model_error"):
        await ws.desk.fail_turn(run_id, "bogus", "x")
    with pytest.raises(OperatorError, match="provider"):
        await ws.desk.set_scopes("user:ada", ["notascope"])


async def test_revoke_refusal_and_restore(ws: Workspace) -> None:
    await ws.desk.revoke("user:grace", "grant_removed")
    with pytest.raises(OperatorError, match="grant_removed"):
        await ws.desk.start_run("user:grace", "x")
    refusals = ws.desk.refusals_since(60)
    assert [(r.user_id, r.code) for r in refusals] == [("user:grace", "grant_removed")]
    assert refusals[0].rev == ws.cloud.user("user:grace").grant.state["rev"]
    await ws.desk.restore("user:grace")
    run_id = await ws.desk.start_run("user:grace", "back again")
    assert ws.cloud.runs.get(run_id).user_id == "user:grace"


async def test_runs_follow_into_the_canvas_and_the_outbox(ws: Workspace) -> None:
    await ws.follower.idle()
    run_id = await ws.desk.start_run("user:linus", "follow me")
    await ws.desk.reply(run_id, "followed")
    await ws.follower.idle()
    node = await ws.canvas.read(run_id)
    assert node.node is not None and node.node.status == "idle"
    status = await ws.outbox.status()
    mine = [c for c in status.conversations if c.conversation_id == run_id]
    assert mine and mine[0].pending == 1 and mine[0].owner == "user:linus"
    assert list(ws.follower.errors) == []


async def test_reopening_captures_no_turn_twice(tmp_path: Path) -> None:
    first = await Workspace.open(tmp_path / "again")
    await first.follower.idle()
    before = (await first.outbox.status()).pending_total
    assert first.created and before > 0
    await first.close()
    second = await Workspace.open(tmp_path / "again")
    await second.follower.idle()
    assert not second.created
    assert (await second.outbox.status()).pending_total == before
    await second.close()


async def test_a_seeded_insight_review_approves_into_the_canvas(ws: Workspace) -> None:
    (review,) = await ws.insights.list("pending")
    done = await ws.insights.approve(review.id)
    detail = await ws.canvas.read(done.document)
    assert detail.document.body == review.proposal.candidates[0]


async def test_fork_starts_a_child_run_with_the_parents_messages(ws: Workspace) -> None:
    await ws.follower.idle()
    child = await ws.outbox.fork("run_sample_garden", 1)
    run = ws.cloud.runs.get(child)
    assert run.params["forked_from"] == "run_sample_garden"
    assert run.params["history"]


async def test_sample_notes_are_judged_by_cloud_runs_and_approved_into_the_base(ws: Workspace) -> None:
    queue = await ws.okf.queue(["pending"])
    notes = [j for j in queue if j.inputs == 3]
    assert notes and notes[0].promote == 2 and notes[0].drop == 1
    judge_runs = [r for r in ws.cloud.runs.all if r.user_id == "user:operator"]
    assert judge_runs and all(r.params["isolated"] for r in judge_runs)
    approved = await ws.okf.approve(notes[0].id)
    assert approved.state == "approved"
    base = ws.bases_path() / "team" / "gardener"
    assert any("water" in p.read_text() for p in base.rglob("*.md"))


async def test_a_settled_run_becomes_a_run_record_judgment(ws: Workspace) -> None:
    await ws.follower.idle()
    before = len(await ws.okf.queue())
    await ws.desk.settle("run_sample_review", "result", "reviewed")
    await ws.follower.idle()
    await ws.cloud.settle_tasks()
    assert len(await ws.okf.queue()) == before + 1
    assert not [c for c in (await ws.outbox.status()).conversations if c.owner == "user:operator"]
