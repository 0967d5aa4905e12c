"""A publication that cannot brick: OS errors at every step, broken bases, tampered proposals, leftovers.

Afterwards a base is always all-old or all-new, a journal is gone or recovers, nothing is ever
written outside a base, one broken base never stops an open nor the other bases, and what needs the
operator is a notice with the way out.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.errors import ServiceError
from services.knowledge.okf import ConfirmError, Harvest, LocalJudgeClient, OkfError, OkfPathError
from services.knowledge.okf.proposal import proposal_document, proposal_hash, read_proposal
from services.knowledge.okf.tree import read_tree

from .conftest import DECISION, LIMIT, NODES, World, make_world

OTHER_NODES = {"misc": {"path": "misc", "owner": "misc-id"}}


async def pending(world: World) -> tuple[str, dict[str, bytes], dict[str, bytes]]:
    """A pending judgment writing three files, with the whole base before and after it."""
    (world.notes / "retries.md").write_text(DECISION)
    (world.notes / "export.md").write_text(LIMIT)
    await world.harvest.capture_now(world.source_id)
    [item] = await world.harvest.queue(["pending"])
    run = world.harvest.state.load_run(world.source_id, item.id)
    delta = read_proposal(json.loads(Path(run["receipts"]["team"]["proposal"]).read_text()))
    before = read_tree(world.base)
    return item.id, before, delta.applied(before)


async def reopen(world: World) -> Harvest:
    return await Harvest.open(world.root / "knowledge", ChangeFeed(), LocalJudgeClient())


def journal_of(base: Path) -> Path:
    return Path(f"{base}.okf-publication.json")


class Fault:
    """``os.<name>`` raising ENOSPC on its ``k``-th call (once), as a full disk would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str, k: int) -> None:
        self.real = getattr(os, name)
        self.k, self.calls, self.fired = k, 0, False
        monkeypatch.setattr(os, name, self)

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        if self.calls == self.k:
            self.fired = True
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(*args, **kwargs)


@pytest.mark.parametrize("name", ["replace", "fsync", "mkdir", "unlink"])
async def test_an_os_error_at_any_publication_step_leaves_the_base_all_old_or_all_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    steps = 0
    for k in range(1, 200):
        world = await make_world(tmp_path / f"{name}-{k}")
        judgment_id, before, after = await pending(world)
        with monkeypatch.context() as patch:
            fault = Fault(patch, name, k)
            try:
                item = await world.harvest.approve(judgment_id)
                error: Exception | None = None
            except Exception as exc:  # noqa: BLE001 - the test names what it may be below
                error = exc
        assert error is None or isinstance(error, ServiceError), repr(error)  # never a raw OSError
        assert read_tree(world.base) in (before, after)  # all-old or all-new, never a mix
        if journal_of(world.base).exists():
            await world.harvest.recover()  # what the next open does
            assert not journal_of(world.base).exists()
            assert read_tree(world.base) in (before, after)
        [item] = await world.harvest.queue()
        if item.state == "pending":  # the approval itself could not be recorded: nothing was delivered
            assert read_tree(world.base) == before
            item = await world.harvest.approve(judgment_id)
        elif item.state != "approved":
            assert item.state == "delivering", (k, item, error)
            item = await world.harvest.retry(judgment_id)
        assert item.state == "approved" and read_tree(world.base) == after
        assert not list((world.root / "knowledge" / "bases" / "team.okf-lock").glob(".publish.*.tmp"))
        await world.harvest.close()
        if not fault.fired:
            break
        steps += 1
    assert steps >= {"replace": 8, "fsync": 20, "mkdir": 1, "unlink": 1}[name]


async def test_a_disk_full_for_good_mid_publication_blocks_the_base_until_recovery_completes(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    judgment_id, before, after = await pending(world)
    real_replace = os.replace

    def full_after_the_journal(src: object, dst: object, *args: object, **kwargs: object) -> None:
        if journal_of(world.base).exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full_after_the_journal)
    with pytest.raises(OkfError, match="recovery could not finish it yet.*blocked") as raised:
        await world.harvest.approve(judgment_id)
    monkeypatch.undo()
    assert "No space left on device" in str(raised.value) and raised.value.remedy
    assert journal_of(world.base).exists() and read_tree(world.base) == before
    notice = world.harvest.blocked["team"]
    assert "No space left on device" in notice.reason and "free disk space" in notice.remedy
    assert notice in await world.harvest.notices()
    reopened = await reopen(world)  # the disk has room again: the journal completes the publication
    assert [o.status for o in reopened.recovered] == ["completed"] and reopened.blocked == {}
    assert read_tree(world.base) == after and not journal_of(world.base).exists()
    [item] = await reopened.queue()
    assert item.state == "approved"


async def test_a_proposal_that_cannot_be_written_is_refused_before_its_journal(world: World) -> None:
    judgment_id, before, _ = await pending(world)
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    file = Path(run["receipts"]["team"]["proposal"])
    proposal = json.loads(file.read_text())  # as an older, looser validator could have accepted it
    proposal["changed"] = sorted([*proposal["changed"], "expert/index.md/x.md"])
    proposal["after"]["expert/index.md/x.md"] = base64.b64encode(b"---\ntype: Note\n---\n").decode()
    file.write_text(json.dumps(proposal))
    with world.harvest.state.editing_run(world.source_id, judgment_id) as edited:
        edited["receipts"]["team"]["proposalHash"] = proposal_hash(proposal)
    with pytest.raises(OkfPathError, match="expert/index.md is a file.*nothing was written"):
        await world.harvest.approve(judgment_id)
    assert read_tree(world.base) == before and not journal_of(world.base).exists()
    [item] = await world.harvest.queue()
    assert item.state == "failed" and item.problems
    reopened = await reopen(world)  # and every later open is clean
    assert reopened.blocked == {} and await reopened.notices() == []
    assert (await reopened.rejudge(judgment_id)).state == "pending"


async def test_a_version_1_proposal_of_an_older_workspace_still_publishes(world: World) -> None:
    from services.knowledge.okf.tree import encode_tree

    judgment_id, before, after = await pending(world)
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    file = Path(run["receipts"]["team"]["proposal"])
    current = json.loads(file.read_text())
    old = {"version": 1, "run": current["run"], "attempt": 1, "created": current["created"], "file": str(file),
           "before": encode_tree(before), "after": encode_tree(after), "changed": current["changed"]}
    file.write_text(json.dumps(old))
    with world.harvest.state.editing_run(world.source_id, judgment_id) as edited:
        edited["receipts"]["team"]["proposalHash"] = proposal_hash(old)
    assert {f.path for f in (await world.harvest.detail(judgment_id)).files} == set(current["changed"])
    assert (await world.harvest.approve(judgment_id)).state == "approved"
    assert read_tree(world.base) == after


@pytest.mark.parametrize("escape", ["../../victim.md", "/tmp/okf-victim.md", "expert/../../../victim.md"])
async def test_a_tampered_proposal_is_refused_and_nothing_is_written(world: World, escape: str) -> None:
    judgment_id, before, _ = await pending(world)
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    file = Path(run["receipts"]["team"]["proposal"])
    proposal = json.loads(file.read_text())
    proposal["changed"].append(escape)
    proposal["after"][escape] = base64.b64encode(b"owned\n").decode()
    file.write_text(json.dumps(proposal))
    with pytest.raises(ConfirmError, match="changed since it was validated.*nothing was written"):
        await world.harvest.approve(judgment_id)
    assert not (world.root / "knowledge" / "victim.md").exists() and not Path("/tmp/okf-victim.md").exists()
    assert read_tree(world.base) == before and not journal_of(world.base).exists()
    [item] = await world.harvest.queue()
    assert item.state == "failed" and "changed since it was validated" in item.problems[0]
    assert (await world.harvest.rejudge(judgment_id)).state == "pending"
    assert (await world.harvest.approve(judgment_id)).state == "approved"


@pytest.mark.parametrize("escape", ["../../victim.md", "/tmp/okf-victim.md", "expert/linked/x.md"])
async def test_recovery_of_a_journal_never_writes_outside_the_base(world: World, escape: str) -> None:
    judgment_id, before, after = await pending(world)
    outside = world.root / "outside"
    outside.mkdir()
    run = world.harvest.state.load_run(world.source_id, judgment_id)
    file = Path(run["receipts"]["team"]["proposal"])
    proposal = json.loads(file.read_text())
    proposal["changed"].append(escape)
    proposal["after"][escape] = base64.b64encode(b"owned\n").decode()
    file.write_text(json.dumps(proposal))  # proposal and journal agree: only containment stops it
    journal_of(world.base).write_text(json.dumps({"version": 1, "run": judgment_id, "proposalHash": proposal_hash(proposal),
                                                  "proposalFile": str(file), "status": "publishing"}))
    if escape.startswith("expert/linked"):
        os.symlink(outside, world.base / "expert" / "linked")
    reopened = await reopen(world)
    assert not (world.root / "knowledge" / "victim.md").exists() and not Path("/tmp/okf-victim.md").exists()
    assert list(outside.iterdir()) == []
    assert "team" in reopened.blocked and journal_of(world.base).exists()
    notice = reopened.blocked["team"]
    assert notice.kind == "base-blocked" and str(journal_of(world.base)) in notice.remedy
    if not escape.startswith("expert/linked"):
        assert read_tree(world.base) == before


async def test_a_broken_base_never_stops_the_open_and_the_other_bases_keep_working(world: World) -> None:
    await world.harvest.init_base("other", OTHER_NODES)
    other = world.root / "knowledge" / "bases" / "other"
    tree = read_tree(other)
    half = dict(tree)
    half["misc/log.md"] = tree["misc/log.md"] + b"* **Harvest**: half published.\n"
    after = {**half, "misc/index.md/x.md": b"---\ntype: Note\n---\n"}  # what older code let through
    file = world.root / "other-proposal.json"
    proposal = proposal_document("0" * 8, 1, str(file), tree, after, at=0)
    file.write_text(json.dumps(proposal))
    (other / "misc" / "log.md").write_bytes(half["misc/log.md"])  # the publication stopped half way
    journal_of(other).write_text(json.dumps({"version": 1, "run": "0" * 8, "proposalHash": proposal_hash(proposal),
                                             "proposalFile": str(file), "status": "publishing"}))
    for _ in range(2):  # every open succeeds, and says the same
        reopened = await reopen(world)
        assert list(reopened.blocked) == ["other"]
        notice = reopened.blocked["other"]
        assert "misc/index.md is a file" in notice.reason and str(journal_of(other)) in notice.remedy
        assert notice in await reopened.notices()
        await reopened.close()
    (world.notes / "retries.md").write_text(DECISION)
    await reopened.capture_now(world.source_id)
    [item] = await reopened.queue(["pending"])
    assert (await reopened.approve(item.id)).state == "approved"  # the team base keeps working
    assert "expert/decisions/retries.md" in read_tree(world.base)
    assert read_tree(other) == half and journal_of(other).exists()  # the broken one is left for the operator


@pytest.mark.parametrize("breakage", ["missing", "symlinked", "bad descriptor"])
async def test_a_base_whose_folder_or_binding_is_broken_is_blocked_not_fatal(world: World, breakage: str) -> None:
    await world.harvest.init_base("other", OTHER_NODES)
    other = world.root / "knowledge" / "bases" / "other"
    if breakage == "missing":
        import shutil

        shutil.rmtree(other)
    elif breakage == "symlinked":
        bindings_file = world.root / "knowledge" / "okf-bindings.json"
        bindings = json.loads(bindings_file.read_text())
        (world.root / "real").mkdir()
        os.symlink(world.root / "real", world.root / "link")
        bindings["bases"]["other"]["path"] = "../link/other"
        bindings_file.write_text(json.dumps(bindings))
    else:
        (other / "okf-base.json").write_text("{not json")
    reopened = await reopen(world)
    assert list(reopened.blocked) == ["other"]
    assert "okf-bindings.json" in reopened.blocked["other"].remedy
    (world.notes / "retries.md").write_text(DECISION)
    await reopened.capture_now(world.source_id)
    [item] = await reopened.queue(["pending"])
    assert (await reopened.approve(item.id)).state == "approved"


async def test_the_workspace_opens_with_a_blocked_base_and_says_so(tmp_path: Path) -> None:
    from services.workspace import Settings, Workspace

    settings = Settings(path=tmp_path / "ws", bases_path=tmp_path / "bases")
    workspace = await Workspace.open(settings=settings)
    [alias] = workspace.okf.runs.directory_aliases()  # the sample world's directory base (its second is a Git base)
    base = workspace.okf.bindings.bases[alias].path
    await workspace.close()
    journal_of(base).write_text(json.dumps({"version": 1, "run": "r", "proposalHash": "sha256-x",
                                            "proposalFile": str(tmp_path / "gone.json"), "status": "publishing"}))
    workspace = await Workspace.open(settings=settings)
    try:
        [notice] = [n for n in await workspace.okf.notices() if n.kind == "base-blocked"]
        assert notice.subject == alias and "cannot be read" in notice.reason and "gone.json" in notice.remedy
    finally:
        await workspace.close()


CRASHER = textwrap.dedent("""
    import asyncio, os, sys
    from pathlib import Path
    from services.changes import ChangeFeed
    from services.knowledge.okf import Harvest, LocalJudgeClient

    root, judgment_id = Path(sys.argv[1]), sys.argv[2]
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(".okf-publication.json"):
            os._exit(17)  # killed with the journal's temp file written, before its rename
        return real_replace(src, dst, *args, **kwargs)

    async def main():
        harvest = await Harvest.open(root, ChangeFeed(), LocalJudgeClient())
        os.replace = replace
        await harvest.approve(judgment_id)

    asyncio.run(main())
    sys.exit(3)
""")


async def test_temp_files_of_a_killed_process_are_swept_on_the_next_open(world: World) -> None:
    judgment_id, before, after = await pending(world)
    knowledge = world.root / "knowledge"
    done = subprocess.run([sys.executable, "-c", CRASHER, str(knowledge), judgment_id], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[4], timeout=60)
    assert done.returncode == 17, done.stderr
    assert [p.name for p in (knowledge / "bases").glob(".team.okf-publication.json.*.tmp")]
    run_dir = world.harvest.state.run_dir(world.source_id, judgment_id)
    source_dir = world.harvest.state.source_dir(world.source_id)
    leftovers = [tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)[1] for name, folder in [
        ("run.json", run_dir), ("team-proposal.json", run_dir), ("judgment.json", run_dir / "work"),
        ("status.json", source_dir), (f"{'a' * 64}.json", source_dir / "inputs"),
        ("owners.json", world.harvest.state.path), ("okf-bindings.json", knowledge), ("STATE.md", world.home)]]
    leftovers.append(tempfile.mkstemp(prefix=".publish.", suffix=".tmp", dir=knowledge / "bases" / "team.okf-lock")[1])
    staging = knowledge / "bases" / f".half.{'0' * 32}.staging"
    (staging / "expert").mkdir(parents=True)
    kept = [world.base / "expert" / "notes.tmp", run_dir / ".keep.tmp"]  # not ours: not in the temp-file form
    for path in kept:
        path.write_text("mine\n")
    reopened = await reopen(world)
    assert not [p for p in (knowledge / "bases").glob(".team.okf-publication.json.*.tmp")]
    assert not [p for p in leftovers if os.path.exists(p)] and not staging.exists()
    assert all(p.exists() for p in kept)
    assert len(reopened.swept) == len(leftovers) + 2
    kept[0].unlink()
    assert read_tree(world.base) == before and reopened.recovered == []  # no journal ever appeared
    assert (await reopened.retry(judgment_id)).state == "approved" and read_tree(world.base) == after


async def test_init_base_through_a_symlinked_folder_creates_nothing(world: World) -> None:
    real = world.root / "real"
    real.mkdir()
    os.symlink(real, world.root / "link")
    with pytest.raises(OkfPathError, match="reached through a symlink"):
        await world.harvest.init_base("linked", NODES, path=world.root / "link" / "bases" / "linked")
    assert list(real.iterdir()) == []  # nothing was created behind the link
    assert "linked" not in json.loads((world.root / "knowledge" / "okf-bindings.json").read_text())["bases"]
    with pytest.raises(OkfError):
        await world.harvest.init_base("bad id!", NODES)
