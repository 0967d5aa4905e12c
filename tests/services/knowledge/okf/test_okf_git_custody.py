"""Git custody end to end with real git: delivery as a branch, review, merge-visible acceptance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.clock import FakeClock
from services.knowledge.okf import Harvest, LocalJudgeClient, OkfError
from services.knowledge.okf.git_delivery import AUTHOR_EMAIL, AUTHOR_NAME

from .gitworld import (DECISION, LIMIT, SOUL, GitWorld, bind_project, gh_calls, gh_flag, git, hermetic_git, make_git_world,
                       set_pr_state, stand_in_gh)

pytestmark = pytest.mark.skipif(__import__("shutil").which("git") is None, reason="git is not installed")


@pytest.fixture
def gitworld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitWorld:
    hermetic_git(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'nogh'}:{__import__('os').environ['PATH']}")
    return make_git_world(tmp_path)


async def open_harvest(tmp: Path) -> Harvest:
    return await Harvest.open(tmp / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())


async def pending_judgment(tmp: Path, world: GitWorld, note: str = DECISION) -> tuple[Harvest, str, str]:
    """A harvest with the Git base bound, a home owning project/expert and one pending judgment."""
    harvest = await open_harvest(tmp)
    await bind_project(harvest, world)
    home = tmp / "homes" / "expert"
    source_id = await harvest.register_home(home, SOUL, agent="expert")
    (home / "notes").mkdir(exist_ok=True)
    (home / "notes" / "retries.md").write_text(note)
    await harvest.capture_now(source_id)
    [item] = await harvest.queue(["pending"])
    return harvest, source_id, item.id


def receipt(harvest: Harvest, source_id: str, run_id: str) -> dict:
    return harvest.state.load_run(source_id, run_id)["receipts"]["project"]


async def test_a_judgment_becomes_one_commit_on_its_own_branch_and_main_is_untouched(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    main_before = gitworld.remote_head()
    item = await harvest.approve(run_id)
    assert item.state == "delivered"  # waiting for the merge: not accepted yet
    r = receipt(harvest, source_id, run_id)
    assert r["status"] == "delivered" and r["branch"] == f"okf/{run_id}-project-knowledge"
    assert gitworld.okf_branches() == [r["branch"]]
    assert gitworld.remote_head() == main_before  # never the accepted branch
    assert gitworld.remote_head(r["branch"]) == r["commit"]
    assert git(gitworld.remote, "rev-list", "--count", f"main..{r['branch']}") == "1"
    assert git(gitworld.remote, "rev-parse", f"{r['commit']}^") == main_before
    author = git(gitworld.remote, "log", "-1", "--format=%an <%ae>|%s", r["commit"])
    assert author == f"{AUTHOR_NAME} <{AUTHOR_EMAIL}>|okf-harvest: {run_id}"
    changed = git(gitworld.remote, "diff-tree", "-r", "--name-only", "--no-commit-id", r["commit"]).splitlines()
    proposal = json.loads(Path(r["proposal"]).read_text())
    assert sorted(changed) == sorted(f"knowledge/{p}" for p in proposal["changed"])
    assert r["pr"] is None and "okf/" in r["review"]  # no gh: the pane says how to open the review
    status = harvest.state.status(source_id)
    assert f"{run_id}/project" in status["delivered"] and f"{run_id}/project" not in status["accepted"]
    await harvest.close()


@pytest.mark.parametrize("how", ["merge", "squash", "rebase"])
async def test_the_merge_once_visible_accepts_with_the_accepted_head(gitworld: GitWorld, tmp_path: Path, how: str) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.approve(run_id)
    assert await harvest.recheck() == []  # not merged yet: nothing changes
    branch = receipt(harvest, source_id, run_id)["branch"]
    head = gitworld.review(branch, how)
    [item] = await harvest.recheck()
    r = receipt(harvest, source_id, run_id)
    assert item.state == "approved" and r["status"] == "accepted" and r["acceptedCommit"] == head
    assert r["mergedAs"]["how"] == ("merge" if how == "merge" else "squash or rebase")
    assert f"{run_id}/project" in harvest.state.status(source_id)["accepted"]
    assert item.git[0].accepted_commit == head
    view = await harvest.refresh(source_id)
    assert view["bases"]["project"]["head"] == head
    view_json = json.loads((Path(view["path"]) / "view.json").read_text())
    assert view_json["bases"]["project"]["head"] == head
    concept = next(p for p in json.loads(Path(r["proposal"]).read_text())["changed"] if "/decisions/" in p)
    assert (Path(view["path"]) / "bases" / "project" / concept).read_text().startswith("---")
    await harvest.close()


async def test_a_moved_head_touching_the_proposal_paths_makes_it_stale(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    gitworld.operator_commit("knowledge/expert/index.md", "# expert\n\nedited by hand\n", "hand edit")
    with pytest.raises(OkfError) as caught:
        await harvest.approve(run_id)
    assert caught.value.code == "E_BASELINE" and "expert/index.md" in str(caught.value)
    [item] = await harvest.queue()
    assert item.state == "failed" and gitworld.okf_branches() == []
    await harvest.close()


async def test_an_unrelated_move_rebases_the_delta_onto_the_new_head(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    moved = gitworld.operator_commit("knowledge/ops/runbook.md", "# Runbook\n\nRestart it.\n", "ops runbook")
    item = await harvest.approve(run_id)
    r = receipt(harvest, source_id, run_id)
    assert item.state == "delivered" and r["rebased"] is True and r["baseHead"] == moved
    assert git(gitworld.remote, "rev-parse", f"{r['commit']}^") == moved
    changed = git(gitworld.remote, "diff-tree", "-r", "--name-only", "--no-commit-id", r["commit"]).splitlines()
    assert "knowledge/ops/runbook.md" not in changed
    head = gitworld.review(r["branch"], "merge")
    await harvest.recheck(run_id)
    assert receipt(harvest, source_id, run_id)["acceptedCommit"] == head
    await harvest.close()


async def test_a_push_the_remote_refuses_fails_with_gits_own_words(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    gitworld.refuse_pushes("knowledge changes need a signed review")
    with pytest.raises(OkfError) as caught:
        await harvest.approve(run_id)
    assert caught.value.code == "E_PR"
    assert "knowledge changes need a signed review" in str(caught.value)
    assert "pre-receive hook declined" in str(caught.value)
    [item] = await harvest.queue()
    assert item.state == "failed" and any("signed review" in p for p in item.problems)
    assert gitworld.okf_branches() == []
    await harvest.close()


async def test_a_deleted_branch_is_reported_as_unknown_and_the_operator_rejects_it(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.approve(run_id)
    gitworld.delete_branch(receipt(harvest, source_id, run_id)["branch"])
    [item] = await harvest.recheck()
    assert item.state == "delivered" and receipt(harvest, source_id, run_id)["status"] == "delivered"
    [g] = item.git
    assert "is gone from the repository" in (g.upstream or "") and "no commit on main" in (g.upstream or "")
    assert "merged it with edits, or deleted it without merge" in (g.upstream or "")
    item = await harvest.reject(run_id, "the reviewer deleted it")
    assert item.state == "rejected" and item.reason == "the reviewer deleted it"
    assert receipt(harvest, source_id, run_id)["status"] == "rejected"
    assert harvest.state.status(source_id)["processed"] == []
    again = await harvest.rejudge(run_id)
    assert again.state == "pending" and again.attempt == 2
    item = await harvest.approve(run_id)
    assert item.state == "delivered"
    assert receipt(harvest, source_id, run_id)["branch"] == f"okf/{run_id}-a2-project-knowledge"
    await harvest.close()


async def test_a_squash_with_edits_then_deletion_is_unknown_until_the_operator_accepts_it(gitworld: GitWorld,
                                                                                         tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.approve(run_id)
    r = receipt(harvest, source_id, run_id)
    proposal = json.loads(Path(r["proposal"]).read_text())
    concept = next(p for p in proposal["changed"] if "/decisions/" in p)
    rv = gitworld.reviewer
    git(rv, "fetch", "--quiet", "origin")
    git(rv, "checkout", "--quiet", "main")
    git(rv, "reset", "--quiet", "--hard", "origin/main")
    git(rv, "merge", "--quiet", "--squash", f"origin/{r['branch']}")
    target = rv / "knowledge" / concept
    target.write_text(target.read_text() + "\nReviewer's clarification.\n")
    git(rv, "add", ".")
    git(rv, "commit", "--quiet", "-m", "Squashed with edits")
    git(rv, "push", "--quiet", "origin", "main")
    gitworld.delete_branch(r["branch"])
    [item] = await harvest.recheck()
    assert item.state == "delivered" and item.git[0].upstream  # not asserted rejected: unknown
    assert harvest.state.status(source_id)["processed"]  # nothing taken back before the operator decides
    assert await harvest.recheck() == []  # checking again changes nothing
    head = gitworld.remote_head()
    item = await harvest.confirm_merged(run_id)
    r = receipt(harvest, source_id, run_id)
    assert item.state == "approved" and r["status"] == "accepted" and r["acceptedCommit"] == head
    assert r["mergedAs"] == {"commit": head, "how": "confirmed by the operator"}
    assert f"{run_id}/project" in harvest.state.status(source_id)["accepted"]
    with pytest.raises(OkfError):
        await harvest.confirm_merged(run_id)
    await harvest.close()


async def test_gh_opens_a_same_repository_pr_once_and_a_closed_pr_is_rejected(gitworld: GitWorld, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    stand_in_gh(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    item = await harvest.approve(run_id)
    r = receipt(harvest, source_id, run_id)
    assert r["pr"]["url"] == "https://github.com/example/project/pull/1" and r["pr"]["state"] == "OPEN"
    assert item.git[0].pr_url == r["pr"]["url"] and item.git[0].review is None
    creates = [c for c in gh_calls(bin_dir) if c[:2] == ["pr", "create"]]
    assert len(creates) == 1
    create = creates[0]
    assert gh_flag(create, "--repo") == "example/project"
    assert gh_flag(create, "--head") == r["branch"] and gh_flag(create, "--base") == "main"
    assert "promote" in gh_flag(create, "--body")
    assert not any("--fork" in c or "--force" in c for call in gh_calls(bin_dir) for c in call)
    set_pr_state(bin_dir, "CLOSED")
    [item] = await harvest.recheck()
    assert item.state == "rejected" and "closed without merge" in (item.reason or "")
    await harvest.close()


async def test_gh_not_signed_in_records_the_branch_and_how_to_open_the_review(gitworld: GitWorld, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    stand_in_gh(bin_dir, signed_in=False)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.approve(run_id)
    r = receipt(harvest, source_id, run_id)
    assert r["pr"] is None
    assert f"https://github.com/example/project/compare/main...{r['branch']}" in r["review"]
    assert [c[:2] for c in gh_calls(bin_dir)] == [["auth", "status"]]
    await harvest.close()


async def test_the_knowledge_already_delivered_is_not_judged_twice(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.approve(run_id)
    home = tmp_path / "homes" / "expert"
    (home / "notes" / "export.md").write_text(LIMIT)
    await harvest.capture_now(source_id)
    queue = await harvest.queue()
    assert [i.state for i in queue].count("delivered") == 1 and len(queue) == 2
    await harvest.close()


async def test_okf_init_for_git_writes_a_staged_proposal_and_never_pushes(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest = await open_harvest(tmp_path)
    before = git(gitworld.remote, "for-each-ref")
    descriptor = await harvest.propose_git_base(tmp_path / "new-stage", {"lead": {"path": "lead", "owner": "lead-id"}},
                                                base_id="new-knowledge")
    assert descriptor.id == "new-knowledge"
    assert json.loads((tmp_path / "new-stage" / "okf-base.json").read_text())["id"] == "new-knowledge"
    assert (tmp_path / "new-stage" / "lead" / "index.md").is_file()
    assert git(gitworld.remote, "for-each-ref") == before
    assert "project" not in harvest.bindings.bases  # a proposal binds nothing
    with pytest.raises(OkfError):
        await harvest.propose_git_base(tmp_path / "new-stage", {"lead": {"path": "lead", "owner": "lead-id"}},
                                       base_id="new-knowledge")
    await harvest.close()


async def test_binding_a_repository_whose_branch_has_no_base_is_refused(gitworld: GitWorld, tmp_path: Path) -> None:
    harvest = await open_harvest(tmp_path)
    with pytest.raises(OkfError) as caught:
        await harvest.bind_git_base("other", repository=str(gitworld.remote), root="elsewhere", accepted_branch="main",
                                    pr_repository="example/project")
    assert "okf-base.json" in str(caught.value)
    with pytest.raises(OkfError) as caught:
        await harvest.bind_git_base("gone", repository=str(tmp_path / "missing.git"), root="knowledge",
                                    accepted_branch="main", pr_repository="example/project")
    assert caught.value.code == "E_BASE_UNAVAILABLE"
    assert set(harvest.bindings.bases) == set()
    await harvest.close()
