"""The review step of Git custody: a same-repository pull request through ``gh``, or how to open one.

``PullRequests.available()`` is true only when ``pr.repository`` names a GitHub repository
(``owner/name``, ``github.com/owner/name`` or its ``https://`` URL), ``gh`` is on ``PATH`` and
``gh auth status`` says it is signed in. Then ``open`` finds the PR already open for the branch
(so a retry after a kill never opens a second one) or creates it with ``gh pr create``, and
``view`` reads its state. Otherwise the pushed branch is the proposal and ``how_to_review`` says how
to open the review by hand. There is no fork routing: head and base are branches of one repository.
``gh`` keeps its own credentials; the workbench passes none.

No value reaches ``gh`` as an option: every flag's value is written ``--flag=value`` (one argument,
whatever the value starts with), the pull request named to ``gh pr view`` follows ``--``, and ``gh``
runs without inherited ``GH_REPO``/``GH_HOST`` variables that would point it elsewhere; what
``gh`` prints on a failure has URL user information taken out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from ...text import redact_urls
from .errors import OkfError
from .shapes import PullRequest

__all__ = ["PullRequests", "PR_FIELDS", "github_repository", "how_to_review"]

PR_FIELDS = "number,url,state,headRefOid,baseRefName,headRefName,mergedAt,mergeCommit"
"""The pull-request fields a receipt records (OKF's ``pr``)."""
GH_TIMEOUT_S = 120.0
"""The longest one ``gh`` command may run."""
_REDIRECTING_ENV = frozenset({"GH_REPO", "GH_HOST"})
"""Inherited variables that would send ``gh`` to another repository or host (``pr.repository`` names a
github.com repository); ``gh`` runs without them, with its own configuration and credentials."""
_OWNER_NAME = re.compile(r"^(?:(?:https?://)?(?:www\.)?github\.com/)?([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100}?)(?:\.git)?/?$")


def github_repository(value: str) -> str | None:
    """``owner/name`` when ``value`` names a GitHub repository, else None."""
    match = _OWNER_NAME.match(value.strip())
    return f"{match.group(1)}/{match.group(2)}" if match else None


def how_to_review(pr_repository: str, branch: str, accepted_branch: str) -> str:
    """What the pane says when no PR was opened: how to open the review of ``branch`` by hand."""
    repo = github_repository(pr_repository)
    if repo is not None:
        return (f"open a pull request from {branch} into {accepted_branch}: "
                f"https://github.com/{repo}/compare/{accepted_branch}...{branch}?expand=1 "
                f"(or sign in with `gh auth login` and press j)")
    return (f"open a review (pull or merge request) from {branch} into {accepted_branch} in {pr_repository}; "
            "it counts once the merge is on the accepted branch")


def _pr_of(data: Mapping[str, object]) -> PullRequest:
    merge = data.get("mergeCommit")
    return {"number": data.get("number"), "url": data.get("url"), "state": data.get("state"),
            "headRefOid": data.get("headRefOid"), "baseRefName": data.get("baseRefName"),
            "headRefName": data.get("headRefName"), "mergedAt": data.get("mergedAt"),
            "mergeCommit": merge.get("oid") if isinstance(merge, dict) else merge}


class PullRequests:
    """``gh`` for one GitHub repository."""

    def __init__(self, pr_repository: str) -> None:
        self.repository = github_repository(pr_repository)

    def _gh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**{k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV}, "GH_PROMPT_DISABLED": "1",
               "NO_COLOR": "1"}
        try:
            proc = subprocess.run(["gh", *args], capture_output=True, text=True, env=env, timeout=GH_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OkfError(redact_urls(f"gh {args[0]} {args[1] if len(args) > 1 else ''} failed: {exc}"),
                           code="E_PR") from None
        if check and proc.returncode != 0:
            words = redact_urls(proc.stderr.strip() or proc.stdout.strip())[:2000]
            raise OkfError(f"gh {' '.join(args[:2])} failed: {words or f'exit {proc.returncode}'}", code="E_PR")
        return proc

    def available(self) -> bool:
        """A GitHub repository, ``gh`` installed and signed in."""
        if self.repository is None or shutil.which("gh") is None:
            return False
        return self._gh("auth", "status", "--hostname=github.com", check=False).returncode == 0

    def find(self, branch: str) -> PullRequest | None:
        """The PR (any state) whose head is ``branch``, or None."""
        proc = self._gh("pr", "list", f"--repo={self.repository}", f"--head={branch}", "--state=all",
                        f"--json={PR_FIELDS}", "--limit=1")
        try:
            found = json.loads(proc.stdout or "[]")
        except ValueError:
            raise OkfError(f"gh pr list answered what is not JSON: {proc.stdout[:200]}", code="E_PR") from None
        return _pr_of(found[0]) if isinstance(found, list) and found and isinstance(found[0], dict) else None

    def open(self, branch: str, accepted_branch: str, title: str, body: str) -> PullRequest:
        """The PR for ``branch`` into ``accepted_branch``: the existing one, or a new one."""
        existing = self.find(branch)
        if existing is not None:
            return existing
        self._gh("pr", "create", f"--repo={self.repository}", f"--base={accepted_branch}", f"--head={branch}",
                 f"--title={title}", f"--body={body}")
        created = self.find(branch)
        if created is None:
            raise OkfError(f"gh pr create reported success but no PR for {branch} is listed", code="E_PR")
        return created

    def view(self, pr: PullRequest) -> PullRequest:
        """The PR's current state."""
        proc = self._gh("pr", "view", f"--repo={self.repository}", f"--json={PR_FIELDS}", "--",
                        str(pr.get("number") or pr.get("url")))
        try:
            return _pr_of(json.loads(proc.stdout))
        except (ValueError, AttributeError):
            raise OkfError(f"gh pr view answered what is not JSON: {proc.stdout[:200]}", code="E_PR") from None
