"""The outbox sweep (``honcho-outbox-sweep``), run by the timer every 15 minutes and on demand.

Body, exactly as the seed's:

1. plan inside the outbox mutex (a read-only hold): the conversations with outbox records in
   file order, each one's owner, and which of them have an unresolved pending fork;
2. establish every planned conversation, unresolved forks first (idempotent: the ledgers are
   read in one go, no network for a conversation whose ledger holds a session; the
   get-or-create for one that never got one), then write every new ledger and name each
   conversation's first round of pending batches in flight, all in one write (``DeliveryEngine.arm``);
3. deliver each conversation's pending records;
4. compact inside its own hold, re-reading the file so records appended since the plan are
   re-examined, never clobbered: drop delivered records, drop records whose batch id already
   sits in the ledger's delivered window (silently: the ledger counts them), drop pending
   records older than the retention setting (a warning each), set corrupt lines aside into the
   quarantine file (a warning each); rewrite only when something was dropped.

A transient failure (unreachable, 408, 429, 5xx) is tried again inside the sweep, waiting the
answer's ``Retry-After`` or a capped exponential backoff on the injected clock (``retry``), at most
``retry_attempts`` tries per step and ``retry_budget_s`` of waiting per sweep; when one
conversation exhausts its tries the rest get one try each and the next sweep picks them up. A
session the server lost is established again by the delivery itself.

One failing conversation is logged and skipped; it never stops the rest or the compaction. No
bad value stops a compaction either: lines read with text repairs are rewritten clean (a warning
each), and a record's time is shown safely whatever number it holds. A sweep over a fully
delivered outbox makes no network call and writes nothing but its rewrite.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from services.changes import ChangeFeed
from services.clock import Clock, iso
from services.errors import ServiceError

from .delivery import DeliveryEngine, DeliveryProgress
from .models import DAY_MS, HonchoError, Ledger, OutboxError, OutboxRecord, OutboxSettings
from .retry import RetryBudget, retry_delay
from .stores import OutboxSnapshot, OutboxStores

T = TypeVar("T")

__all__ = ["SWEEP_TASK_NAME", "SweepResult", "run_sweep", "compact"]

SWEEP_TASK_NAME = "honcho-outbox-sweep"
"""The sweep's task name, as the seed registers it."""

log = logging.getLogger("services.knowledge.outbox")


@dataclass(slots=True)
class SweepResult:
    """What one sweep did; the status view shows the last one."""

    started_at: float
    """Clock time the sweep began (seconds)."""
    finished_at: float = 0.0
    """Clock time it ended (seconds)."""
    conversations: int = 0
    """Conversations planned."""
    delivered_records: int = 0
    """Records delivered by this sweep."""
    delivered_messages: int = 0
    """Honcho messages created by this sweep."""
    dropped_delivered: int = 0
    """Delivered (or already-windowed) records compacted away."""
    dropped_expired: int = 0
    """Pending records dropped for being older than the retention setting."""
    quarantined: int = 0
    """Corrupt lines set aside into the quarantine file."""
    repaired: int = 0
    """Lines read with text repairs and rewritten clean."""
    retries: int = 0
    """Tries made again after a transient memory-service failure."""
    rewrote: bool = False
    """Whether compaction rewrote the outbox."""
    skipped: str | None = None
    """Why the sweep did nothing (another sweep holds the sweep lock), else None."""
    errors: list[str] = field(default_factory=list)
    """One line per failed conversation or warning."""
    unreachable: str | None = None
    """Why the memory service could not be reached or refused us (unreachable, 5xx, 429, 401,
    403), from the last such failure of this sweep; None when it never happened."""

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready copy (for ``Change`` payloads)."""
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


@dataclass(slots=True)
class _Plan:
    order: list[str]
    owners: dict[str, str]
    forks: list[str]
    pending: dict[str, list[OutboxRecord]]
    key: tuple[int, int, int] | None
    snapshot: OutboxSnapshot


async def _plan(stores: OutboxStores) -> _Plan:
    def work() -> _Plan:
        key = stores.outbox_key()
        snapshot = stores.read_outbox()
        order: list[str] = []
        owners: dict[str, str] = {}
        pending: dict[str, list[OutboxRecord]] = {}
        for record in snapshot.records:
            conv = record["conversationId"]
            if conv not in owners:
                order.append(conv)
                owners[conv] = record.get("owner") or "user"
                pending[conv] = []
            if record.get("status") != "delivered":
                pending[conv].append(record)
        forks = []
        on_disk = {p.stem for p in (stores.state / "forks" / "pending").glob("*.json")}
        for conv in order:
            if conv not in on_disk:
                continue  # no fork record: nothing to read (one folder listing, not a lookup each)
            try:
                fork = stores.read_pending_fork(conv)
            except (ServiceError, OSError):
                continue  # establish reports the unreadable fork record for this conversation
            if fork is not None and not fork.get("resolvedAt"):
                forks.append(conv)
        return _Plan(order, owners, forks, pending, key, snapshot)

    return await stores.locked(work)


async def compact(stores: OutboxStores, retention_days: float, clock: Clock, changes: ChangeFeed,
                  result: SweepResult, planned: tuple[tuple[int, int, int] | None, OutboxSnapshot] | None = None
                  ) -> None:
    """Drop delivered, already-windowed and over-retention records; quarantine corrupt lines.

    The file is re-read inside the mutex, unless ``planned`` holds a snapshot and the file key it
    was read at: then that read is reused, advanced by parsing only what was appended since (the
    sweep's own delivered marks, captures made meanwhile) while the file is the same one.
    """
    now_ms = int(clock.time() * 1000)
    cutoff = now_ms - retention_days * DAY_MS
    warnings: list[str] = []

    def work() -> tuple[int, int, int, bool]:
        snapshot = stores.read_outbox() if planned is None else stores.advance(planned[0], planned[1])
        windows: dict[str, set[str] | None] = {}
        kept: list[OutboxRecord] = []
        delivered = expired = 0
        for record in snapshot.records:
            if record.get("status") == "delivered":
                delivered += 1
                continue
            conv = record["conversationId"]
            if conv not in windows:
                try:
                    ledger = stores.read_ledger(conv)
                    windows[conv] = set(ledger.get("deliveredBatchIds", [])) if ledger else set()
                except (OutboxError, OSError):
                    windows[conv] = None  # unreadable ledger: keep the records, decide nothing
            window = windows[conv]
            if window is not None and record["batchId"] in window:
                delivered += 1  # skipped-but-lingering: the ledger already counts the batch
                continue
            if record["createdAt"] < cutoff:
                expired += 1
                warnings.append(
                    f"memory-honcho: dropping over-retention outbox record {record['batchId']} "
                    f"(conversation {conv}, created {_when(record['createdAt'])}, "
                    f"older than {retention_days:g}d retention)")
                continue
            record = record.copy()
            record["status"] = "pending"
            kept.append(record)
        for bad in snapshot.corrupt:
            warnings.append(f"memory-honcho: quarantined corrupt outbox line {bad.number} ({bad.reason}) "
                            f"into {stores.quarantine_path}")
        for number, problem in snapshot.repaired:
            warnings.append(f"memory-honcho: repaired outbox line {number} ({problem}); "
                            "the record is kept, flagged 'repaired'")
        dropped = delivered + expired + len(snapshot.corrupt) + snapshot.marks
        rewrote = dropped > 0 or bool(snapshot.repaired)
        if rewrote:
            stores.quarantine(snapshot.corrupt, now_ms)
            stores.rewrite_outbox(kept)
        result.repaired += len(snapshot.repaired)
        return delivered, expired, len(snapshot.corrupt), rewrote

    delivered, expired, quarantined, rewrote = await stores.locked(work)
    for warning in warnings:
        log.warning("%s", warning)
        result.errors.append(warning)
        changes.announce("outbox", "outbox.warning", "", message=warning)
    result.dropped_delivered += delivered
    result.dropped_expired += expired
    result.quarantined += quarantined
    result.rewrote = result.rewrote or rewrote
    if delivered + expired > 0:
        log.info("memory-honcho: outbox compaction dropped %d delivered, %d expired", delivered, expired)
    if rewrote:
        changes.announce("outbox", "outbox.compacted", "", delivered=delivered, expired=expired,
                     quarantined=quarantined)


def _when(ms: object) -> str:
    """An epoch-millisecond stamp as ISO 8601, or the raw number when no date can show it."""
    try:
        if isinstance(ms, (int, float, str)):
            return iso(float(ms) / 1000)
    except (OverflowError, OSError, ValueError, TypeError):
        pass
    return f"{ms!r} ms since the epoch"


async def _retrying(step: str, conv: str, call: Callable[[], Awaitable[T]], settings: OutboxSettings,
                    clock: Clock, changes: ChangeFeed, budget: RetryBudget, result: SweepResult) -> T:
    """``call()``, tried again after each transient failure while tries and the budget last."""
    attempt = 1
    while True:
        try:
            return await call()
        except HonchoError as exc:
            if not exc.transient:
                raise
            if attempt >= settings.retry_attempts:
                budget.spend_all()  # unavailable through every try: the rest get one try each
                raise
            delay = retry_delay(exc, attempt, settings, clock.time())
            if not budget.take(delay):
                raise
            log.info("memory-honcho: %s of conversation %s failed (%s); trying again in %gs", step, conv, exc, delay)
            changes.announce("outbox", "sweep.retrying", conv, step=step, attempt=attempt, delay_s=delay, error=str(exc))
            result.retries += 1
            attempt += 1
            await clock.sleep(delay)


def _note_unreachable(result: SweepResult, exc: BaseException) -> None:
    """Keep why the memory service is out of reach (or refuses this key) on the sweep's result."""
    if isinstance(exc, HonchoError) and (exc.transient or exc.status in (401, 403)):
        result.unreachable = str(exc)


async def run_sweep(stores: OutboxStores, engine: DeliveryEngine, settings: OutboxSettings, clock: Clock,
                    changes: ChangeFeed) -> SweepResult:
    """One sweep: plan, establish (forks first), deliver, compact. Never raises for one conversation."""
    result = SweepResult(started_at=clock.time())
    budget = RetryBudget(settings.retry_budget_s)
    plan = await _plan(stores)
    order, owners, forks, pending = plan.order, plan.owners, plan.forks, plan.pending
    result.conversations = len(order)
    fork_set = set(forks)
    establish_order = forks + [c for c in order if c not in fork_set]
    try:
        ready = await _establish_all(establish_order, owners, pending, stores, engine, settings, clock, changes,
                                     budget, result)
    except BaseException:
        engine.drop_held()
        raise
    engine.defer_marks()  # the sweep's delivered marks go into one append, written before compaction
    try:
        await _deliver_all(order, owners, pending, plan, ready, engine, settings, clock, changes, budget, result)
    except BaseException:
        engine.drop_marks()  # cancelled or crashing: the ledgers' windows hold every delivered batch
        raise
    try:
        await engine.flush_marks()
    except (ServiceError, OSError) as exc:  # the ledgers' windows still hold every delivered batch
        message = f"memory-honcho: writing the sweep's delivered marks failed: {exc}"
        log.error("%s", message)
        result.errors.append(message)
    try:
        await compact(stores, settings.outbox_retention_days, clock, changes, result, (plan.key, plan.snapshot))
    except (ServiceError, OSError) as exc:  # the file is left as it was; the next sweep compacts again
        message = f"memory-honcho: outbox compaction failed, nothing was dropped: {exc}"
        log.error("%s", message)
        result.errors.append(message)
    result.finished_at = clock.time()
    return result


def _with_session(stores: OutboxStores, conversations: list[str]) -> tuple[set[str], dict[str, Ledger | None]]:
    """Which of ``conversations`` have a readable ledger holding a session, and the ledger (None
    when absent) of each that has neither a session nor a fork record (call inside the mutex)."""
    found = set()
    new: dict[str, Ledger | None] = {}
    forks = {p.stem for p in (stores.state / "forks" / "pending").glob("*.json")}
    for conv in conversations:
        try:
            ledger = stores.read_ledger(conv)
        except (ServiceError, OSError):
            continue  # establish reports the unreadable ledger for this conversation
        if ledger is not None and ledger.get("sessionId"):
            found.add(conv)
        elif conv not in forks:
            new[conv] = ledger
    return found, new


async def _establish_all(establish_order: list[str], owners: dict[str, str],
                         pending: dict[str, list[OutboxRecord]], stores: OutboxStores, engine: DeliveryEngine,
                         settings: OutboxSettings, clock: Clock, changes: ChangeFeed, budget: RetryBudget,
                         result: SweepResult) -> set[str]:
    """Establish every planned conversation; the conversations whose ledger holds a session after.

    The ledgers are read in one go; a conversation without a session gets its get-or-create
    calls (a fork its clone, written at once). Then one ``arm`` writes every new ledger and names
    each conversation's first round of pending batches in flight, before anything is sent.
    """
    if not establish_order:
        return set()
    known, new = await stores.locked(functools.partial(_with_session, stores, establish_order))
    for conv in establish_order:
        if conv in known:
            continue
        owner = owners.get(conv, "user")
        establish = (functools.partial(engine.establish_new, conv, owner, new[conv]) if conv in new
                     else functools.partial(engine.establish, conv, owner, hold=True))
        try:
            await _retrying("establish", conv, establish, settings, clock, changes, budget, result)
        except Exception as exc:  # noqa: BLE001 - one poisoned conversation never stops the sweep
            message = f"memory-honcho: sweep establish failed for conversation {conv}: {exc}"
            log.error("%s", message)
            result.errors.append(message)
            _note_unreachable(result, exc)
    first_round = max(1, settings.delivered_batch_window // 2)
    try:
        return await engine.arm({conv: [r["batchId"] for r in records[:first_round]]
                                 for conv, records in pending.items() if records})
    except (ServiceError, OSError) as exc:  # nothing is sent yet: each delivery establishes and writes its own
        message = f"memory-honcho: writing the sweep's ledgers failed: {exc}"
        log.error("%s", message)
        result.errors.append(message)
        return set()


async def _deliver_all(order: list[str], owners: dict[str, str], pending: dict[str, list[OutboxRecord]],
                       plan: _Plan, ready: set[str], engine: DeliveryEngine, settings: OutboxSettings, clock: Clock,
                       changes: ChangeFeed, budget: RetryBudget, result: SweepResult) -> None:
    for conv in order:
        if not pending.get(conv):
            continue
        owner = owners.get(conv, "user")
        progress = DeliveryProgress()
        try:
            # deliver_pending establishes again first (a fork whose parent this sweep just
            # delivered resolves now); with a ledger that is one read and no network. It plans
            # against the delivered marks as they are then: a delivery made since this plan
            # (another caller, another process) is never sent again.
            deliver = functools.partial(engine.deliver_pending, conv, owner, candidates=pending[conv],
                                        planned_key=plan.key, progress=progress, established=conv in ready)
            await _retrying("delivery", conv, deliver, settings, clock, changes, budget, result)
        except Exception as exc:  # noqa: BLE001 - one poisoned conversation never stops the sweep
            message = f"memory-honcho: sweep delivery failed for conversation {conv}: {exc}"
            log.error("%s", message)
            result.errors.append(message)
            _note_unreachable(result, exc)
        result.delivered_records += progress.records
        result.delivered_messages += progress.messages
