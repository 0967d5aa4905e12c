"""Merge-visible acceptance of Git deliveries: a ``delivered`` receipt becomes ``accepted`` or ``rejected``.

A delivered proposal counts only once the accepted branch shows it. ``check_delivery`` fetches the
accepted branch and looks, in this order, for:

- the proposal commit itself on the accepted branch (a merge commit or a fast-forward);
- a commit on the accepted branch since ``baseHead`` whose change is exactly the proposal's (the
  same paths to the same blobs, nothing else): a squash merge, or a rebase merge of its one commit.

Found: ``accepted`` with ``acceptedCommit`` (the accepted head that showed it), ``mergedAs`` (the
commit that carries it, and how) and ``acceptedAt``. Not found: a PR ``gh`` reports closed without
merge ends it ``rejected`` (``rejectedUpstream`` says so); otherwise it stays ``delivered`` (the PR
state refreshed) and is checked again. A proposal branch gone from the repository with no carrier
found is not a verdict: a reviewer who squashed it *with edits* and deleted the branch leaves the
same trace as one who deleted it unmerged. The receipt stays ``delivered`` with ``upstream`` saying
what is known, and the operator decides (``confirm_merged`` or ``reject``); a later check that
finds the carrier accepts it as usual.

``POLL_INTERVAL_S`` is how often ``Harvest`` checks every delivered receipt while it runs (and it
checks once at open, and on ``recheck``).
"""

from __future__ import annotations

from ...clock import iso
from .errors import OkfError
from .git import GitBase, object_id
from .git_pr import PullRequests
from .shapes import Receipt

__all__ = ["check_delivery", "POLL_INTERVAL_S", "WAITING", "SCAN_LIMIT"]

POLL_INTERVAL_S = 300.0
"""Five minutes between checks: a review takes minutes to days, and each check is one fetch and,
with ``gh``, one API call per open PR, far below GitHub's rate limits."""
WAITING = "delivered"
"""The receipt status of a proposal waiting for its merge."""
SCAN_LIMIT = 500
"""How many accepted-branch commits since the proposal's base are searched for a squash or rebase."""


def _changes(base: GitBase, old: str, new: str) -> set[tuple[str, str]]:
    """``{(path, new blob or '')}`` of the change from ``old`` to ``new``."""
    out = base.git("diff-tree", "-r", "--no-renames", "-z", "--no-commit-id", "--end-of-options", object_id(old),
                   object_id(new), what="git diff-tree").stdout
    fields = out.split(b"\0")
    found = set()
    for meta, path in zip(fields[0::2], fields[1::2]):
        if not meta:
            continue
        parts = meta.decode().lstrip(":").split(" ")
        blob = "" if parts[4].startswith("D") else parts[3]
        found.add((path.decode("utf-8", "surrogateescape"), blob))
    return found


def _is_ancestor(base: GitBase, commit: str, head: str) -> bool:
    return base.git("merge-base", "--is-ancestor", "--", object_id(commit), object_id(head), check=False).returncode == 0


def _carrier(base: GitBase, receipt: Receipt, head: str) -> tuple[str, str] | None:
    """``(commit, how)`` of the accepted-branch commit that carries the proposal, or None."""
    commit, start = object_id(receipt.get("commit"), "commit"), object_id(receipt.get("baseHead"), "baseHead")
    if base.has_ref(commit) is None:
        raise OkfError(f"base {base.alias!r}: the proposal commit {commit[:12]} is missing from the cache", code="E_RECOVERY")
    if _is_ancestor(base, commit, head):
        return commit, "merge"
    wanted = _changes(base, start, commit)
    since = ["rev-list", "--reverse", f"--max-count={SCAN_LIMIT}", "--no-merges", "--end-of-options"]
    since += [f"{start}..{head}"] if _is_ancestor(base, start, head) else [head]
    for candidate in base.git(*since, what="git rev-list").stdout.decode().split():
        parents = base.git("rev-list", "--parents", "-n", "1", "--end-of-options", object_id(candidate)) \
            .stdout.decode().split()[1:]
        if parents and _changes(base, parents[0], candidate) == wanted:
            return candidate, "squash or rebase"
    return None


def check_delivery(base: GitBase, receipt: Receipt, prs: PullRequests | None, *, at: float) -> Receipt | None:
    """The receipt as it should now be (accepted, rejected, or delivered with a fresh PR state); None when unchanged."""
    if receipt.get("status") != WAITING:
        return None
    with base.locked():
        head = base.fetch()
        carrier = _carrier(base, receipt, head)
    updated = receipt.copy()
    if carrier is not None:
        updated.update({"status": "accepted", "acceptedCommit": head, "mergedAs": {"commit": carrier[0], "how": carrier[1]},
                        "acceptedAt": iso(at)})
        return updated
    pr = receipt.get("pr")
    if isinstance(pr, dict) and prs is not None and prs.available():
        fresh = prs.view(pr)
        updated["pr"] = fresh
        if fresh.get("state") == "CLOSED":
            updated.update({"status": "rejected", "rejectedUpstream": "the pull request was closed without merge",
                            "rejectedAt": iso(at)})
            return updated
    if base.remote_branch(str(receipt["branch"])) is None:
        updated["upstream"] = (f"the branch {receipt['branch']} is gone from the repository and no commit on "
                               f"{base.accepted_branch} since {str(receipt['baseHead'])[:12]} carries exactly this "
                               "proposal: a reviewer may have merged it with edits, or deleted it without merge")
    else:
        updated.pop("upstream", None)
    return updated if updated != receipt else None
