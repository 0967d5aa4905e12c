"""The approval queue end to end: pending, detail, approve (whole / by outcome), reject, rejudge, faults."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from services.times import parse_time
from services.knowledge.okf import (
    BaselineError, FixedReplyJudgeClient, OkfPathError, RecoveryError, RunStateError,
    deterministic_judge_reply,
)
from services.knowledge.okf.tree import read_tree

from .conftest import DECISION, LIMIT, RESIDUE, World, make_world


async def pending(world: World, *notes: tuple[str, str]) -> str:
    for name, text in notes:
        (world.notes / name).write_text(text)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue(["pending"])
    return item.id


async def test_pending_judgment_detail_and_whole_approval(world: World) -> None:
    base_before = read_tree(world.base)
    judgment_id = await pending(world, ("retries.md", DECISION), ("export.md", LIMIT), ("todo.md", RESIDUE))
    assert read_tree(world.base) == base_before  # nothing delivered before approval
    detail = await world.harvest.detail(judgment_id)
    assert detail.item.state == "pending" and (detail.item.promote, detail.item.drop) == (2, 1)
    verdicts = {o.input_name: (o.verdict, o.decision) for o in detail.outcomes}
    assert verdicts == {"retries.md": ("promote", None), "export.md": ("promote", None), "todo.md": ("drop", None)}
    assert {o.input_name: o.input_text for o in detail.outcomes}["todo.md"] == RESIDUE
    paths = {f.path: f for f in detail.files}
    assert paths["expert/decisions/retries.md"].before is None and DECISION.strip() in paths["expert/decisions/retries.md"].after
    assert "+++ b/team/expert/index.md" in detail.diff
    item = await world.harvest.approve(judgment_id)
    assert item.state == "approved" and item.run_status == "processed" and item.receipts == (("team", "accepted"),)
    tree = read_tree(world.base)
    assert "expert/decisions/retries.md" in tree and "expert/lessons/export.md" in tree
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    receipt = run["receipts"]["team"]
    assert receipt["acceptedDigest"].startswith("sha256-") and receipt["acceptedAt"]
    assert item.accepted == (("team", receipt["acceptedDigest"], parse_time(receipt["acceptedAt"])),)
    status = world.harvest.state.status(world.source_id)
    assert sorted(status["processed"]) == sorted(run["inputs"])
    assert f"{judgment_id}/team" in status["accepted"] and f"{judgment_id}/team" in status["delivered"]
    assert not Path(f"{world.base}.okf-publication.json").exists()
    assert world.kinds()[-4:] == ["judgment.judging", "judgment.pending", "judgment.delivering", "judgment.approved"]
    assert status["activeRun"] is None
    with pytest.raises(RunStateError, match="not pending"):
        await world.harvest.approve(judgment_id)


async def test_approve_outcome_by_outcome(world: World) -> None:
    judgment_id = await pending(world, ("retries.md", DECISION), ("export.md", LIMIT))
    detail = await world.harvest.detail(judgment_id)
    chosen = next(o.input for o in detail.outcomes if o.input_name == "retries.md")
    declined = next(o.input for o in detail.outcomes if o.input_name == "export.md")
    item = await world.harvest.approve(judgment_id, [chosen])
    assert item.state == "approved"
    tree = read_tree(world.base)
    assert "expert/decisions/retries.md" in tree and "expert/lessons/export.md" not in tree
    status = world.harvest.state.status(world.source_id)
    assert chosen in status["processed"] and declined not in status["processed"]
    decisions = {o.input: o.decision for o in (await world.harvest.detail(judgment_id)).outcomes}
    assert decisions == {chosen: "approved", declined: "declined"}
    again = await world.harvest.rejudge(judgment_id)  # the declined input is judged again, alone
    assert again.state == "pending" and again.attempt == 2 and again.inputs == 1
    run_dir = world.harvest.state.run_dir(world.source_id, judgment_id)
    assert (run_dir / "rejudgments" / "1" / "previous.json").is_file()
    with pytest.raises(RunStateError, match="no outcome for"):
        await world.harvest.approve(judgment_id, ["f" * 64])


async def test_reject_records_reason_and_rejudge_keeps_inputs(world: World) -> None:
    judgment_id = await pending(world, ("retries.md", DECISION))
    with pytest.raises(RunStateError, match="needs a reason"):
        await world.harvest.reject(judgment_id, "  ")
    item = await world.harvest.reject(judgment_id, "Too specific to one vendor")
    assert item.state == "rejected" and item.reason == "Too specific to one vendor" and item.run_status == "rejected"
    assert world.kinds()[-1] == "judgment.rejected"
    assert world.harvest.state.status(world.source_id)["processed"] == []
    await world.harvest.capture_now(world.source_id)
    assert len(await world.harvest.queue()) == 1  # rejected inputs are not re-queued by capture
    item = await world.harvest.rejudge(judgment_id)
    assert item.state == "pending" and item.attempt == 2
    await world.harvest.approve(judgment_id)
    assert "expert/decisions/retries.md" in read_tree(world.base)


async def test_invalid_judgment_is_kept_with_errors_and_never_delivered(tmp_path: Path) -> None:
    judge = FixedReplyJudgeClient('{"version": 1, "exclusionsReviewed": true, "outcomes": [], "removals": []}')
    world = await make_world(tmp_path, judge)
    base_before = read_tree(world.base)
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and any("no outcome for input" in p for p in item.problems)
    detail = await world.harvest.detail(item.id)
    assert detail.reply is not None and '"outcomes": []' in detail.reply
    with pytest.raises(RunStateError, match="invalid, not pending"):
        await world.harvest.approve(item.id)
    assert read_tree(world.base) == base_before
    assert world.kinds()[-1] == "judgment.invalid"
    prompt, cwd = judge.prompts[0]
    assert "<<<input.json" in prompt and "<<<staging.json" in prompt
    assert Path(cwd).is_relative_to(world.harvest.state.run_dir(world.source_id, item.id))
    assert (Path(cwd) / "input.json").is_file() and (Path(cwd) / "bases" / "team" / "okf-base.json").is_file()
    judge._reply = deterministic_judge_reply  # the operator fixes the judge, then rejudges
    item = await world.harvest.rejudge(item.id)
    assert item.state == "pending"


@pytest.mark.parametrize("reply", ["this is not json", json.dumps({"version": 1, "exclusionsReviewed": True, "removals": [],
                                                                    "outcomes": [{"input": "0" * 64, "verdict": "drop",
                                                                                  "reason": "x", "concepts": []}]})])
async def test_bad_replies_are_invalid(tmp_path: Path, reply: str) -> None:
    world = await make_world(tmp_path, FixedReplyJudgeClient(reply))
    (world.notes / "a.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and item.problems


async def test_judge_failure_is_kept_on_the_run(tmp_path: Path) -> None:
    def broken(prompt: str) -> str:
        raise ConnectionError("cloud unreachable")

    world = await make_world(tmp_path, FixedReplyJudgeClient(broken))
    (world.notes / "a.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue()
    assert item.state == "invalid" and "cloud unreachable" in item.problems[0]


async def test_changed_base_since_staging_is_refused_and_nothing_written(world: World) -> None:
    judgment_id = await pending(world, ("retries.md", DECISION))
    (world.base / "ops" / "index.md").write_text("# ops\n\nedited by hand\n")
    base_before = read_tree(world.base)
    with pytest.raises(BaselineError, match="changed since the judgment was staged.*ops/index.md"):
        await world.harvest.approve(judgment_id)
    assert read_tree(world.base) == base_before
    [item] = await world.harvest.queue()
    assert item.state == "failed" and item.receipts == (("team", "validated"),)
    assert world.kinds()[-1] == "judgment.failed"
    item = await world.harvest.rejudge(judgment_id)
    assert item.state == "pending"
    assert (await world.harvest.approve(judgment_id)).state == "approved"
    assert "edited by hand" in (world.base / "ops" / "index.md").read_text()


async def test_two_approvals_at_once_one_wins(world: World) -> None:
    judgment_id = await pending(world, ("retries.md", DECISION))
    results = await asyncio.gather(world.harvest.approve(judgment_id), world.harvest.approve(judgment_id),
                                   return_exceptions=True)
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, BaseException)]
    assert len(wins) == 1 and wins[0].state == "approved"
    assert len(losses) == 1 and isinstance(losses[0], RunStateError) and "cannot be approved" in str(losses[0])
    log = (world.base / "expert" / "log.md").read_text()
    assert log.count("retries.md") == 1


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
async def test_linked_base_file_refused(world: World, kind: str) -> None:
    target = world.base / "expert" / "linked.md"
    (world.root / "outside.md").write_text("---\ntype: Lesson\n---\n")
    if kind == "symlink":
        os.symlink(world.root / "outside.md", target)
    else:
        os.link(world.root / "outside.md", target)
    (world.notes / "retries.md").write_text(DECISION)
    with pytest.raises(OkfPathError, match=kind.replace("link", "") or "link"):
        await world.harvest.capture_now(world.source_id)
    assert await world.harvest.queue() == []
    assert world.harvest.state.status(world.source_id)["captured"]["inputs"]  # the capture itself is kept


async def test_record_inputs_are_judged(world: World) -> None:
    record = {"thread": "run-7", "turns": [
        {"id": "t1", "role": "user", "text": "Which queue should we use?"},
        {"id": "t2", "role": "assistant", "text": "We chose SQS rather than Kafka because the team has no ops budget."}]}
    await world.harvest.capture_record(world.source_id, record)
    [item] = await world.harvest.queue()
    detail = await world.harvest.detail(item.id)
    [outcome] = detail.outcomes
    assert outcome.input_kind == "record" and outcome.input_name == "run-7" and outcome.verdict == "promote"
    text = next(f.after for f in detail.files if f.path.startswith("expert/decisions/"))
    assert "turns t1, t2" in text and outcome.input in text


async def test_views_are_immutable_and_pending_journal_blocks_fresh_ones(world: World) -> None:
    first = world.home / "knowledge"
    view = json.loads((first / "view.json").read_text())
    assert view["bases"]["team"]["path"] == "bases/team" and view["owns"] == ["team/expert"]
    assert (first / "bases" / "team" / "expert" / "index.md").is_file()
    judgment_id = await pending(world, ("retries.md", DECISION))
    await world.harvest.approve(judgment_id)
    result = await world.harvest.read(world.source_id, "team", "expert/decisions/retries.md")
    assert DECISION.strip() in result.text and Path(result.view).name.startswith("knowledge-view-")
    assert not (first / "bases" / "team" / "expert" / "decisions").exists()  # the old snapshot is unchanged
    durable = await world.harvest.refresh(world.source_id, durable=True)
    assert Path(durable["path"]).is_relative_to(world.harvest.state.source_dir(world.source_id) / "views")
    Path(f"{world.base}.okf-publication.json").write_text(json.dumps({"version": 1, "run": "x", "proposalHash": "h",
                                                                      "proposalFile": "/nonexistent", "status": "publishing"}))
    with pytest.raises(RecoveryError, match="publication pending"):
        await world.harvest.refresh(world.source_id)
    assert (first / "view.json").is_file()  # existing snapshots stay readable
    assert (Path(result.view) / "bases" / "team" / "expert" / "decisions" / "retries.md").read_text().startswith("---")


async def test_base_locked_by_another_publisher_fails_fast(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.knowledge.okf import bases

    judgment_id = await pending(world, ("retries.md", DECISION))
    monkeypatch.setattr(bases, "LOCK_WAIT_S", 0.1)
    base_before = read_tree(world.base)
    held = world.harvest.runs.provider("team").base.lock()
    assert held.try_acquire()
    try:
        with pytest.raises(RecoveryError, match="locked by another publication"):
            await world.harvest.approve(judgment_id)
    finally:
        held.release()
    assert read_tree(world.base) == base_before
    [item] = await world.harvest.queue()
    assert item.state == "delivering" and item.receipts == (("team", "validated"),)
    assert (await world.harvest.retry(judgment_id)).state == "approved"


async def test_owner_id_cannot_name_two_souls(world: World) -> None:
    from services.knowledge.okf import OkfError, SoulDecl

    with pytest.raises(OkfError, match="E_OWNER: owner id 'expert-id' already names soul"):
        await world.harvest.register_home(world.root / "homes" / "other", SoulDecl("expert-id", (), ()), agent="other",
                                          soul_name="another-soul")
    assert len(await world.harvest.sources()) == 1
    assert not (world.root / "homes" / "other").exists()
    assert world.harvest.state.owners() == {"expert-id": "expert-id"}


async def test_missing_node_fails_registration(world: World) -> None:
    from services.knowledge.okf import OkfConfigError, SoulDecl

    with pytest.raises(OkfConfigError, match="has no node 'missing'"):
        await world.harvest.register_home(world.root / "homes" / "x", SoulDecl("x-id", ("team/missing",), ()), agent="x")
    with pytest.raises(OkfConfigError, match="no base 'nowhere'"):
        await world.harvest.register_home(world.root / "homes" / "x", SoulDecl("x-id", ("nowhere/n",), ()), agent="x")
    assert not (world.root / "homes" / "x").exists()


async def test_outcomes_sharing_a_concept_are_approved_together(world: World) -> None:
    (world.notes / "a").mkdir()
    (world.notes / "b").mkdir()
    judgment_id = await pending(world, ("a/retries.md", DECISION), ("b/retries.md", "We decided never to retry a 400.\n"))
    detail = await world.harvest.detail(judgment_id)
    assert sorted(o.verdict for o in detail.outcomes) == ["merge", "promote"]
    assert {o.concepts for o in detail.outcomes} == {("team/expert/decisions/retries.md",)}
    with pytest.raises(RunStateError, match="approve them together"):
        await world.harvest.approve(judgment_id, [detail.outcomes[0].input])
    [item] = await world.harvest.queue()
    assert item.state == "pending"
    assert (await world.harvest.approve(judgment_id)).state == "approved"
    text = (world.base / "expert" / "decisions" / "retries.md").read_text()
    assert all(o.input in text for o in detail.outcomes)


async def test_all_drop_judgment_settles_without_changes(world: World) -> None:
    base_before = read_tree(world.base)
    judgment_id = await pending(world, ("todo.md", RESIDUE))
    item = await world.harvest.approve(judgment_id)
    assert item.state == "approved" and item.receipts == (("team", "no-change"),) and item.drop == 1
    assert read_tree(world.base) == base_before
    assert (await world.harvest.detail(judgment_id)).files == ()
    assert world.harvest.state.status(world.source_id)["processed"] == world.harvest.state.load_run(
        world.source_id, judgment_id)["inputs"]


async def test_read_refuses_paths_outside_the_base_and_works_without_the_home(world: World) -> None:
    from services.files import PathError

    for bad in ("../okf-bindings.json", "/etc/passwd", "expert/../../x"):
        with pytest.raises(PathError):
            await world.harvest.read(world.source_id, "team", bad)
    assert not list(world.home.glob("knowledge-view-*"))  # no view was made for a refused path
    import shutil

    shutil.rmtree(world.home)
    from services.knowledge.okf import SourceError

    with pytest.raises(SourceError, match="durable=True"):
        await world.harvest.refresh(world.source_id)
    result = await world.harvest.read(world.source_id, "team", "expert/index.md", durable=True)
    assert result.text.startswith("# expert") and not world.home.exists()


async def test_missing_node_index_is_refused_not_bootstrapped(world: World) -> None:
    from services.knowledge.okf import OkfError

    (world.base / "ops" / "index.md").unlink()
    (world.notes / "retries.md").write_text(DECISION)
    with pytest.raises(OkfError, match="E_INDEX: base 'team' is missing ops/index.md"):
        await world.harvest.capture_now(world.source_id)
    assert not (world.base / "ops" / "index.md").exists()
    assert await world.harvest.queue() == []


async def test_damaged_run_file_is_shown_not_hidden(world: World) -> None:
    good = await pending(world, ("retries.md", DECISION))
    (world.notes / "export.md").write_text(LIMIT)
    await world.harvest.capture_now(world.source_id)
    damaged = next(i.id for i in await world.harvest.queue() if i.id != good)
    (world.harvest.state.run_dir(world.source_id, damaged) / "run.json").write_text("{not json")
    items = {i.id: i for i in await world.harvest.queue()}
    assert items[good].state == "pending"
    assert items[damaged].state == "invalid" and "not valid JSON" in items[damaged].problems[0]
    assert (await world.harvest.approve(good)).state == "approved"


async def test_corrupt_bindings_file_is_named_and_kept(tmp_path: Path) -> None:
    from services.changes import ChangeFeed
    from services.knowledge.okf import Harvest, LocalJudgeClient, OkfConfigError

    root = tmp_path / "knowledge"
    root.mkdir()
    (root / "okf-bindings.json").write_text('{"version": 1, "stateDir": ')
    with pytest.raises(OkfConfigError, match="okf-bindings.json"):
        await Harvest.open(root, ChangeFeed(), LocalJudgeClient())
    assert (root / "okf-bindings.json").read_text() == '{"version": 1, "stateDir": '
