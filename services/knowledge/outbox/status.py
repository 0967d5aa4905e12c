"""The status view for the UI: plain read models built from the stores (inside the mutex).

Times in these models are float seconds since the epoch (``services.times``); the files keep
epoch milliseconds, converted once here (``ms_time``). A stamp that is no usable time reads as
None: it never stops the status from being built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.times import ms_time

from .models import ForkRecord, Ledger, OutboxError, RepresentationSnapshot
from .stores import OutboxStores
from .sweep import SweepResult

__all__ = ["ConversationStatus", "OutboxStatus", "PendingFork", "Representation", "build_status", "pending_fork",
           "representation_of"]


@dataclass(frozen=True, slots=True)
class ConversationStatus:
    """One conversation's line in the status view."""

    conversation_id: str
    owner: str
    pending: int
    """Records waiting in the outbox."""
    delivered: int
    """Records delivered over the conversation's life (from its ledger)."""
    session_id: str | None
    """The Honcho session, None before the first establish."""
    turns: int
    """Turns counted by the ledger (a fork child starts at its fork turn)."""
    forked_from: str | None = None
    """The parent conversation when this one is a fork."""
    error: str | None = None
    """Why the ledger could not be read, if so."""


@dataclass(frozen=True, slots=True)
class PendingFork:
    """A fork not resolved yet: the child conversation, its parent and the turn it forks at."""

    child_id: str
    parent_id: str
    at_turn: int | None
    """The parent's turn the child starts from (None when the record holds no usable turn)."""
    created_at: float | None
    """When the fork was asked for (seconds since the epoch), when known."""


def pending_fork(record: ForkRecord) -> PendingFork:
    """The read model of one fork record (``state/forks/pending/<childId>.json``)."""
    turn = record.get("atTurn")
    return PendingFork(child_id=str(record.get("childId") or "?"), parent_id=str(record.get("parentId") or "?"),
                       at_turn=turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
                       created_at=ms_time(record.get("createdAt")))


@dataclass(frozen=True, slots=True)
class Representation:
    """The cached peer representation of a conversation, as last fetched from the memory service."""

    conversation_id: str
    peer_id: str | None
    text: str
    fetched_at: float | None
    """When it was fetched (seconds since the epoch), when known."""


def representation_of(snapshot: RepresentationSnapshot | None) -> Representation | None:
    """The read model of a representation snapshot (``cache/representations/<id>.json``); None
    when none was fetched yet or it holds no text."""
    if not isinstance(snapshot, dict) or not snapshot.get("representation"):
        return None
    peer = snapshot.get("peerId")
    return Representation(conversation_id=str(snapshot.get("conversationId") or ""),
                          peer_id=str(peer) if peer is not None else None, text=str(snapshot["representation"]),
                          fetched_at=ms_time(snapshot.get("fetchedAt")))


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """Everything the outbox pane shows."""

    conversations: list[ConversationStatus] = field(default_factory=list)
    pending_total: int = 0
    """Pending records across all conversations."""
    last_delivery_at: float | None = None
    """Newest delivery (seconds since the epoch), from ``state/last-delivery.json``."""
    pending_forks: list[PendingFork] = field(default_factory=list)
    """Forks not resolved yet."""
    resolved_forks: int = 0
    corrupt_lines: int = 0
    """Lines in ``capture.jsonl`` that the next sweep will quarantine."""
    quarantined: int = 0
    """Lines already set aside in ``quarantine.jsonl``."""
    last_sweep: SweepResult | None = None
    errors: list[str] = field(default_factory=list)
    """Recent errors, newest last."""


def build_status(stores: OutboxStores, last_sweep: SweepResult | None, errors: list[str]) -> OutboxStatus:
    """Read the stores into an ``OutboxStatus`` (call inside the outbox mutex).

    The outbox is read through its status index (``index``): only what the index does not cover
    is parsed, so the first open over a large outbox does not parse every record.
    """
    summary = stores.read_summary()
    owners = summary.owners
    ledgers: dict[str, Ledger] = {}
    problems: dict[str, str] = {}
    existing = {p.stem for p in (stores.state / "ledger").glob("*.json")}
    names = existing | set(owners)
    for conv in sorted(existing):  # a conversation without a ledger file has none to read
        try:
            found = stores.read_ledger(conv)
        except OutboxError as exc:
            problems[conv] = str(exc)
            continue
        if found is not None:
            ledgers[conv] = found
    rows = []
    for conv in sorted(names):
        ledger: Ledger = ledgers.get(conv) or {"conversationId": conv}
        window = set(ledger.get("deliveredBatchIds", []))
        waiting = sum(1 for batch in summary.ids(conv) if batch not in window) if window else summary.count(conv)
        rows.append(ConversationStatus(
            conversation_id=conv, owner=ledger.get("owner") or owners.get(conv, "user"), pending=waiting,
            delivered=int(ledger.get("deliveredTotal", 0)), session_id=ledger.get("sessionId"),
            turns=int(ledger.get("turnCount", 0)), forked_from=_parent(ledger),
            error=problems.get(conv)))
    marker = stores.read_last_delivery()
    forks = stores.read_pending_forks()
    return OutboxStatus(
        conversations=rows, pending_total=sum(r.pending for r in rows),
        last_delivery_at=ms_time(marker.get("lastDeliveryAt")) if isinstance(marker, dict) else None,
        pending_forks=[pending_fork(f) for f in forks if not f.get("resolvedAt")],
        resolved_forks=sum(1 for f in forks if f.get("resolvedAt")), corrupt_lines=summary.corrupt,
        quarantined=stores.quarantined_count(), last_sweep=last_sweep, errors=errors)


def _parent(ledger: Ledger) -> str | None:
    """The parent conversation of a fork child's ledger, None for a root conversation."""
    origin = ledger.get("forkedFrom")
    return origin.get("parentId") if isinstance(origin, dict) else None
