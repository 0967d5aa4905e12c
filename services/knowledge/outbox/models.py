"""Settings, errors and the on-disk shapes of the memory outbox.

The JSON field names on disk are the seed's (``batchId``, ``conversationId``, ``createdAt``,
``deliveredBatchIds``, ``anchors``, ``childId``, ``resolvedAt``, ``lastDeliveryAt``); times on
disk are epoch milliseconds, as in the seed.

Shapes (all plain JSON objects):

- outbox record (one ``capture.jsonl`` line): ``{batchId, conversationId, owner, status:
  "pending", createdAt, messages: [{role, peerId, content, createdAt}]}``.
- delivered mark (one ``capture.jsonl`` line, appended when records flip): ``{op: "delivered",
  batchIds: [...], at}``. Reading the outbox folds every mark into the records it names, so a
  record reads as ``status: "delivered"``; compaction drops both. Appending the mark instead of
  rewriting the whole file keeps the flip O(1) and inside the same critical section as the
  last-delivery marker.
- ledger (``state/ledger/<conversationId>.json``): ``{conversationId, owner, sessionId,
  peerIds: {user, assistant}, deliveredBatchIds, anchors: [{batchId, turn, messageId}],
  turnCount, deliveredTotal, inflight: [batchId], forkedFrom?: {parentId, atTurn, messageId}}``.
- pending fork (``state/forks/pending/<childId>.json``): ``{childId, parentId, atTurn,
  createdAt, resolvedAt?, sessionId?, fallback?}``.
- last-delivery marker (``state/last-delivery.json``): ``{lastDeliveryAt, batchId,
  conversationId}``.
- representation snapshot (``cache/representations/<conversationId>.json``):
  ``{conversationId, peerId, representation, fetchedAt}``.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import NotRequired, Required, TypedDict

from services.errors import ServiceError

__all__ = [
    "OutboxSettings",
    "OutboxError",
    "CaptureError",
    "OutboxWriteError",
    "CorruptLedgerError",
    "ForkError",
    "HonchoError",
    "HonchoUnavailableError",
    "HonchoRequestError",
    "HonchoRateLimitedError",
    "RecallToolError",
    "check_conversation_id",
    "honcho_id",
    "DAY_MS",
    "StoredMessage",
    "OutboxRecord",
    "DeliveredMark",
    "Anchor",
    "ForkOrigin",
    "Ledger",
    "ForkRecord",
    "OutboxLine",
    "RepresentationSnapshot",
    "DeliveryMarker",
]


class StoredMessage(TypedDict):
    """One message of a captured turn, as ``capture.jsonl`` keeps it."""

    role: str
    peerId: str
    content: str
    createdAt: int | float


class OutboxRecord(TypedDict):
    """One captured turn: a line of ``capture.jsonl`` (``status`` is folded in from the marks on read)."""

    batchId: str
    conversationId: str
    owner: str
    status: str
    createdAt: int | float
    messages: list[StoredMessage]
    repaired: NotRequired[list[str]]


class DeliveredMark(TypedDict):
    """A line of ``capture.jsonl`` flipping the named records to delivered."""

    op: str
    batchIds: list[str]
    at: int


class Anchor(TypedDict):
    """A delivered turn's last Honcho message (a fork clones its session there)."""

    batchId: str
    turn: int
    messageId: str | None


class ForkOrigin(TypedDict):
    """Where a fork child's session was cloned from."""

    parentId: str
    atTurn: int
    messageId: str


class Ledger(TypedDict, total=False):
    """``state/ledger/<conversationId>.json``: a conversation's delivery state."""

    conversationId: Required[str]
    owner: str
    sessionId: str
    peerIds: dict[str, str]
    deliveredBatchIds: list[str]
    anchors: list[Anchor]
    inflight: list[str]
    turnCount: int
    deliveredTotal: int
    forkedFrom: ForkOrigin
    repaired: list[str]


class ForkRecord(TypedDict, total=False):
    """``state/forks/pending/<childId>.json``: a fork asked for, resolved once its session exists."""

    childId: Required[str]
    parentId: Required[str]
    atTurn: int
    createdAt: int
    resolvedAt: int
    sessionId: str
    owner: str
    fallback: str
    messages: int
    repaired: list[str]


OutboxLine = OutboxRecord | DeliveredMark
"""What a line of ``capture.jsonl`` holds."""


class RepresentationSnapshot(TypedDict, total=False):
    """``cache/representations/<conversationId>.json``: a peer representation as last fetched."""

    conversationId: str
    peerId: str
    representation: str
    fetchedAt: int
    repaired: list[str]


class DeliveryMarker(TypedDict, total=False):
    """``state/last-delivery.json``: the newest delivery."""

    lastDeliveryAt: int
    batchId: str
    conversationId: str
    repaired: list[str]

DAY_MS = 86_400_000
"""One day in milliseconds (the retention cutoff unit)."""

_CONVERSATION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$")
_HONCHO_ID = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, slots=True)
class OutboxSettings:
    """Every knob of the outbox; the Workspace builds one and passes it in."""

    workspace_id: str = "workbench"
    """The Honcho workspace every session, peer and conclusion lives in."""
    assistant_peer_id: str = "assistant"
    """The Honcho peer that speaks the assistant's turns."""
    anchor_window: int = 200
    """How many fork anchors a ledger keeps (oldest dropped first on write)."""
    delivered_batch_window: int = 1000
    """How many delivered batch ids a ledger keeps (oldest dropped first on write)."""
    outbox_retention_days: float = 30.0
    """Pending records older than this are dropped by the sweep, with a warning each."""
    sweep_interval_s: float = 900.0
    """The sweep timer's period (15 minutes)."""
    batch_limit: int = 100
    """Most messages in one Honcho message-create call (Honcho's own limit)."""
    chunk_chars: int = 24_000
    """Longer texts are cut into parts of this size, each prefixed ``[Part i/n]``."""
    representation_cache: bool = True
    """Refresh ``cache/representations/<id>.json`` after each delivery."""
    retry_attempts: int = 4
    """How many times a sweep tries one conversation's establish or delivery on a transient failure
    (429, 5xx, unreachable) before leaving it to the next sweep."""
    retry_base_s: float = 1.0
    """The first backoff wait; each further wait doubles, up to ``retry_max_delay_s``."""
    retry_max_delay_s: float = 30.0
    """The longest backoff wait."""
    retry_after_cap_s: float = 120.0
    """The longest ``Retry-After`` a sweep honours (a longer one waits this long)."""
    retry_budget_s: float = 60.0
    """The most one sweep waits in total; once spent, failures wait for the next sweep."""

    def __post_init__(self) -> None:
        if not _HONCHO_ID.match(self.workspace_id):
            raise OutboxError(f"workspace_id {self.workspace_id!r}: only letters, digits, '_' and '-'")
        if not 1 <= self.batch_limit <= 100:
            raise OutboxError(f"batch_limit {self.batch_limit}: must be 1..100 (Honcho's batch limit)")
        if self.chunk_chars < 100:
            raise OutboxError(f"chunk_chars {self.chunk_chars}: must be at least 100")
        if self.anchor_window < 1 or self.delivered_batch_window < 1:
            raise OutboxError("anchor_window and delivered_batch_window must be at least 1")
        if self.sweep_interval_s <= 0:
            raise OutboxError(f"sweep_interval_s {self.sweep_interval_s}: must be positive")
        if self.retry_attempts < 1:
            raise OutboxError(f"retry_attempts {self.retry_attempts}: must be at least 1")
        if min(self.retry_base_s, self.retry_max_delay_s, self.retry_after_cap_s, self.retry_budget_s) < 0:
            raise OutboxError("retry waits and the retry budget must not be negative")

    def peer_for_owner(self, owner: str) -> str:
        """The Honcho peer id that stands for a conversation owner."""
        return honcho_id("", owner)


class OutboxError(ServiceError):
    """A memory-outbox failure explained in words."""


class CaptureError(OutboxError):
    """A captured turn that cannot be accepted (bad id, owner or message); nothing is written."""


class OutboxWriteError(OutboxError):
    """An outbox file could not be written (disk full, read-only); the partial write was undone."""


class CorruptLedgerError(OutboxError):
    """A ledger file exists but is not a valid ledger; the file is named in the message."""


class ForkError(OutboxError):
    """A fork that cannot be made or resolved yet (unknown turn, parent not delivered)."""


class HonchoError(OutboxError):
    """The memory service refused or failed a call."""

    transient = False
    """Whether the same call may succeed later (a sweep retries it with backoff)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status, or None when the service could not be reached."""
        self.retry_after = retry_after
        """The answer's ``Retry-After`` header as sent (seconds or an HTTP date), if any."""


class HonchoUnavailableError(HonchoError):
    """The memory service is down, unreachable, timed out or answered 5xx; the work is retried later."""

    transient = True


class HonchoRateLimitedError(HonchoUnavailableError):
    """The memory service answered 429 Too Many Requests; retried after its ``Retry-After``."""


class HonchoRequestError(HonchoError):
    """The memory service answered 4xx (other than 408 and 429): the request itself is wrong."""


class RecallToolError(OutboxError):
    """A recall tool failed: ``memory-honcho: Honcho unavailable (<message>)``."""


def check_conversation_id(value: object) -> str:
    """``value`` as a conversation id safe to use as a file name, or ``CaptureError``."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise CaptureError(f"conversation id must be a string, got {type(value).__name__}")
    text = str(value)
    if not _CONVERSATION_ID.match(text) or ".." in text:
        raise CaptureError(
            f"conversation id {text[:80]!r}: use 1-200 letters, digits and _ . : @ - (no leading dot, no '..')"
        )
    return text


@functools.lru_cache(maxsize=4096)
def honcho_id(prefix: str, raw: str) -> str:
    """A Honcho-legal id (letters, digits, ``_``, ``-``; at most 100) derived from ``raw``.

    Ids that are already legal pass through; others get their illegal characters replaced and a
    short hash of the original appended, so two different raw ids never meet.
    """
    candidate = prefix + raw
    if _HONCHO_ID.match(candidate) and len(candidate) <= 100:
        return candidate
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:80]
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:10]
    return f"{prefix}{cleaned}-{digest}"
