"""Frozen read models the UI gets from ``Harvest``: queue items, judgment details, sources, reads, notices.

Times in these models are float seconds since the epoch (``services.times``): the state dir
keeps ISO-8601 strings on disk (``run.json``), converted once when a read model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .proposal import FileChange

__all__ = ["QUEUE_STATES", "NOTICE_KINDS", "AcceptedReceipt", "GitDelivery", "JudgmentItem", "OutcomeView", "JudgmentDetail", "SourceInfo", "ReadResult",
           "OkfNotice"]

QUEUE_STATES = ("judging", "pending", "invalid", "delivering", "delivered", "approved", "rejected", "failed")
"""Where a judgment is: being judged, awaiting the operator, refused by a rule, being delivered,
delivered to a Git base and waiting for the merge, accepted, rejected (by the operator, or upstream:
its pull request closed unmerged), or refused at delivery (e.g. the base changed)."""

NOTICE_KINDS = ("base-blocked", "capture-failed", "note-skipped")
"""What an ``OkfNotice`` is about: a base nothing can be published to (or read from) until the
operator acts, a capture that recorded nothing, a note that was refused."""


class AcceptedReceipt(NamedTuple):
    """A base whose delivery was accepted: its alias, the accepted digest and when."""

    alias: str
    digest: str
    accepted_at: float | None
    """Seconds since the epoch; None when the receipt holds no usable time."""


@dataclass(frozen=True)
class GitDelivery:
    """A judgment's delivery to one Git base: the branch, its review and whether the merge is visible."""

    alias: str
    status: str
    """The Git receipt status (``commit-intent`` ... ``delivered``, ``accepted``, ``rejected``)."""
    branch: str | None
    commit: str | None
    """The proposal commit."""
    pr_url: str | None
    pr_state: str | None
    """``OPEN``, ``CLOSED`` or ``MERGED`` as ``gh`` last said; None without a PR."""
    review: str | None
    """How to open the review by hand (no PR was opened)."""
    accepted_commit: str | None
    """The accepted head that showed the merge."""
    rejected: str | None
    """Why it was rejected upstream."""
    upstream: str | None = None
    """What is known when the branch is gone and no matching merge was found (the operator decides)."""


@dataclass(frozen=True)
class JudgmentItem:
    """One judgment in the approval queue."""

    id: str
    """The run id (the judgment's id)."""
    source_id: str
    """The source whose inputs were judged."""
    agent: str
    """The source's agent name."""
    state: str
    """One of ``QUEUE_STATES``."""
    run_status: str
    """The run's OKF status (``delivering``, ``processed``, ``rejected`` ...)."""
    attempt: int
    """1 for the first judgment, +1 for each rejudgment."""
    created_at: float
    """When the run was created (seconds since the epoch; 0.0 when ``run.json`` holds no usable time)."""
    inputs: int
    """How many inputs the run judges."""
    promote: int
    """Outcomes judged promote."""
    merge: int
    """Outcomes judged merge."""
    drop: int
    """Outcomes judged drop."""
    problems: tuple[str, ...]
    """Broken rules (invalid judgments) or the delivery error."""
    reason: str | None
    """The operator's rejection reason."""
    receipts: tuple[tuple[str, str], ...]
    """``(alias, receipt status)`` per base."""
    accepted: tuple[AcceptedReceipt, ...] = ()
    """``(alias, digest, accepted_at)`` per base whose delivery was accepted."""
    git: tuple[GitDelivery, ...] = ()
    """Per Git base delivered to: branch, review and merge state."""


@dataclass(frozen=True)
class OutcomeView:
    """One outcome of a judgment with the input it judges."""

    input: str
    verdict: str
    reason: str
    input_kind: str
    """``note`` or ``record``."""
    input_name: str
    """The note name or the run (thread) id."""
    input_text: str
    concepts: tuple[str, ...]
    """``<base>/<path>`` of each concept written."""
    decision: str | None
    """``approved``/``declined`` once the operator decided, else None."""


@dataclass(frozen=True)
class JudgmentDetail:
    """Everything the operator needs to decide on one judgment."""

    item: JudgmentItem
    outcomes: tuple[OutcomeView, ...]
    files: tuple[FileChange, ...]
    """Per changed file: before, after and its unified diff."""
    diff: str
    """The whole proposal as one unified diff."""
    removals: tuple[tuple[str, str, str], ...]
    """``(base, path, reason)`` per removal."""
    reply: str | None
    """The judge's raw reply (kept for invalid judgments)."""


@dataclass(frozen=True)
class SourceInfo:
    """A registered source."""

    id: str
    agent: str
    home: str
    owner: str
    owns: tuple[str, ...]
    reads: tuple[str, ...]


@dataclass(frozen=True)
class ReadResult:
    """The full text of one accepted file, read through a fresh view."""

    view: str
    """The view folder the text was read from."""
    base: str
    path: str
    digest: str
    text: str


@dataclass(frozen=True)
class OkfNotice:
    """Something in OKF that needs the operator, with the way out."""

    kind: str
    """One of ``NOTICE_KINDS``."""
    subject: str
    """The base alias, or ``<agent>: notes/<name>`` / the agent whose capture failed."""
    reason: str
    """What is wrong, in plain words."""
    remedy: str
    """What to do about it (which file to put back or move aside, what to retry)."""
