"""Insight reviews: proposed user-derived principles wait for the operator's decision.

A review is pending until the operator approves one candidate truth (optionally edited) or
rejects the proposal with a reason. Nothing reaches the canvas before approval. Approval writes
the principle as a document under the chosen owner (a new revision when the destination already
exists: the proposal refines that principle), then links it from the listener's ``Approved
insights`` section. Reviews live as JSON files under ``<root>/insights/reviews/`` (atomic
writes); a file lock serialises decisions across workbenches on one workspace, so two approvals
of one review cannot both win.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import re
import secrets
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...times import parse_time, time_or_none
from ...changes import ChangeFeed
from ...clock import Clock
from ...errors import ServiceError
from ...files import AsyncFileLock, CorruptFileError, PathError, atomic_write_json, contained_path, read_json
from .proposal import Proposal, parse_proposal, rules_for_visibility

if TYPE_CHECKING:
    from ...canvas import Canvas, DocumentView

__all__ = ["ReviewError", "ReviewStateError", "InsightReview", "InsightReviews"]

_REVIEW_ID = re.compile(r"ir_[A-Za-z0-9]{1,64}")
"""A review id: ``ir_`` and ASCII letters and digits (``ir_`` + 10 hex digits when made here)."""


class ReviewError(ServiceError):
    """A review that cannot be found or decided as asked."""


class ReviewStateError(ReviewError):
    """The review was already decided (another approval or rejection won)."""


@dataclass(frozen=True)
class InsightReview:
    """One review as the judgments pane shows it."""

    id: str
    status: str
    """``pending``, ``approved`` or ``rejected``."""
    proposal: Proposal
    proposer: str
    created_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    reason: str | None = None
    chosen: int | None = None
    text: str | None = None
    """The approved truth as written (the chosen candidate, possibly edited)."""
    document: str | None = None
    """The full name of the document the approval wrote."""
    revision: int | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)


def _to_json(review: InsightReview) -> dict[str, object]:
    data = asdict(review)
    data["proposal"]["candidates"] = list(review.proposal.candidates)
    data["errors"] = list(review.errors)
    return data


def _from_json(data: object, path: Path) -> InsightReview:
    if not isinstance(data, dict):
        raise CorruptFileError(f"{path}: not a review record (not a JSON object)")
    try:
        proposal = Proposal(**{**data["proposal"], "candidates": tuple(data["proposal"]["candidates"])})
        times: dict[str, float | None] = {"created_at": parse_time(data["created_at"])} if "created_at" in data else {}
        times["decided_at"] = time_or_none(data.get("decided_at"))  # one time type, whatever a hand edit left
        return InsightReview(**{**data, "proposal": proposal, "errors": tuple(data.get("errors", ())), **times})
    except (KeyError, TypeError, ServiceError) as exc:
        raise CorruptFileError(f"{path}: not a review record ({exc})") from None


class InsightReviews:
    """The insight-review queue of one workspace, writing approved principles to a canvas."""

    def __init__(self, root: Path, canvas: Canvas, *, changes: ChangeFeed | None = None, clock: Clock | None = None) -> None:
        self.root = Path(root) / "insights"
        self.folder = self.root / "reviews"
        self.canvas = canvas
        self.changes = changes or ChangeFeed()
        self.clock = clock or Clock()
        self._lock_path = self.root / ".decisions.lock"
        self.folder.mkdir(parents=True, exist_ok=True)

    @classmethod
    async def open(cls, root: Path, canvas: Canvas, *, changes: ChangeFeed | None = None, clock: Clock | None = None) -> "InsightReviews":
        """The queue under ``root`` (the workspace's ``knowledge/`` folder)."""
        return await asyncio.to_thread(cls, root, canvas, changes=changes, clock=clock)

    # -- reading -------------------------------------------------------------------------------

    async def list(self, status: str | None = None) -> list[InsightReview]:
        """Every review (newest first), optionally of one status; unreadable files are reported, not hidden."""
        return await asyncio.to_thread(self._list, status)

    def _list(self, status: str | None) -> builtins.list[InsightReview]:
        reviews = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                review = _from_json(read_json(contained_path(self.folder, path.name, must_exist=True)), path)
            except (CorruptFileError, PathError) as exc:  # a link is reported, never followed
                review = self._unreadable(path, str(exc))
            except FileNotFoundError:  # decided and removed meanwhile
                continue
            if status is None or review.status == status:
                reviews.append(review)
        return sorted(reviews, key=lambda r: r.created_at, reverse=True)

    def _unreadable(self, path: Path, error: str) -> InsightReview:
        stand_in = Proposal(path.stem, "user:unknown", "unreadable", None, "none", "the review file", ("unreadable",))
        return InsightReview(path.stem, "invalid", stand_in, "unknown", os.lstat(path).st_mtime, errors=(error,))

    async def get(self, review_id: str) -> InsightReview:
        """One review; ``ReviewError`` when there is none with that id."""
        return await asyncio.to_thread(self._get, review_id)

    def _get(self, review_id: str) -> InsightReview:
        path = self._path(review_id)  # a link at the file is refused there, never followed
        try:
            review = _from_json(read_json(path), path)
        except FileNotFoundError:
            raise ReviewError(f"no insight review {review_id}") from None
        if review.id != review_id:  # a decision is written back under the record's own id
            raise ReviewError(f"{path}: the record names review {str(review.id)[:80]!r}, not {review_id}")
        return review

    # -- proposing ---------------------------------------------------------------------------

    async def propose(self, proposal: Proposal, *, proposer: str = "operator") -> InsightReview:
        """Queue a proposal for review; nothing is written to the canvas."""
        review = InsightReview(
            id="ir_" + secrets.token_hex(5),
            status="pending",
            proposal=proposal,
            proposer=proposer,
            created_at=self.clock.time(),
        )
        await asyncio.to_thread(self._save, review)
        self.changes.announce("insights", "review.pending", review.id, title=proposal.title)
        return review

    async def submit_markdown(self, markdown: str, *, proposer: str = "operator") -> InsightReview:
        """Queue a proposal written in the capture template's markdown."""
        return await self.propose(parse_proposal(markdown), proposer=proposer)

    # -- deciding ------------------------------------------------------------------------------

    async def approve(
        self, review_id: str, *, candidate: int = 0, text: str | None = None, actor: str = "operator"
    ) -> InsightReview:
        """Write the chosen (optionally edited) truth to its destination and link it from the listener."""
        async with AsyncFileLock(self._lock_path):
            review = await asyncio.to_thread(self._get, review_id)
            self._require_pending(review)
            candidates = review.proposal.candidates
            if not 0 <= candidate < len(candidates):
                raise ReviewError(f"review {review_id} has candidates 0..{len(candidates) - 1}, not {candidate}")
            truth = (text if text is not None else candidates[candidate]).strip()
            if not truth:
                raise ReviewError("the approved truth is empty; edit it or reject the review")
            document = await self._write_principle(review.proposal, truth, actor)
            if review.proposal.listener:
                await self.canvas.approve_insight(review.proposal.listener, document.object.full_name, actor=None)
            decided = replace(
                review,
                status="approved",
                decided_at=self.clock.time(),
                decided_by=actor,
                chosen=candidate,
                text=truth,
                document=document.object.full_name,
                revision=document.revision,
            )
            await asyncio.to_thread(self._save, decided)
        self.changes.announce("insights", "review.approved", review_id, document=decided.document)
        return decided

    async def reject(self, review_id: str, reason: str, *, actor: str = "operator") -> InsightReview:
        """Record why the proposal was refused; nothing is written to the canvas."""
        if not reason.strip():
            raise ReviewError("say why the review is rejected")
        async with AsyncFileLock(self._lock_path):
            review = await asyncio.to_thread(self._get, review_id)
            self._require_pending(review)
            decided = replace(review, status="rejected", decided_at=self.clock.time(), decided_by=actor, reason=reason.strip())
            await asyncio.to_thread(self._save, decided)
        self.changes.announce("insights", "review.rejected", review_id, reason=decided.reason)
        return decided

    async def _write_principle(self, proposal: Proposal, truth: str, actor: str) -> DocumentView:
        from ...canvas import ObjectNotFoundError

        rules = rules_for_visibility(proposal.visibility)
        owner = proposal.owner
        full_name = f"{owner}/{proposal.name}"  # <type>:<handle>/<path> names one document even when handles are shared
        preview = f"When {proposal.title.strip().rstrip('.')} bears on a decision, read this because the user approved this principle."
        try:
            current = await self.canvas.get(full_name)
        except ObjectNotFoundError:
            current = None
        if current is None:
            return await self.canvas.write(proposal.name, preview=preview, body=truth, owner=owner, kind="knowledge", rules=rules)
        detail = await self.canvas.read(full_name)
        revision = detail.document.revision if detail.document is not None else None
        return await self.canvas.edit(full_name, base_revision=revision, body=truth, preview=preview, rules=rules)

    # -- internals -------------------------------------------------------------------------

    @staticmethod
    def _require_pending(review: InsightReview) -> None:
        if review.status != "pending":
            raise ReviewStateError(f"review {review.id} is already {review.status}")

    def _path(self, review_id: object) -> Path:
        """``reviews/<id>.json``, proven inside the folder (an id comes from the control API or a file)."""
        if not isinstance(review_id, str) or not _REVIEW_ID.fullmatch(review_id):
            raise ReviewError(f"not an insight review id: {review_id!r}"[:200])
        try:
            return contained_path(self.folder, f"{review_id}.json")
        except PathError as exc:
            raise ReviewError(f"insight review {review_id}: {exc}") from None

    def _save(self, review: InsightReview) -> None:
        atomic_write_json(self._path(review.id), _to_json(review))
