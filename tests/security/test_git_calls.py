"""Every ``git`` and ``gh`` call the services make, against values that look like options.

Each row is one call (or one place a binding's value enters calls), run with the real ``git`` on a
real repository: a value that starts with ``-``, a remote helper (``ext::``) or an option that
writes a file (``--output=``). A row either refuses the value before git runs (``refused``: an
``OkfError`` with ``E_CONFIG`` or ``E_RECOVERY``), refuses only the values that start with ``-``
(``dash``), or hands it to git after ``--``/``--end-of-options`` where it is a harmless name
(``harmless``: git may fail, with its own words). In every case the marker file a command would
create stays absent. ``gh`` is a stand-in that records its argv: each value must be one
``--flag=value`` argument or follow ``--``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.clock import FakeClock
from services.knowledge.okf import GitBinding, Harvest, LocalJudgeClient, OkfError, parse_bindings
from services.knowledge.okf.git import GitBase, check_branch_name, run_git, seed_repository
from services.knowledge.okf.git_acceptance import _carrier, _changes, _is_ancestor, check_delivery
from services.knowledge.okf.git_delivery import GitProvider
from services.knowledge.okf.git_pr import PullRequests
from tests.services.knowledge.okf.gitworld import (GitWorld, bind_project, gh_calls, hermetic_git, make_git_world,
                                                   stand_in_gh)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

HOSTILE = ["--upload-pack=touch {marker}", "-c core.sshCommand=touch {marker}", "ext::sh -c touch% {marker}",
           "--output={marker}"]


@dataclass
class Ctx:
    tmp: Path
    world: GitWorld
    harvest: Harvest
    marker: Path
    gh_dir: Path

    @property
    def base(self) -> GitBase:
        return self.harvest.runs.git_base("project")

    def head(self) -> str:
        base = self.base
        with base.locked():
            return base.fetch()

    async def bind(self, **values: str) -> None:
        args = {"repository": str(self.world.remote), "root": "knowledge", "accepted_branch": "main",
                "pr_repository": "example/project", **values}
        await self.harvest.bind_git_base("other", base_id="other-knowledge", **args)


def _bindings_file(ctx: Ctx, value: str) -> None:
    doc = {"version": 1, "stateDir": "state", "bases": {"p": {
        "id": "p", "kind": "git", "repository": value, "root": "knowledge", "acceptedBranch": "main",
        "pr": {"repository": "example/project"}}}}
    parse_bindings(doc, ctx.tmp / "bindings" / "okf-bindings.json", check_paths=False)


def _made_in_code(ctx: Ctx, value: str) -> None:
    GitBase(GitBinding("p", "p", value, "knowledge", "main", "example/project"), ctx.tmp / "state", ctx.tmp)


def _fetch_branch(ctx: Ctx, value: str) -> None:
    base = ctx.base
    base.accepted_branch = value
    with base.locked():
        base.fetch()


def _entries(ctx: Ctx, value: str) -> None:
    base = ctx.base
    with base.locked():
        base.read_tree(value)  # ls-tree, then cat-file --batch


def _proposal_commit(ctx: Ctx, value: str) -> None:
    provider = GitProvider(ctx.base)
    with provider.base.locked():
        provider._commit_tree(_Delta(), value, "run", "2027-01-15T10:00:00Z")  # ls-tree, read-tree, commit-tree


def _proposal_check(ctx: Ctx, value: str) -> None:
    provider = GitProvider(ctx.base)
    head = ctx.head()
    with provider.base.locked():
        provider.base.git("update-ref", "--", "refs/heads/okf/t", head)
        provider._commit(_Delta(), {"branch": "okf/t", "baseHead": value}, lambda r: None, "run")  # diff-tree


def _push(ctx: Ctx, value: str) -> None:
    provider = GitProvider(ctx.base)
    with provider.base.locked():
        provider._push({"branch": "okf/t", "commit": value}, lambda r: None)  # ls-remote, push


def _acceptance(ctx: Ctx, value: str) -> None:
    check_delivery(ctx.base, {"status": "delivered", "commit": value, "baseHead": value, "branch": "okf/t"}, None, at=0)


def _scan(ctx: Ctx, value: str) -> None:
    head = ctx.head()
    base = ctx.base
    with base.locked():
        _carrier(base, {"commit": head, "baseHead": value}, head)  # merge-base, rev-list


def _diff(ctx: Ctx, value: str) -> None:
    ctx.head()
    with ctx.base.locked():
        _changes(ctx.base, value, value)


def _ancestor(ctx: Ctx, value: str) -> None:
    ctx.head()
    with ctx.base.locked():
        _is_ancestor(ctx.base, value, value)


def _seed(ctx: Ctx, value: str) -> None:  # init, hash-object, update-index, write-tree, commit-tree, update-ref, symbolic-ref
    seed_repository(ctx.tmp / "seeds" / value, {"a.md": b"a\n"}, branch=value, message=value, at=1_800_000_000)


class _Delta:
    changed: list[str] = []
    after: dict[str, bytes] = {}


def _ls_remote_any(ctx: Ctx, value: str) -> None:
    run_git(["ls-remote", "--", value], check=False)  # the transport policy itself: ext:: is never run


async def _sync(fn: Callable[[Ctx, str], None], ctx: Ctx, value: str) -> None:
    fn(ctx, value)


ROWS: list[tuple[str, str, Callable[[Ctx, str], Awaitable[None]]]] = [
    ("bind: repository (fetch, ls-remote, push)", "refused", lambda c, v: c.bind(repository=v)),
    ("bind: acceptedBranch (fetch refspec, check-ref-format)", "refused", lambda c, v: c.bind(accepted_branch=v)),
    ("bind: root (ls-tree pathspec)", "dash", lambda c, v: c.bind(root=v)),
    ("bind: pr.repository (gh --repo)", "dash", lambda c, v: c.bind(pr_repository=v)),
    ("bindings file: repository", "refused", lambda c, v: _sync(_bindings_file, c, v)),
    ("GitBase over a binding made in code", "refused", lambda c, v: _sync(_made_in_code, c, v)),
    ("git check-ref-format (branch names)", "refused", lambda c, v: _sync(lambda c2, v2: check_branch_name(v2, "x"), c, v)),
    ("git fetch (accepted branch refspec)", "harmless", lambda c, v: _sync(_fetch_branch, c, v)),
    ("git rev-parse (has_ref)", "harmless", lambda c, v: _sync(lambda c2, v2: c2.base.has_ref(v2), c, v)),
    ("git rev-parse (rev)", "harmless", lambda c, v: _sync(lambda c2, v2: c2.base.rev(v2), c, v)),
    ("git ls-tree + cat-file (read_tree)", "harmless", lambda c, v: _sync(_entries, c, v)),
    ("git ls-remote (remote_branch)", "harmless", lambda c, v: _sync(lambda c2, v2: c2.base.remote_branch(v2), c, v)),
    ("git ls-tree/read-tree/commit-tree (proposal commit)", "harmless", lambda c, v: _sync(_proposal_commit, c, v)),
    ("git diff-tree (proposal commit check)", "refused", lambda c, v: _sync(_proposal_check, c, v)),
    ("git push (proposal branch)", "refused", lambda c, v: _sync(_push, c, v)),
    ("git diff-tree (acceptance)", "refused", lambda c, v: _sync(_diff, c, v)),
    ("git merge-base (acceptance)", "refused", lambda c, v: _sync(_ancestor, c, v)),
    ("git rev-list (squash scan)", "refused", lambda c, v: _sync(_scan, c, v)),
    ("check_delivery (a receipt from the state dir)", "refused", lambda c, v: _sync(_acceptance, c, v)),
    ("git init/hash-object/update-index/write-tree/commit-tree/update-ref/symbolic-ref (seed)", "harmless",
     lambda c, v: _sync(_seed, c, v)),
    ("git ls-remote of any value (transport policy)", "harmless", lambda c, v: _sync(_ls_remote_any, c, v)),
    ("gh pr list (find)", "harmless", lambda c, v: _sync(lambda c2, v2: PullRequests("example/project").find(v2), c, v)),
    ("gh pr create (open)", "harmless",
     lambda c, v: _sync(lambda c2, v2: PullRequests("example/project").open(v2, v2, v2, v2), c, v)),
    ("gh pr view (view)", "harmless",
     lambda c, v: _sync(lambda c2, v2: PullRequests("example/project").view({"number": v2}), c, v)),
]


@pytest.fixture
async def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ctx:
    hermetic_git(monkeypatch, tmp_path)
    gh_dir = tmp_path / "bin"
    stand_in_gh(gh_dir)
    monkeypatch.setenv("PATH", f"{gh_dir}:{os.environ['PATH']}")
    world = make_git_world(tmp_path)
    harvest = await Harvest.open(tmp_path / "knowledge", ChangeFeed(), LocalJudgeClient(), clock=FakeClock())
    await bind_project(harvest, world)
    monkeypatch.chdir(tmp_path)
    context = Ctx(tmp_path, world, harvest, tmp_path / "marker", gh_dir)
    yield context
    await harvest.close()


@pytest.mark.parametrize("template", HOSTILE)
@pytest.mark.parametrize("name,expect,call", ROWS, ids=[r[0] for r in ROWS])
async def test_no_git_or_gh_call_takes_a_value_as_an_option(ctx: Ctx, name: str, expect: str,
                                                              call: Callable[[Ctx, str], Awaitable[None]],
                                                              template: str) -> None:
    value = template.format(marker=ctx.marker)
    bound_before = dict(ctx.harvest.bindings.bases)
    try:
        await call(ctx, value)
        error: OkfError | None = None
    except OkfError as exc:
        error = exc
    refused = expect == "refused" or (expect == "dash" and value.startswith("-"))
    if refused:
        assert error is not None and error.code in ("E_CONFIG", "E_RECOVERY"), (name, value, error)
        assert ctx.harvest.bindings.bases == bound_before
    assert not ctx.marker.exists(), f"{name}: {value!r} ran a command or wrote a file"
    for call_argv in gh_calls(ctx.gh_dir):
        for i, arg in enumerate(call_argv):
            if value in arg and arg != value:
                assert arg.startswith("--") and arg.split("=", 1)[1].endswith(value), (name, call_argv)
            elif arg == value:
                assert "--" in call_argv[:i], (name, call_argv)


async def test_git_runs_without_inherited_variables_that_redirect_it(ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GIT_CONFIG_PARAMETERS`` (what ``git -c`` exports), ``GIT_DIR`` and ``GIT_INDEX_FILE`` from the
    environment never reach the workbench's git: a fetch still reads the bound repository into the
    private cache, and the ssh command the variable names is never run."""
    other = ctx.tmp / "elsewhere.git"
    run_git(["init", "--quiet", "--bare", "--", str(other)])
    expected = ctx.world.remote_head()
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.sshcommand'='touch {ctx.marker}; false'")
    monkeypatch.setenv("GIT_DIR", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(ctx.tmp / "stray-index"))
    head = ctx.head()
    assert head == expected
    assert run_git(["for-each-ref"], git_dir=other).stdout == b""  # nothing went to GIT_DIR's repository
    with pytest.raises(OkfError):
        run_git(["ls-remote", "--", "ssh://example.invalid/r.git"])
    assert not ctx.marker.exists() and not (ctx.tmp / "stray-index").exists()
