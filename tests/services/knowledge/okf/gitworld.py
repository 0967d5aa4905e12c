"""Real Git repositories for Git custody tests: a bare remote, the operator's clone, a reviewer's clone.

Every git command runs hermetically: ``HOME`` is a temp folder, no system or global config is read,
and author and committer are fixed by environment. ``hermetic_git`` sets that environment for the
test (the workbench's own git commands inherit it, as they would the operator's).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.knowledge.okf import Harvest, SoulDecl, init_git_proposal

NODES = {"expert": {"path": "expert", "owner": "expert-id"}, "ops": {"path": "ops", "owner": "ops-id"}}
SOUL = SoulDecl("expert-id", ("project/expert",), ("project/ops",))
DECISION = "We decided to cap retries at 3 because the upstream rate limit bans clients that retry more.\n"
LIMIT = "The export endpoint fails when a page holds more than 500 rows; page at 400.\n"

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test Operator", "GIT_AUTHOR_EMAIL": "operator@example.test",
    "GIT_COMMITTER_NAME": "Test Operator", "GIT_COMMITTER_EMAIL": "operator@example.test",
    "GIT_AUTHOR_DATE": "2027-01-15T10:00:00Z", "GIT_COMMITTER_DATE": "2027-01-15T10:00:00Z",
}


def hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A temp ``HOME`` with an empty global config, fixed identities, no system config."""
    home = tmp_path / "git-home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run git in ``cwd``; its stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}{proc.stdout}")
    return proc.stdout.strip()


@dataclass
class GitWorld:
    """A bare remote holding a Git base at ``knowledge/``, the operator's clone and a reviewer's clone."""

    tmp: Path
    remote: Path
    operator: Path
    reviewer: Path

    def remote_head(self, branch: str = "main") -> str:
        return git(self.remote, "rev-parse", f"refs/heads/{branch}")

    def okf_branches(self) -> list[str]:
        out = git(self.remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/okf/")
        return [line for line in out.splitlines() if line]

    def operator_commit(self, path: str, text: str, message: str) -> str:
        """The operator changes ``path`` on main and pushes (the accepted head moves)."""
        git(self.operator, "pull", "--quiet", "--ff-only", "origin", "main")
        target = self.operator / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        git(self.operator, "add", path)
        git(self.operator, "commit", "--quiet", "-m", message)
        git(self.operator, "push", "--quiet", "origin", "main")
        return git(self.operator, "rev-parse", "HEAD")

    def review(self, branch: str, how: str) -> str:
        """The reviewer merges ``branch`` into main (``merge``, ``squash`` or ``rebase``); the new main head."""
        r = self.reviewer
        git(r, "fetch", "--quiet", "origin")
        git(r, "checkout", "--quiet", "main")
        git(r, "reset", "--quiet", "--hard", "origin/main")
        if how == "merge":
            git(r, "merge", "--quiet", "--no-ff", "-m", f"Merge {branch}", f"origin/{branch}")
        elif how == "squash":
            git(r, "merge", "--quiet", "--squash", f"origin/{branch}")
            git(r, "commit", "--quiet", "-m", f"Squashed {branch}")
        elif how == "rebase":
            (r / "NOTES.txt").write_text("an unrelated change the reviewer lands first\n")
            git(r, "add", "NOTES.txt")
            git(r, "commit", "--quiet", "-m", "unrelated")
            git(r, "checkout", "--quiet", "-b", "rebasing", f"origin/{branch}")
            git(r, "-c", "user.name=Reviewer", "-c", "user.email=reviewer@example.test", "rebase", "--quiet", "main")
            git(r, "checkout", "--quiet", "main")
            git(r, "merge", "--quiet", "--ff-only", "rebasing")
            git(r, "branch", "--quiet", "-D", "rebasing")
        else:
            raise ValueError(how)
        git(r, "push", "--quiet", "origin", "main")
        return git(r, "rev-parse", "HEAD")

    def delete_branch(self, branch: str) -> None:
        """The reviewer deletes the proposal branch without merging it."""
        git(self.reviewer, "push", "--quiet", "origin", "--delete", branch)

    def refuse_pushes(self, words: str) -> None:
        """A pre-receive hook on the remote that refuses every push with ``words``."""
        hook = self.remote / "hooks" / "pre-receive"
        hook.write_text(f"#!/bin/sh\necho '{words}' >&2\nexit 1\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


def make_git_world(tmp: Path) -> GitWorld:
    """The remote, with the base ``okf init`` proposed merged into main at ``knowledge/``."""
    remote, operator, reviewer = tmp / "remote.git", tmp / "operator", tmp / "reviewer"
    git(tmp, "init", "--quiet", "--bare", "-b", "main", str(remote))
    git(tmp, "clone", "--quiet", str(remote), str(operator))
    git(operator, "checkout", "--quiet", "-b", "main")
    (operator / "README.md").write_text("# project\n")
    init_git_proposal(tmp / "stage", "project-knowledge", NODES, at=1_800_000_000.0)
    os.rename(tmp / "stage", operator / "knowledge")
    git(operator, "add", ".")
    git(operator, "commit", "--quiet", "-m", "Add the knowledge base (okf init proposal)")
    git(operator, "push", "--quiet", "origin", "main")
    git(tmp, "clone", "--quiet", str(remote), str(reviewer))
    return GitWorld(tmp, remote, operator, reviewer)


async def bind_project(harvest: Harvest, world: GitWorld, pr_repository: str = "example/project") -> None:
    """Bind the remote as base ``project``."""
    await harvest.bind_git_base("project", repository=str(world.remote), root="knowledge", accepted_branch="main",
                                pr_repository=pr_repository, base_id="project-knowledge")


def stand_in_gh(folder: Path, *, signed_in: bool = True) -> Path:
    """A ``gh`` on ``folder`` that records its argv (``gh-calls.jsonl``) and keeps PRs in ``gh-prs.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "gh"
    script.write_text(f"""#!{sys.executable}
import json, sys
from pathlib import Path
here = Path({str(folder)!r})
raw = sys.argv[1:]
args = []
for arg in raw:  # gh takes --flag=value and --flag value alike; record the second form
    if arg.startswith("--") and "=" in arg:
        args.extend(arg.split("=", 1))
    elif arg != "--":
        args.append(arg)
with open(here / "gh-calls.jsonl", "a") as f:
    f.write(json.dumps(raw) + "\\n")
prs_file = here / "gh-prs.json"
prs = json.loads(prs_file.read_text()) if prs_file.exists() else []
if args[:2] == ["auth", "status"]:
    sys.exit(0 if {signed_in!r} else 1)
if args[:2] == ["pr", "list"]:
    head = args[args.index("--head") + 1]
    print(json.dumps([p for p in prs if p["headRefName"] == head][:1]))
    sys.exit(0)
if args[:2] == ["pr", "create"]:
    repo = args[args.index("--repo") + 1]
    number = len(prs) + 1
    pr = {{"number": number, "url": f"https://github.com/{{repo}}/pull/{{number}}", "state": "OPEN",
          "headRefOid": "", "baseRefName": args[args.index("--base") + 1],
          "headRefName": args[args.index("--head") + 1], "mergedAt": None, "mergeCommit": None,
          "body": args[args.index("--body") + 1]}}
    prs.append(pr)
    prs_file.write_text(json.dumps(prs))
    print(pr["url"])
    sys.exit(0)
if args[:2] == ["pr", "view"]:
    wanted = args[-1]
    print(json.dumps(next(p for p in prs if str(p["number"]) == wanted or p["url"] == wanted)))
    sys.exit(0)
print("unexpected gh call", args, file=sys.stderr)
sys.exit(2)
""")
    script.chmod(0o755)
    return script


def gh_calls(folder: Path) -> list[list[str]]:
    """Every argv the stand-in ``gh`` was called with."""
    file = folder / "gh-calls.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def gh_flag(call: list[str], name: str) -> str:
    """The value of ``--name`` in one recorded ``gh`` argv (written ``--name=value`` or ``--name value``)."""
    for i, arg in enumerate(call):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return call[i + 1]
    raise AssertionError(f"{name} not in {call}")


def set_pr_state(folder: Path, state: str) -> None:
    """Change every recorded PR's state (``CLOSED``: closed without merge)."""
    file = folder / "gh-prs.json"
    prs = json.loads(file.read_text())
    for pr in prs:
        pr["state"] = state
    file.write_text(json.dumps(prs))
