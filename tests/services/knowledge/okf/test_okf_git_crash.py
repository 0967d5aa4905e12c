"""Kill -9 at each step of a Git delivery: the next open finishes it, with one branch, one commit, one PR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .gitworld import GitWorld, gh_calls, git, hermetic_git, make_git_world, stand_in_gh
from .test_okf_git_custody import open_harvest, pending_judgment, receipt

pytestmark = pytest.mark.skipif(__import__("shutil").which("git") is None, reason="git is not installed")

ROOT = Path(__file__).resolve().parents[4]

APPROVE_AND_DIE = """
import asyncio, os, signal, sys
from pathlib import Path
from services.changes import ChangeFeed
from services.clock import FakeClock
from services.knowledge.okf import Harvest, LocalJudgeClient

root, run_id, step = sys.argv[1:4]


async def main() -> None:
    harvest = await Harvest.open(Path(root), ChangeFeed(), LocalJudgeClient(), clock=FakeClock())

    def hook(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    harvest.runs.step_hook = hook
    await harvest.approve(run_id)


asyncio.run(main())
"""

STEPS = ["fetched", "commit-intent", "commit-made", "committed", "push-intent", "push-landed", "pushed", "pr-intent",
         "delivered"]


@pytest.fixture
def gitworld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitWorld:
    hermetic_git(monkeypatch, tmp_path)
    stand_in_gh(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return make_git_world(tmp_path)


@pytest.mark.parametrize("step", STEPS)
async def test_a_kill_at_each_step_recovers_at_the_next_open_without_a_second_branch_or_commit(
        gitworld: GitWorld, tmp_path: Path, step: str) -> None:
    harvest, source_id, run_id = await pending_judgment(tmp_path, gitworld)
    await harvest.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", APPROVE_AND_DIE, str(tmp_path / "knowledge"), run_id, step],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    cache = tmp_path / "knowledge" / "state" / "git" / "project.git"
    if step == "fetched":  # what a fetch killed part way leaves: git's ref locks in the cache
        (cache / "refs" / "okf" / "accepted.lock").write_text("")
        (cache / "packed-refs.lock").write_text("")
    harvest = await open_harvest(tmp_path)
    [item] = await harvest.queue()
    assert item.state == "delivered", item.problems
    r = receipt(harvest, source_id, run_id)
    assert gitworld.okf_branches() == [r["branch"]]
    assert git(gitworld.remote, "rev-list", "--count", f"main..{r['branch']}") == "1"
    made = git(cache, "log", "--all", "--author=OKF harvest", "--format=%H").split()
    assert made == [r["commit"]]
    assert len([c for c in gh_calls(tmp_path / "bin") if c[:2] == ["pr", "create"]]) == 1
    assert r["pr"]["url"].endswith("/pull/1")
    head = gitworld.review(r["branch"], "merge")
    [item] = await harvest.recheck()
    assert item.state == "approved" and receipt(harvest, source_id, run_id)["acceptedCommit"] == head
    await harvest.close()
