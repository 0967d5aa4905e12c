"""Crash mid-publication (a subprocess killed between steps) recovers on the next open: all-old or all-new."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.knowledge.okf import Harvest, LocalJudgeClient, RecoveryError
from services.knowledge.okf.proposal import proposal_hash, read_proposal
from services.knowledge.okf.tree import read_tree

from .conftest import DECISION, LIMIT, World

CRASHER = textwrap.dedent("""
    import asyncio, os, sys
    from pathlib import Path
    from services.changes import ChangeFeed
    from services.knowledge.okf import Harvest, LocalJudgeClient

    root, judgment_id, crash_at = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    def hook(step):
        if step == crash_at:
            os._exit(17)

    async def main():
        harvest = await Harvest.open(root, ChangeFeed(), LocalJudgeClient())
        harvest.runs.step_hook = hook
        await harvest.approve(judgment_id)

    asyncio.run(main())
    sys.exit(3)
""")


def crash(root: Path, judgment_id: str, step: str) -> None:
    done = subprocess.run([sys.executable, "-c", CRASHER, str(root), judgment_id, step], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[4], timeout=60)
    assert done.returncode == 17, done.stderr


async def pending_with_files(world: World) -> tuple[str, dict[str, bytes], dict[str, bytes], int]:
    (world.notes / "retries.md").write_text(DECISION)
    (world.notes / "export.md").write_text(LIMIT)
    (world.notes / "queues.md").write_text("We chose SQS rather than Kafka because nobody runs brokers.\n")
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue(["pending"])
    run = world.harvest.state.load_run(world.source_id, item.id)
    delta = read_proposal(json.loads(Path(run["receipts"]["team"]["proposal"]).read_text()))
    before = read_tree(world.base)
    return item.id, before, delta.applied(before), len(delta.changed)


async def reopen(world: World) -> Harvest:
    return await Harvest.open(world.root / "knowledge", ChangeFeed(), LocalJudgeClient())


STEPS = ["journal", "publishing"] + [f"replaced:{k}" for k in range(1, 6)] + ["accepted"]


@pytest.mark.parametrize("step", STEPS)
async def test_crash_at_each_step_recovers_forward(world: World, step: str) -> None:
    judgment_id, before, after, count = await pending_with_files(world)
    assert count == 5  # three concepts, the node index and the node log
    crash(world.root / "knowledge", judgment_id, step)
    journal = Path(f"{world.base}.okf-publication.json")
    assert journal.exists()
    current = read_tree(world.base)
    assert (current == after) == (step in ("replaced:5", "accepted"))  # a mix before recovery
    assert all(current.get(p) in (before.get(p), after.get(p)) for p in set(before) | set(after))
    reopened = await reopen(world)
    assert [o.status for o in reopened.recovered] == ["completed"]
    assert read_tree(world.base) == after
    assert not journal.exists()
    [item] = await reopened.queue()
    assert item.state == "approved" and item.receipts == (("team", "accepted"),)
    status = reopened.state.status(world.source_id)
    assert f"{judgment_id}/team" in status["accepted"] and len(status["processed"]) == 3
    lock = reopened.runs.provider("team").base.lock()
    assert lock.try_acquire()  # the dead publisher's lock was released with its process
    lock.release()


async def test_crash_before_the_journal_leaves_old_set_and_retry_delivers(world: World) -> None:
    judgment_id, before, after, _ = await pending_with_files(world)
    crash(world.root / "knowledge", judgment_id, "intent")
    assert not Path(f"{world.base}.okf-publication.json").exists()
    reopened = await reopen(world)
    assert reopened.recovered == []
    assert read_tree(world.base) == before
    [item] = await reopened.queue()
    assert item.state == "delivering" and item.receipts == (("team", "publication-intent"),)
    item = await reopened.retry(judgment_id)
    assert item.state == "approved" and read_tree(world.base) == after


async def test_torn_journal_means_no_publication_started(world: World) -> None:
    judgment_id, before, _, _ = await pending_with_files(world)
    Path(f"{world.base}.okf-publication.json").write_text('{"version": 1, "run": "')
    reopened = await reopen(world)
    assert [o.status for o in reopened.recovered] == ["discarded"]
    assert read_tree(world.base) == before
    assert (await reopened.approve(judgment_id)).state == "approved"


async def test_recovery_refuses_to_mix_with_an_outside_edit(world: World) -> None:
    judgment_id, before, after, _ = await pending_with_files(world)
    crash(world.root / "knowledge", judgment_id, "replaced:2")
    (world.base / "expert" / "log.md").write_text("# Log\n\nrewritten by someone else\n")
    reopened = await reopen(world)
    assert reopened.recovered == [] and "changed outside the publication" in reopened.recovery_errors[0]
    assert Path(f"{world.base}.okf-publication.json").exists()  # the journal stays; reads stay blocked
    with pytest.raises(RecoveryError, match="publication pending"):
        await reopened.refresh(world.source_id)


async def test_unvalidatable_after_state_rolls_back(world: World) -> None:
    judgment_id, before, after, _ = await pending_with_files(world)
    crash(world.root / "knowledge", judgment_id, "replaced:1")
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    proposal_file = Path(run["receipts"]["team"]["proposal"])
    proposal = json.loads(proposal_file.read_text())
    journal = json.loads(Path(f"{world.base}.okf-publication.json").read_text())
    # an after-state that no longer validates (its index lost the listings), with a matching journal
    broken = dict(proposal["after"])
    broken["expert/index.md"] = base64.b64encode(b"# expert\n").decode()
    proposal["after"] = broken
    proposal_file.write_text(json.dumps(proposal))
    journal["proposalHash"] = proposal_hash(proposal)
    Path(f"{world.base}.okf-publication.json").write_text(json.dumps(journal))
    reopened = await reopen(world)
    assert [o.status for o in reopened.recovered] == ["rolled-back"]
    assert read_tree(world.base) == before
    [item] = await reopened.queue()
    assert item.receipts == (("team", "validated"),)


async def test_judging_interrupted_by_a_crash_becomes_invalid_and_can_be_rejudged(world: World) -> None:
    (world.notes / "retries.md").write_text(DECISION)
    await world.harvest.capture_now(world.source_id, judge=False)
    inputs = world.harvest.runs.outstanding(world.source_id)
    run = world.harvest.runs.create_run(world.source_id, inputs, at=0)
    world.harvest.runs.prompt(world.source_id, run["id"])  # the process dies while the judge runs
    reopened = await reopen(world)
    [item] = await reopened.queue()
    assert item.state == "invalid" and item.run_status == "launch-unknown" and "interrupted" in item.problems[0]
    assert (await reopened.rejudge(item.id)).state == "pending"


async def test_each_replacement_is_fsynced_before_its_folder(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import stat as stat_module

    judgment_id, _, after, count = await pending_with_files(world)
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append("dir" if stat_module.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    steps: list[str] = []
    world.harvest.runs.step_hook = lambda step: steps.append(f"{step}@{len(synced)}")
    await world.harvest.approve(judgment_id)
    replaced = [s for s in steps if s.startswith("replaced:")]
    assert len(replaced) == count
    marks = [int(s.split("@")[1]) for s in steps]
    for previous, current in zip(marks, marks[1:]):
        window = synced[previous:current]
        assert window.count("file") <= window.count("dir")  # a file fsync is always followed by its folder's
    for mark, nxt in zip([int(s.split("@")[1]) for s in replaced], [int(s.split("@")[1]) for s in replaced][1:]):
        assert synced[mark:nxt][-2:] == ["file", "dir"]
