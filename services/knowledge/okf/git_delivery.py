"""Git custody delivery (``GitProvider``): a verified delta committed on a new branch, pushed, reviewed.

The receipt walks OKF's Git ladder, persisted before each step's effect so a kill anywhere resumes
at the next open without a second branch or commit:

1. ``validated``: fetch the accepted branch (never a working tree: the private bare cache of
   ``git.GitBase``); compare its files under ``root`` with the proposal's baseline. A file the
   proposal changes that moved since staging makes the judgment stale (``E_BASELINE``, the paths
   named, nothing pushed); a move elsewhere rebases the delta onto the new head. The result must
   validate (strict) and, unmoved, add up to the proposal's ``afterDigest`` (``E_CONFIRM``).
2. ``commit-intent`` (branch, ``baseHead``, ``commitAt`` recorded): build the commit with plumbing
   (a temporary index from ``baseHead``, the changed blobs, ``write-tree``, ``commit-tree``) authored
   ``OKF harvest <okf@localhost>`` at ``commitAt`` with message ``okf-harvest: <run>``, so rebuilding
   it after a kill gives the same commit; record it as the cache's ``refs/heads/<branch>`` (create
   only) and check that it changes exactly the proposal's paths under ``root``.
3. ``committed`` (``commit``) -> ``push-intent``: ``git push <repository> <commit>:refs/heads/<branch>``
   with no ``+`` and no ``--force``: never the accepted branch, never an existing branch moved.
   Before pushing, ``ls-remote`` says whether a killed push already landed. A refusal (a hook, a
   protected branch, no rights) fails the delivery with git's own words (``E_PR``); a push whose
   outcome is unknown leaves ``push-unknown`` for the retry.
4. ``pushed`` -> ``pr-intent``: with ``gh`` signed in and a GitHub ``pr.repository``, the open PR for
   the branch is found or created (``git_pr``); otherwise the pushed branch is the proposal and
   ``review`` says how to open it. -> ``delivered`` (``deliveredAt``).

There is no fallback to writing files: a Git base is only ever changed by a reviewed merge.
Acceptance is separate (``git_acceptance``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...times import parse_time
from ...clock import iso
from ...text import redact_urls
from .bundle import validate_tree
from .delivery import RecoveryOutcome, SaveReceipt, StepHook
from .errors import BaselineError, ConfirmError, OkfError, OkfPathError, RecoveryError
from .git import GitBase, check_branch_name, object_id
from .git_pr import PullRequests, how_to_review
from .limits import PathLimits, rel_path_problem
from .proposal import ProposalDelta, proposal_hash, read_proposal
from .shapes import Proposal, Receipt
from .tree import Tree, tree_digest

__all__ = ["GitProvider", "AUTHOR_NAME", "AUTHOR_EMAIL", "IN_FLIGHT", "branch_name", "SAMPLE_RUN_ID"]

AUTHOR_NAME = "OKF harvest"
"""Who the proposal commits are authored and committed by."""
AUTHOR_EMAIL = "okf@localhost"
"""Their e-mail."""
IN_FLIGHT = ("commit-intent", "committed", "push-intent", "push-unknown", "pushed", "pr-intent", "pr-unknown")
"""Git receipt statuses of a delivery that started and has not finished (resumed at the next open)."""
_ZERO = "0" * 40
_REFUSED = ("[rejected]", "[remote rejected]", "permission", "denied", "protected", "hook declined", "forbidden")


SAMPLE_RUN_ID = "00000000-0000-4000-8000-000000000000"
"""A run id shaped like every run's (a UUID), to check the proposal branches a base id makes."""


def branch_name(run_id: str, attempt: int, base_id: str) -> str:
    """The proposal branch: ``okf/<run>-<baseId>`` (``okf/<run>-a<attempt>-<baseId>`` for a rejudgment)."""
    return f"okf/{run_id}-{base_id}" if attempt <= 1 else f"okf/{run_id}-a{attempt}-{base_id}"


class GitProvider:
    """Git custody: fetch, baseline, one commit on a new branch, push that branch, open its review."""

    def __init__(self, base: GitBase, *, step_hook: StepHook | None = None) -> None:
        self.base = base
        self.alias = base.alias
        self.step_hook = step_hook
        self.prs = PullRequests(base.binding.pr_repository)

    def _step(self, name: str) -> None:
        if self.step_hook is not None:
            self.step_hook(name)

    def snapshot(self) -> tuple[Tree, str]:
        """The accepted files under ``root`` at the freshly fetched accepted head, and their digest."""
        with self.base.locked():
            head = self.base.fetch()
            self._step("fetched")
            tree = self.base.read_tree(head)
        self.base.tree = tree
        return tree, tree_digest(tree)

    def is_refusal(self, exc: OkfError) -> bool:
        """True when the delivery is refused for good (the judgment failed), not merely interrupted."""
        return exc.code in ("E_BASELINE", "E_PATH", "E_CONFIRM", "E_PR", "E_CONFIG") and not isinstance(exc, RecoveryError)

    def recover(self, complete: Callable[[RecoveryOutcome], None], *, at: float) -> RecoveryOutcome | None:
        """Nothing to recover in the base itself: an interrupted Git delivery resumes from its receipt."""
        return None

    # -- delivery ------------------------------------------------------------------------------

    def publish(self, proposal_file: Path, proposal: Proposal, receipt: Receipt,
                save: SaveReceipt, *, at: float, summary: str = "") -> Receipt:
        """Deliver ``proposal`` as a reviewed branch; returns the ``delivered`` receipt."""
        delta = read_proposal(dict(proposal))
        run_id, attempt = str(proposal["run"]), int(proposal.get("attempt") or 1)
        with self.base.locked():
            if receipt.get("status") in ("validated", "no-change"):
                self._plan(delta, proposal_file, proposal, receipt, save, run_id, attempt, at=at)
            if receipt["status"] == "commit-intent":
                self._commit(delta, receipt, save, run_id)
            if receipt["status"] == "committed":
                receipt["status"] = "push-intent"
                save(receipt)
                self._step("push-intent")
            if receipt["status"] in ("push-intent", "push-unknown"):
                self._push(receipt, save)
            if receipt["status"] == "pushed":
                receipt["status"] = "pr-intent"
                save(receipt)
                self._step("pr-intent")
            if receipt["status"] in ("pr-intent", "pr-unknown"):
                self._review(receipt, save, run_id, summary, at=at)
        if receipt["status"] != "delivered":
            raise RecoveryError(f"base {self.alias!r}: the Git delivery stopped at {receipt['status']!r}",
                                remedy="retry the delivery")
        return receipt

    def _plan(self, delta: ProposalDelta, proposal_file: Path, proposal: Proposal, receipt: Receipt,
              save: SaveReceipt, run_id: str, attempt: int, *, at: float) -> None:
        """Fetch, check the baseline (stale or rebased), verify the result, persist ``commit-intent``."""
        head = self.base.fetch()
        self._step("fetched")
        current = self.base.read_tree(head)
        self._target(delta, current, head)
        branch = check_branch_name(branch_name(run_id, attempt, self.base.binding.id), f"base {self.alias!r}")
        receipt.update({"status": "commit-intent", "proposal": str(proposal_file), "proposalHash": proposal_hash(proposal),
                        "branch": branch, "baseHead": head, "commitAt": iso(int(at)),
                        "rebased": tree_digest(current) != delta.before_digest})
        receipt.pop("error", None)
        save(receipt)
        self._step("commit-intent")

    def _target(self, delta: ProposalDelta, current: Tree, head: str) -> Tree:
        """The knowledge files once the delta is applied to ``current`` (stale or unverifiable: refused)."""
        if tree_digest(current) != delta.before_digest:
            touched = [p for p in delta.differing(current) if p in delta.changed]
            if touched:
                raise BaselineError(f"base {self.alias!r}: the accepted branch {self.base.accepted_branch!r} moved to "
                                    f"{head[:12]} and changed {', '.join(touched[:8])}, which this judgment changes too; "
                                    "nothing was pushed, rejudge it", remedy="rejudge this judgment against the new head")
        problems = [p for p in (rel_path_problem(path) or PathLimits().problem(path) for path in delta.changed) if p]
        if problems:
            raise OkfPathError(f"base {self.alias!r}: the proposal cannot be committed: {'; '.join(problems[:3])}",
                               remedy="reject or rejudge this judgment")
        target = delta.applied(current)
        if tree_digest(current) == delta.before_digest and tree_digest(target) != delta.after_digest:
            raise ConfirmError(f"base {self.alias!r}: the proposal's files do not add up to its after-state; "
                               "nothing was pushed", remedy="rejudge this judgment")
        already = set(map(str, validate_tree(current, strict=True)))  # the reviewers' business, not this judgment's
        findings = [f for f in validate_tree(target, strict=True) if str(f) not in already]
        if findings:
            raise ConfirmError(f"base {self.alias!r}: the proposal on the accepted head does not validate "
                               f"({'; '.join(map(str, findings[:3]))}); nothing was pushed",
                               remedy="rejudge this judgment")
        return target

    def _commit(self, delta: ProposalDelta, receipt: Receipt, save: SaveReceipt, run_id: str) -> None:
        """Make (or find, after a kill) the one proposal commit on ``baseHead``; persist ``committed``."""
        ref = f"refs/heads/{receipt['branch']}"
        commit = self.base.has_ref(ref)
        if commit is None:
            head = str(receipt["baseHead"])
            current = self.base.read_tree(head)
            self._target(delta, current, head)
            commit = self._commit_tree(delta, head, run_id, str(receipt["commitAt"]))
            self.base.git("update-ref", "--", ref, commit, _ZERO, what="git update-ref")
            self._step("commit-made")
        expected = sorted(self.base.prefix + p for p in delta.changed)
        changed = self.base.git("diff-tree", "-r", "--no-renames", "--name-only", "-z", "--end-of-options",
                                object_id(receipt["baseHead"], "baseHead"), object_id(commit, "commit"),
                                what="git diff-tree").stdout.decode("utf-8", "surrogateescape").split("\0")
        if sorted(p for p in changed if p) != expected:
            raise ConfirmError(f"base {self.alias!r}: the proposal commit {commit[:12]} does not change exactly the "
                               "proposal's files; nothing was pushed", remedy="rejudge this judgment")
        receipt.update({"status": "committed", "commit": commit})
        save(receipt)
        self._step("committed")

    def _commit_tree(self, delta: ProposalDelta, head: str, run_id: str, commit_at: str) -> str:
        """``commit-tree`` of ``head``'s tree with the delta applied under ``root``; the commit id."""
        entries = self.base.entries(head)
        lines = []
        for path in delta.changed:
            full = self.base.prefix + path
            data = delta.after.get(path)
            if data is None:
                lines.append(f"0 {_ZERO}\t{full}\n")
                continue
            blob = self.base.git("hash-object", "-w", "--stdin", input=data, what="git hash-object").stdout.decode().strip()
            mode = entries[path][0] if path in entries else "100644"
            lines.append(f"{mode} {blob}\t{full}\n")
        fd, index = tempfile.mkstemp(prefix="okf-index.", suffix=".tmp", dir=self.base.cache)
        os.close(fd)
        os.unlink(index)
        try:
            env = {"GIT_INDEX_FILE": index}
            self.base.git("read-tree", "--", object_id(head, "baseHead"), env=env, what="git read-tree")
            self.base.git("update-index", "--index-info", input="".join(lines).encode("utf-8", "surrogateescape"),
                          env=env, what="git update-index")
            tree = self.base.git("write-tree", env=env, what="git write-tree").stdout.decode().strip()
        finally:
            Path(index).unlink(missing_ok=True)
        when = f"@{int(parse_time(commit_at))} +0000"
        identity = {"GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL, "GIT_AUTHOR_DATE": when,
                    "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL, "GIT_COMMITTER_DATE": when}
        return self.base.git("commit-tree", "--no-gpg-sign", "-p", object_id(head, "baseHead"), "-m",
                             f"okf-harvest: {run_id}", "--", object_id(tree, "tree"), env=identity,
                             what="git commit-tree").stdout.decode().strip()

    def _push(self, receipt: Receipt, save: SaveReceipt) -> None:
        """Push the commit to the new branch only (no force); a landed earlier push is not repeated."""
        branch, commit = str(receipt["branch"]), str(receipt["commit"])
        if branch == self.base.accepted_branch:
            raise OkfError(f"base {self.alias!r}: refusing to push to the accepted branch {branch!r}", code="E_PR")
        there = self.base.remote_branch(branch)
        if there is None:
            proc = self.base.remote_git("push", "--porcelain", "--", self.base.repository,
                                        f"{object_id(commit, 'commit')}:refs/heads/{branch}", check=False,
                                        what="git push")
            if proc.returncode != 0:
                words = _git_words(proc.stderr, proc.stdout)
                if self.base.remote_branch(branch) != commit:
                    if any(mark in words.lower() for mark in _REFUSED):
                        receipt.update({"status": "committed", "error": words})
                        save(receipt)
                        raise OkfError(f"base {self.alias!r}: {self.base.repository} refused the push of {branch}: {words}",
                                       code="E_PR", remedy="fix what the repository refuses (its hook, branch "
                                                           "protection or your rights), then judge it again")
                    receipt.update({"status": "push-unknown", "error": words})
                    save(receipt)
                    raise RecoveryError(f"base {self.alias!r}: the push of {branch} did not finish: {words}",
                                        remedy="check the network and your git credentials, then retry the delivery")
            self._step("push-landed")
        elif there != commit:
            raise OkfError(f"base {self.alias!r}: {self.base.repository} already has a branch {branch} at "
                           f"{there[:12]}, not this judgment's commit {commit[:12]}; nothing was pushed", code="E_PR",
                           remedy="delete or rename that branch on the repository, then judge it again")
        receipt["status"] = "pushed"
        receipt.pop("error", None)
        save(receipt)
        self._step("pushed")

    def _review(self, receipt: Receipt, save: SaveReceipt, run_id: str, summary: str, *, at: float) -> None:
        """Open (or find) the PR, or record how to open the review; persist ``delivered``."""
        branch = str(receipt["branch"])
        pr = None
        if self.prs.available():
            try:
                pr = self.prs.open(branch, self.base.accepted_branch, f"okf-harvest: {run_id}",
                                   summary or f"Knowledge proposed by judgment {run_id}.")
            except OkfError as exc:
                receipt.update({"status": "pr-unknown", "error": exc.detail})
                save(receipt)
                raise RecoveryError(f"base {self.alias!r}: the pull request for {branch} could not be opened "
                                    f"({exc.detail})", remedy="retry the delivery; the pushed branch stays") from exc
        receipt.update({"status": "delivered", "pr": pr, "deliveredAt": iso(at),
                        "review": None if pr else how_to_review(self.base.binding.pr_repository, branch,
                                                                self.base.accepted_branch)})
        receipt.pop("error", None)
        save(receipt)
        self._step("delivered")


def _git_words(stderr: bytes | None, stdout: bytes | None) -> str:
    lines = [line for line in ((stderr or b"") + b"\n" + (stdout or b"")).decode("utf-8", "replace").splitlines()
             if line.strip() and not line.startswith(("To ", "Done"))]
    return redact_urls("\n".join(lines))[:2000]

