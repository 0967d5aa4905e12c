"""Branch names git refuses never leave a judgment stuck, and a judgment that cannot progress can be rejected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.clock import FakeClock
from services.knowledge.okf import Harvest, LocalJudgeClient, OkfError, SoulDecl, init_git_proposal
from services.knowledge.okf.git import check_branch_name

from .gitworld import DECISION, NODES, GitWorld, bind_project, git, hermetic_git, make_git_world

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

NAMES = ["main", "okf/x-proj", "proj..k", "proj.lock", "proj.", "a/.hidden", "a b", "a~1", "a^", "a:b", "a?", "a*",
         "a[b", "a\\b", "a@{1}", "@", "@{-1}", "-x", "HEAD", "a//b", "/a", "a/", "a\x07b", "a\x7fb", "é-ok", ".a"]


@pytest.fixture
def gitworld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitWorld:
    hermetic_git(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'nogh'}:{os.environ['PATH']}")
    return make_git_world(tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_the_branch_name_check_agrees_with_git_check_ref_format_branch(tmp_path: Path, name: str) -> None:
    """Outside any repository, so ``@{-1}`` cannot name a previous branch."""
    verdict = subprocess.run(["git", "check-ref-format", "--branch", name], cwd=tmp_path, capture_output=True,
                             env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}).returncode
    try:
        check_branch_name(name, "test")
        ours = 0
    except OkfError as exc:
        assert "git check-ref-format --branch" in str(exc)
        ours = 1
    assert ours == (1 if verdict else 0), (name, verdict)


@pytest.mark.parametrize("field,value", [("base_id", "proj..k"), ("base_id", "proj.lock"), ("base_id", "proj."),
                                         ("accepted_branch", "main..x"), ("accepted_branch", "main.lock"),
                                         ("accepted_branch", "a b")])
async def test_binding_refuses_what_makes_a_branch_name_git_refuses(gitworld: GitWorld, tmp_path: Path, field: str,
                                                                   value: str) -> None:
    harvest = await Harvest.open(tmp_path / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    args = {"repository": str(gitworld.remote), "root": "knowledge", "accepted_branch": "main",
            "pr_repository": "example/project", "base_id": "project-knowledge", field: value}
    with pytest.raises(OkfError) as caught:
        await harvest.bind_git_base("project", **args)
    assert caught.value.code == "E_CONFIG" and "git refuses" in str(caught.value) and repr(value) in str(caught.value)
    assert harvest.bindings.bases == {} and "project" not in (tmp_path / "knowledge" / "okf-bindings.json").read_text()
    await harvest.close()


async def _pending(harvest: Harvest, tmp: Path, soul: SoulDecl) -> tuple[str, str]:
    home = tmp / "homes" / "expert"
    source_id = await harvest.register_home(home, soul, agent="expert")
    (home / "notes" / "retries.md").write_text(DECISION)
    await harvest.capture_now(source_id)
    [item] = await harvest.queue(["pending"])
    return source_id, item.id


async def test_a_binding_written_before_the_check_fails_its_judgment_which_can_then_be_rejected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bindings file that already holds a base id git cannot branch on (``proj..k``): the delivery is
    refused before any commit (failed, not left delivering), and the operator can reject it."""
    hermetic_git(monkeypatch, tmp_path)
    remote, operator = tmp_path / "remote.git", tmp_path / "operator"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    git(tmp_path, "clone", "--quiet", str(remote), str(operator))
    git(operator, "checkout", "--quiet", "-b", "main")
    init_git_proposal(tmp_path / "stage", "proj..k", NODES, at=1_800_000_000.0)
    os.rename(tmp_path / "stage", operator / "knowledge")
    git(operator, "add", ".")
    git(operator, "commit", "--quiet", "-m", "base")
    git(operator, "push", "--quiet", "origin", "main")
    root = tmp_path / "knowledge"
    root.mkdir()
    (root / "okf-bindings.json").write_text(json.dumps({"version": 1, "stateDir": "state", "bases": {"proj": {
        "id": "proj..k", "kind": "git", "repository": str(remote), "root": "knowledge", "acceptedBranch": "main",
        "pr": {"repository": "example/project"}}}}))
    harvest = await Harvest.open(root, ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    source_id, run_id = await _pending(harvest, tmp_path, SoulDecl("expert-id", ("proj/expert",), ("proj/ops",)))
    with pytest.raises(OkfError) as caught:
        await harvest.approve(run_id)
    assert "git refuses" in str(caught.value) and "proj..k" in str(caught.value)
    [item] = await harvest.queue()
    assert item.state == "failed"
    assert git(remote, "for-each-ref", "refs/heads/okf/") == ""
    item = await harvest.reject(run_id, "the base id cannot name a branch")
    assert item.state == "rejected"
    await harvest.close()


async def test_a_delivery_that_keeps_failing_can_be_rejected(gitworld: GitWorld, tmp_path: Path) -> None:
    """The repository is gone: every retry fails the same way, and the operator can end it."""
    harvest = await Harvest.open(tmp_path / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    await bind_project(harvest, gitworld)
    source_id, run_id = await _pending(harvest, tmp_path, SoulDecl("expert-id", ("project/expert",), ("project/ops",)))
    os.rename(gitworld.remote, tmp_path / "moved.git")
    for attempt in (harvest.approve, harvest.retry):
        with pytest.raises(OkfError):
            await attempt(run_id)
        [item] = await harvest.queue()
        assert item.state == "delivering" and item.problems
    item = await harvest.reject(run_id, "the repository moved")
    assert item.state == "rejected" and item.reason == "the repository moved"
    run = harvest.state.load_run(source_id, run_id)
    assert run["review"]["was"] == "delivering" and harvest.state.status(source_id)["processed"] == []
    await harvest.close()


async def test_a_delivery_under_way_without_a_failure_is_not_rejected(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest = await Harvest.open(tmp_path / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    await bind_project(harvest, gitworld)
    source_id, run_id = await _pending(harvest, tmp_path, SoulDecl("expert-id", ("project/expert",), ("project/ops",)))
    await harvest.approve(run_id)  # delivered, waiting for the merge: nothing is stuck
    with pytest.raises(OkfError):
        await harvest.reject(run_id, "changed my mind")
    [item] = await harvest.queue()
    assert item.state == "delivered"
    await harvest.close()
