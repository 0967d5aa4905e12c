"""The delivery engine: establish a conversation's memory session, deliver its pending records.

``establish(conversation, owner)`` is idempotent: when the ledger exists it is one ledger read
and no network. Otherwise it get-or-creates the owner's and the assistant's peers and the
conversation's session, or, for a conversation with an unresolved pending fork, clones the
parent's session at the fork's anchor message and stamps the fork resolved (kept on disk, so a
late duplicate establish never clones again).

``deliver_pending(conversation, owner)`` sends the conversation's pending records in file order,
in message-create calls of at most 100 messages, texts longer than ``chunk_chars`` cut into
``[Part i/n]`` parts. Crash safety, step by step:

1. before each call the ledger names the batches whose messages are in flight (``inflight``);
   a sweep writes that for every conversation's first round in one go before its first send
   (``arm``), and each first round trusts it while the ledger file is exactly as written;
2. after the calls the ledger adds every completed batch id to its delivered window, counts the
   turns and keeps an anchor (the batch's last Honcho message id) per turn;
3. in the same critical section the records flip to delivered (an appended mark) and the
   last-delivery marker is written.

A crash between 2 and 3 leaves records whose batch id is already in the window: the next run
flips them without sending (and the sweep drops them silently). A crash between the call and 2
leaves ``inflight`` set: the next run asks Honcho which of those messages landed (their metadata
carries the batch id and position) and sends only the rest. No message is delivered twice.

Exactly once across callers: every delivery holds one lock (``state/delivery.lock``, across
processes) from its plan to its last flip, and plans inside the outbox mutex against the delivered
marks as the file holds them then (a sweep's earlier read is checked against the marks appended
since), never only against the ledger's bounded window.

Each message carries ``created_at``, the capture time (ISO 8601), so the memory service's
timeline shows when the turn happened, not when it was delivered. A session the server no
longer has (404) is established again under the same id and the delivery goes on; the memory
delivered before its loss is not sent again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from services.changes import ChangeFeed
from services.clock import Clock, iso
from services.files import AsyncFileLock

from .honcho_client import HonchoClient
from .models import (
    Anchor,
    DeliveryMarker,
    ForkError,
    ForkRecord,
    HonchoRequestError,
    Ledger,
    OutboxError,
    OutboxRecord,
    OutboxSettings,
    RepresentationSnapshot,
    check_conversation_id,
    honcho_id,
)
from .stores import LedgerStamp, OutboxStores

__all__ = ["DeliveryEngine", "DeliveryResult", "DeliveryProgress", "chunk_text", "StepHook", "DELIVERY_LOCK_WAIT_S"]

log = logging.getLogger("services.knowledge.outbox")

StepHook = Callable[[str, str], None]
"""Called with ``(step, conversation_id)`` at ``sent`` and ``ledger-written`` (crash tests)."""

DELIVERY_LOCK_WAIT_S = 300.0
"""How long a delivery waits for another one (in this process or another) before giving up."""


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """What one ``deliver_pending`` call did."""

    conversation_id: str
    delivered_records: int = 0
    """Records sent and flipped by this call."""
    delivered_messages: int = 0
    """Honcho messages created by this call."""
    flipped_without_send: int = 0
    """Records already in the ledger window (a crash before their flip), flipped without sending."""


@dataclass(slots=True)
class DeliveryProgress:
    """Running counts of one conversation's deliveries; kept by the caller across failed attempts."""

    records: int = 0
    messages: int = 0
    flipped_without_send: int = 0


@dataclass(frozen=True, slots=True)
class _Armed:
    """A ledger a sweep wrote naming its conversation's next batches in flight, before any send."""

    stamp: LedgerStamp
    """The file's stamp right after that write: a write by anyone since makes another."""
    batch_ids: frozenset[str]
    """The batches named in flight."""
    ledger: Ledger
    """The ledger as written."""


@dataclass(slots=True)
class _Deferred:
    """Delivered marks held back during a sweep (``DeliveryEngine.defer_marks``)."""

    marks: dict[str, list[str]] = field(default_factory=dict)
    """Per conversation, batch ids delivered and in its ledger's window but not marked yet."""
    marker: DeliveryMarker | None = None
    """The newest last-delivery marker not written yet."""
    representations: dict[str, RepresentationSnapshot] = field(default_factory=dict)
    """Representation snapshots fetched but not cached yet (a cache: written at the flush, or lost)."""


def chunk_text(text: str, size: int) -> list[str]:
    """``text`` as one part, or as ``[Part i/n] ...`` parts of at most ``size`` characters of text."""
    if len(text) <= size:
        return [text]
    parts = [text[i: i + size] for i in range(0, len(text), size)]
    return [f"[Part {i}/{len(parts)}] {part}" for i, part in enumerate(parts, start=1)]


def _now_ms(clock: Clock) -> int:
    return int(clock.time() * 1000)


def _created_at(*stamps: object) -> str | None:
    """The first usable epoch-millisecond stamp as ISO 8601, None when none is."""
    for stamp in stamps:
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp):
            continue
        try:
            return _iso_ms(stamp)
        except (OverflowError, OSError, ValueError):
            continue
    return None


@functools.lru_cache(maxsize=4096)
def _iso_ms(stamp: int | float) -> str:
    """``iso`` of an epoch-millisecond stamp, remembered: a record's messages share their stamps."""
    return iso(stamp / 1000)


class DeliveryEngine:
    """Establishes sessions and delivers pending outbox records to the memory service."""

    def __init__(self, stores: OutboxStores, client: HonchoClient, settings: OutboxSettings,
                 changes: ChangeFeed, clock: Clock, *, step_hook: StepHook | None = None) -> None:
        self.stores = stores
        self.client = client
        self.settings = settings
        self.changes = changes
        self.clock = clock
        self.step_hook = step_hook
        """Test seam: called between the delivery steps; raising there models a crash."""
        self._establishing: dict[str, asyncio.Lock] = {}
        self._delivering = AsyncFileLock(stores.state / "delivery.lock", timeout=DELIVERY_LOCK_WAIT_S)
        self._deferred: _Deferred | None = None
        self._held: dict[str, tuple[Ledger, ForkRecord | None]] = {}
        """Established ledgers not written yet (``establish(hold=True)``), written by ``arm``."""
        self._armed: dict[str, _Armed] = {}
        """Ledgers ``arm`` wrote with their next batches in flight, taken by the first delivery after."""

    def close(self) -> None:
        """Nothing to release: the delivery lock is held only while a delivery runs."""

    def defer_marks(self) -> None:
        """Hold the delivered marks and the last-delivery marker of the following deliveries until
        ``flush_marks`` (a sweep writes them once, not once per conversation).

        Safe because a record whose batch id is in its ledger's delivered window is never sent
        again (the next plan flips it without sending, compaction drops it): a conversation's
        held marks are written at once whenever they would outgrow half that window.
        """
        if self._deferred is None:
            self._deferred = _Deferred()

    def drop_marks(self) -> None:
        """Forget the held marks without writing them, as a crash would (the next run flips those
        records without sending: their batch ids are in their ledgers' windows)."""
        self._deferred = None

    async def flush_marks(self) -> None:
        """Write the held delivered marks (one append) and the newest last-delivery marker; stop holding."""
        deferred, self._deferred = self._deferred, None
        if deferred is not None and deferred.representations:
            await asyncio.to_thread(self._write_representations, deferred.representations)
        if deferred is None or deferred.marker is None:
            if self.stores.ledgers_unsynced:
                await self.stores.locked(self.stores.sync_ledgers)
            return
        ids = [batch for held in deferred.marks.values() for batch in held]
        marker = deferred.marker

        def write() -> None:
            self.stores.sync_ledgers()  # the ledgers the marks rely on survive a power loss first
            if ids:
                self.stores.append_lines([{"op": "delivered", "batchIds": ids, "at": marker["lastDeliveryAt"]}])
            self.stores.write_last_delivery(marker)

        await self.stores.locked(write)

    def _write_representations(self, snapshots: dict[str, RepresentationSnapshot]) -> None:
        for conv, snapshot in snapshots.items():
            try:
                self.stores.write_representation(conv, snapshot)
            except OSError as exc:  # a cache: the next delivery fetches it again
                log.warning("memory-honcho: caching the representation of conversation %s failed: %s", conv, exc)

    def _step(self, step: str, conversation_id: str) -> None:
        if self.step_hook is not None:
            self.step_hook(step, conversation_id)

    # -- establish -----------------------------------------------------------------------

    async def establish(self, conversation_id: str, owner: str = "user", *, hold: bool = False) -> Ledger:
        """The conversation's ledger, creating the memory session (or fork clone) when needed.

        ``hold=True`` (the sweep) keeps a new session's ledger in memory instead of writing it:
        ``arm`` writes it, with the conversation's next batches in flight, in one write for all
        conversations. Until then a crash loses only the ledger; establishing again is the same
        get-or-create calls. A fork clone is always written at once (a clone is not idempotent).
        """
        conv = check_conversation_id(conversation_id)
        ledger = await self.stores.locked(lambda: self.stores.read_ledger(conv))
        if ledger is not None and ledger.get("sessionId"):
            return ledger
        lock = self._establishing.setdefault(conv, asyncio.Lock())
        async with lock:
            ledger, fork = await self.stores.locked(
                lambda: (self.stores.read_ledger(conv), self.stores.read_pending_fork(conv)))
            if ledger is not None and ledger.get("sessionId"):
                return ledger
            if fork is not None and not fork.get("resolvedAt"):
                return await self._establish_fork(conv, owner, fork)
            held = self._held.get(conv) if hold else None
            if held is not None:
                return held[0]
            return await self._establish_fresh(conv, owner, ledger, hold=hold)

    async def establish_new(self, conversation_id: str, owner: str, base: Ledger | None) -> Ledger:
        """``establish(hold=True)`` of a conversation the caller just read (inside the mutex) as
        having no session and no fork record; ``base`` is its ledger as read (None when absent).
        Someone establishing it meanwhile costs only idempotent get-or-create calls: ``arm``
        keeps a session found on disk over the held one."""
        conv = check_conversation_id(conversation_id)
        lock = self._establishing.setdefault(conv, asyncio.Lock())
        async with lock:
            held = self._held.get(conv)
            if held is not None:
                return held[0]
            return await self._establish_fresh(conv, owner, base, hold=True)

    def _peers(self, owner: str) -> dict[str, str]:
        return {"user": self.settings.peer_for_owner(owner), "assistant": self.settings.assistant_peer_id}

    async def _establish_fresh(self, conv: str, owner: str, base: Ledger | None,
                               fork: ForkRecord | None = None, *, hold: bool = False) -> Ledger:
        peers = self._peers(owner)
        session_id = honcho_id("conv-", conv)
        await self.client.get_or_create_peer(peers["user"])
        await self.client.get_or_create_peer(peers["assistant"])
        await self.client.get_or_create_session(session_id, {
            peers["user"]: {"observe_me": True, "observe_others": False},
            peers["assistant"]: {"observe_me": False, "observe_others": True},
        })
        ledger: Ledger = base.copy() if base is not None else {"conversationId": conv}
        ledger.update({"conversationId": conv, "owner": owner, "sessionId": session_id, "peerIds": peers})
        ledger.setdefault("deliveredBatchIds", [])
        ledger.setdefault("anchors", [])
        ledger.setdefault("inflight", [])
        ledger.setdefault("turnCount", 0)
        ledger.setdefault("deliveredTotal", 0)
        if fork is not None:
            ledger["turnCount"] = max(ledger["turnCount"], int(fork["atTurn"]))
        if hold:
            self._held[conv] = (ledger, fork)
            return ledger
        return await self._commit_established(conv, ledger, fork)

    async def _commit_established(self, conv: str, ledger: Ledger, fork: ForkRecord | None) -> Ledger:
        def commit() -> Ledger:
            current = self.stores.read_ledger(conv)
            if current is not None and current.get("sessionId"):
                return current
            self.stores.write_ledger(ledger)
            if fork is not None:
                self.stores.write_pending_fork({**fork, "resolvedAt": _now_ms(self.clock),
                                                "sessionId": ledger["sessionId"]})
            return ledger

        result = await self.stores.locked(commit)
        self._announce_established(conv, result, fork)
        return result

    def _announce_established(self, conv: str, ledger: Ledger, fork: ForkRecord | None) -> None:
        self.changes.announce("outbox", "session.established", conv, session_id=ledger["sessionId"],
                          forked=fork is not None)
        if fork is not None:
            self.changes.announce("outbox", "fork.resolved", conv, parent_id=fork["parentId"],
                              at_turn=fork["atTurn"], fallback=fork.get("fallback"))

    def drop_held(self) -> None:
        """Forget established ledgers not written yet (a sweep stopped before ``arm``): the next
        establish makes the same get-or-create calls again."""
        self._held.clear()

    async def arm(self, next_batches: dict[str, list[str]]) -> set[str]:
        """Write, in one go, every held ledger and every ledger of ``next_batches`` (conversation ->
        the batch ids its first delivery round may send) naming those batches in flight.

        One write for all (``write_ledgers``: one folder fsync) instead of one per conversation
        when it is established and one before its first send. It happens before any of them is
        sent, so the crash rule holds unchanged: whatever a crash leaves in flight, the next
        delivery asks Honcho about. The first delivery of each conversation then skips its own
        write and that question when the ledger is still exactly as written here (``_Armed``).
        A ledger that cannot be read is left alone (its delivery reports it). Returns the
        conversations whose ledger holds a session now.
        """
        held, self._held = self._held, {}
        wanted = {conv: ids for conv, ids in next_batches.items() if ids}
        if not held and not wanted:
            return set()

        def write() -> tuple[dict[str, _Armed], list[tuple[str, Ledger, ForkRecord | None]], set[str]]:
            ledgers: list[Ledger] = []
            clean: dict[str, tuple[frozenset[str], Ledger]] = {}
            established: list[tuple[str, Ledger, ForkRecord | None]] = []
            for conv in dict.fromkeys([*held, *wanted]):
                try:
                    current = self.stores.read_ledger(conv)
                except (OutboxError, OSError):
                    continue
                if current is not None and current.get("sessionId"):
                    ledger = current
                elif conv in held:
                    ledger = held[conv][0]
                    established.append((conv, ledger, held[conv][1]))
                else:
                    continue
                ids = wanted.get(conv, [])
                if ids:
                    ledger = ledger.copy()
                    before = list(ledger.get("inflight") or [])
                    ledger["inflight"] = list(dict.fromkeys([*before, *ids]))
                    if not before:  # nothing of an earlier delivery may have landed
                        clean[conv] = (frozenset(ids), ledger)
                ledgers.append(ledger)
            stamps = self.stores.write_ledgers(ledgers)
            return ({conv: _Armed(stamps[conv], ids, ledger) for conv, (ids, ledger) in clean.items()},
                    established, {ledger["conversationId"] for ledger in ledgers})

        armed, established, ready = await self.stores.locked(write)
        self._armed.update(armed)
        for conv, ledger, fork in established:
            self._announce_established(conv, ledger, fork)
        return ready

    async def _establish_fork(self, conv: str, owner: str, fork: ForkRecord) -> Ledger:
        parent_id, at_turn = str(fork["parentId"]), int(fork["atTurn"])
        source, anchor = await self._anchor_for(parent_id, at_turn)
        if anchor is None:
            fallback = (f"anchor for turn {at_turn} of {parent_id} left the ledger window; "
                        "the child starts a fresh memory session")
            log.warning("memory-honcho: fork %s: %s", conv, fallback)
            fallen = fork.copy()
            fallen["fallback"] = fallback
            return await self._establish_fresh(conv, owner, None, fallen)
        clone = await self.client.clone_session(source["sessionId"], anchor["messageId"])
        ledger: Ledger = {
            "conversationId": conv, "owner": owner, "sessionId": str(clone["id"]), "peerIds": self._peers(owner),
            "deliveredBatchIds": [], "anchors": [], "inflight": [], "turnCount": at_turn, "deliveredTotal": 0,
            "forkedFrom": {"parentId": parent_id, "atTurn": at_turn, "messageId": str(anchor["messageId"])}}
        await self.client.add_peers(clone["id"], {
            ledger["peerIds"]["user"]: {"observe_me": True, "observe_others": False}})
        return await self._commit_established(conv, ledger, fork)

    async def _anchor_for(self, parent_id: str, at_turn: int) -> tuple[Ledger, Anchor | None]:
        """The ledger and anchor holding turn ``at_turn`` of ``parent_id``, following fork ancestry."""
        current = parent_id
        for _ in range(64):
            ledger = await self.stores.locked(functools.partial(self.stores.read_ledger, current))
            if ledger is None or int(ledger.get("turnCount", 0)) < at_turn:
                raise ForkError(f"fork waits: turn {at_turn} of conversation {parent_id} is not delivered yet")
            origin = ledger.get("forkedFrom")
            if origin and at_turn <= int(origin["atTurn"]):
                current = str(origin["parentId"])
                continue
            for anchor in ledger.get("anchors", []):
                if anchor["turn"] == at_turn and anchor.get("messageId"):
                    return ledger, anchor
            return ledger, None
        raise ForkError(f"fork ancestry of {parent_id} is deeper than 64 levels")

    # -- deliver -------------------------------------------------------------------------

    async def deliver_pending(self, conversation_id: str, owner: str = "user", *,
                              candidates: list[OutboxRecord] | None = None,
                              planned_key: tuple[int, int, int] | None = None,
                              progress: DeliveryProgress | None = None,
                              established: bool = False) -> DeliveryResult:
        """Send every pending record of the conversation.

        ``candidates`` limits the call to those records (the conversation's records as a caller
        read them, ``planned_key`` being ``stores.outbox_key()`` at that read): each is checked
        against the delivered marks the file holds now, so one delivered since that read is never
        sent again. ``progress`` collects counts as rounds commit, so a caller learns what a
        failed call still delivered. ``established=True`` (the sweep, right after ``arm``) says the
        ledger holds a session, so the establish step's read is skipped; a ledger found without
        one is established all the same.
        """
        conv = check_conversation_id(conversation_id)
        progress = progress if progress is not None else DeliveryProgress()
        before = (progress.records, progress.messages, progress.flipped_without_send)
        if not established:
            await self.establish(conv, owner)
        async with self._delivering:
            try:
                if not await self._deliver(conv, candidates, planned_key, progress):
                    await self.establish(conv, owner)  # its ledger was gone or had no session after all
                    await self._deliver(conv, candidates, planned_key, progress)
            except HonchoRequestError as exc:
                if exc.status != 404:
                    raise
                await self._reestablish(conv, exc)
                await self._deliver(conv, None, None, progress)
        return DeliveryResult(conv, progress.records - before[0], progress.messages - before[1],
                              progress.flipped_without_send - before[2])

    async def _deliver(self, conv: str, candidates: list[OutboxRecord] | None,
                       planned_key: tuple[int, int, int] | None, progress: DeliveryProgress) -> bool:
        """Plan and send; False (nothing done) when the ledger holds no session."""
        def plan() -> tuple[Ledger, list[OutboxRecord], int, frozenset[str] | None] | None:
            armed = self._armed.pop(conv, None)
            if armed is not None and self.stores.ledger_stamp(conv) == armed.stamp:
                ledger = armed.ledger.copy()  # the file is still exactly what arm wrote
                in_flight: frozenset[str] | None = armed.batch_ids
            else:
                read = self.stores.read_ledger(conv)
                if read is None or not read.get("sessionId"):
                    return None
                ledger, in_flight = read, None
            if candidates is None:
                records = [r for r in self.stores.read_outbox().records if r["conversationId"] == conv]
            elif planned_key is not None and planned_key == self.stores.outbox_key():
                records = candidates  # nothing appended or rewritten since that read: its marks are current
            else:
                settled = self.stores.settled([r["batchId"] for r in candidates])
                records = [r for r in candidates if r["batchId"] not in settled]
            window = set(ledger.get("deliveredBatchIds", []))
            pending = [r for r in records if r.get("status") != "delivered"]
            lingering = [r["batchId"] for r in pending if r["batchId"] in window]
            if lingering:
                self.stores.append_lines([{"op": "delivered", "batchIds": lingering, "at": _now_ms(self.clock)}])
            return ledger, [r for r in pending if r["batchId"] not in window], len(lingering), in_flight

        planned = await self.stores.locked(plan)
        if planned is None:
            return False
        ledger, todo, lingering, in_flight = planned
        progress.flipped_without_send += lingering
        # Rounds of at most half the delivered window, each flipped before the next begins, so a
        # crash can never leave more delivered-but-unflipped batches than the window remembers.
        size = max(1, self.settings.delivered_batch_window // 2)
        for start in range(0, len(todo), size):
            ledger = await self._round(conv, ledger, todo[start: start + size], progress, in_flight)
            in_flight = None
        return True

    async def _reestablish(self, conv: str, cause: HonchoRequestError) -> None:
        """Create the conversation's session again under its ledger's id (the server lost it)."""
        ledger = await self.stores.locked(lambda: self.stores.read_ledger(conv))
        if ledger is None or not ledger.get("sessionId"):
            raise cause
        session_id = str(ledger["sessionId"])
        peers = ledger.get("peerIds") or self._peers(str(ledger.get("owner") or "user"))
        log.warning("memory-honcho: session %s of conversation %s is gone from the memory service (%s); "
                    "establishing it again", session_id, conv, cause)
        self.client.forget()
        await self.client.get_or_create_peer(peers["user"])
        await self.client.get_or_create_peer(peers["assistant"])
        await self.client.get_or_create_session(session_id, {
            peers["user"]: {"observe_me": True, "observe_others": False},
            peers["assistant"]: {"observe_me": False, "observe_others": True},
        })
        self.changes.announce("outbox", "session.reestablished", conv, session_id=session_id, reason=str(cause))

    async def _round(self, conv: str, ledger: Ledger, todo: list[OutboxRecord],
                     progress: DeliveryProgress, in_flight: frozenset[str] | None = None) -> Ledger:
        """Send ``todo`` (in order), count and flip what completed; re-raise a failure after that.

        ``in_flight``: the batches the ledger on disk already names in flight, written (by ``arm``)
        before any of them was sent; when they cover ``todo``, nothing of it can have landed and
        the round needs neither Honcho's answer about them nor a ledger write before sending.
        """
        armed = in_flight is not None and all(record["batchId"] in in_flight for record in todo)
        landed = {} if armed else await self._landed(ledger)
        session_id = ledger["sessionId"]
        base_turn = int(ledger.get("turnCount", 0))
        # (record index, key, honcho message) for every message still to send, in order.
        queue: list[tuple[int, tuple[int, int], dict[str, object]]] = []
        last_key: dict[int, tuple[int, int]] = {}
        last_id: dict[int, str] = {}
        for i, record in enumerate(todo):
            for key, message in self._expand(record, conv, base_turn + i + 1):
                last_key[i] = key
                if (record["batchId"], key) in landed:
                    last_id[i] = landed[(record["batchId"], key)]
                else:
                    queue.append((i, key, message))
        queued = {q[0] for q in queue}
        done: set[int] = {i for i in range(len(todo)) if i not in queued}
        counted = 0
        sent = 0
        error: Exception | None = None
        limit = self.settings.batch_limit
        if queue:
            # One ledger write before the round's first call names every batch the round may send
            # (a superset of what is in flight at any moment: a crash asks Honcho about all of them);
            # an armed ledger already names them all on disk.
            ledger, counted = self._advance(ledger, todo, counted, done, last_id)
            if not armed:
                ledger["inflight"] = [todo[i]["batchId"] for i in range(counted, queue[-1][0] + 1)]
                await self.stores.locked(functools.partial(self.stores.write_ledger, ledger.copy()))
        for start in range(0, len(queue), limit):
            post = queue[start: start + limit]
            try:
                created = await self.client.add_messages(session_id, [q[2] for q in post])
            except Exception as exc:  # noqa: BLE001 - recorded below, re-raised after committing progress
                error = exc
                break
            self._step("sent", conv)
            sent += len(post)
            for (i, key, _), stored in zip(post, created):
                if key == last_key[i]:
                    last_id[i] = str(stored["id"])
                    done.add(i)
        ledger, counted = self._advance(ledger, todo, counted, done, last_id)
        if error is None:
            ledger["inflight"] = []
        completed = [record["batchId"] for record in todo[:counted]]
        now = _now_ms(self.clock)
        final = ledger

        def commit() -> None:
            # Inside a sweep the folder fsync waits for the sweep's marks (``flush_marks``): until
            # then a power loss can at worst bring back the ledger naming these batches in flight.
            self.stores.write_ledger(final, sync_folder=self._deferred is None)
            self._step("ledger-written", conv)
            if not completed:
                return
            marker: DeliveryMarker = {"lastDeliveryAt": now, "batchId": completed[-1], "conversationId": conv}
            deferred = self._deferred
            if deferred is not None:
                held = deferred.marks.setdefault(conv, [])
                if len(held) + len(completed) <= self.settings.delivered_batch_window // 2:
                    held.extend(completed)  # the ledger window covers them until the sweep's flush
                    deferred.marker = marker
                    return
                completed_now = held + completed
                del deferred.marks[conv]
                deferred.marker = marker
            else:
                completed_now = completed
            self.stores.sync_ledgers()
            self.stores.append_lines([{"op": "delivered", "batchIds": completed_now, "at": now}])
            self.stores.write_last_delivery(marker)

        await self.stores.locked(commit)
        progress.records += len(completed)
        progress.messages += sent
        if completed:
            self.changes.announce("outbox", "delivery.delivered", conv, records=len(completed), messages=sent,
                              at=now)
            await self._refresh_representation(conv, ledger)
        if error is not None:
            self.changes.announce("outbox", "delivery.failed", conv, error=str(error))
            raise error
        return ledger

    def _advance(self, ledger: Ledger, todo: list[OutboxRecord], counted: int, done: set[int],
                 last_id: dict[int, str]) -> tuple[Ledger, int]:
        """The ledger with the finished records after the first ``counted`` added, in order; new count.

        Records are counted as a prefix in file order (turn numbers follow that order); a record
        finished after an unfinished one waits for it.
        """
        ledger = ledger.copy()
        window = list(ledger.get("deliveredBatchIds", []))
        anchors = list(ledger.get("anchors", []))
        turn = int(ledger.get("turnCount", 0))
        total = int(ledger.get("deliveredTotal", 0))
        while counted < len(todo) and counted in done:
            record = todo[counted]
            turn += 1
            total += 1
            window.append(record["batchId"])
            anchors.append({"batchId": record["batchId"], "turn": turn, "messageId": last_id.get(counted)})
            counted += 1
        ledger["deliveredBatchIds"] = window[-self.settings.delivered_batch_window:]
        ledger["anchors"] = anchors[-self.settings.anchor_window:]
        ledger["turnCount"] = turn
        ledger["deliveredTotal"] = total
        return ledger, counted

    def _expand(self, record: OutboxRecord, conv: str, turn: int) -> list[tuple[tuple[int, int], dict[str, object]]]:
        """A record's messages as Honcho message-create bodies keyed by (message index, part)."""
        out: list[tuple[tuple[int, int], dict[str, object]]] = []
        repaired = bool(record.get("repaired"))
        for index, message in enumerate(record["messages"]):
            parts = chunk_text(message["content"], self.settings.chunk_chars)
            created_at = _created_at(message.get("createdAt"), record.get("createdAt"))
            for part, content in enumerate(parts, start=1):
                meta: dict[str, object] = {"conversation": conv, "batch_id": record["batchId"], "turn": turn, "index": index,
                        "part": part, "parts": len(parts), "role": message.get("role", "user")}
                if repaired:
                    meta["repaired"] = True
                body: dict[str, object] = {"content": content, "peer_id": message["peerId"], "metadata": meta}
                if created_at is not None:
                    body["created_at"] = created_at
                out.append(((index, part), body))
        return out

    async def _landed(self, ledger: Ledger) -> dict[tuple[str, tuple[int, int]], str]:
        """Messages of in-flight batches that reached Honcho before a crash: key -> message id."""
        inflight = ledger.get("inflight") or []
        if not inflight:
            return {}
        # Plain metadata equality joined by OR: the filter form Honcho documents.
        found = await self.client.list_messages(
            ledger["sessionId"], {"OR": [{"metadata": {"batch_id": batch}} for batch in inflight]})
        landed: dict[tuple[str, tuple[int, int]], str] = {}
        for message in found:
            meta = message.get("metadata") or {}
            key = (str(meta.get("batch_id")), (int(meta.get("index", 0)), int(meta.get("part", 1))))
            landed[key] = str(message["id"])
        return landed

    async def _refresh_representation(self, conv: str, ledger: Ledger) -> None:
        if not self.settings.representation_cache:
            return
        peer = ledger["peerIds"]["user"]
        try:
            text = await self.client.peer_representation(peer, session_id=ledger["sessionId"])
        except Exception as exc:  # noqa: BLE001 - the cache is best effort; delivery already succeeded
            log.warning("memory-honcho: representation refresh failed for conversation %s: %s", conv, exc)
            return
        snapshot: RepresentationSnapshot = {"conversationId": conv, "peerId": peer, "representation": text,
                    "fetchedAt": _now_ms(self.clock)}
        if self._deferred is not None:  # a sweep: every snapshot cached in one go at its end
            self._deferred.representations[conv] = snapshot
            return
        await asyncio.to_thread(self.stores.write_representation, conv, snapshot)  # a cache: not fsynced
