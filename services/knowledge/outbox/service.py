"""``MemoryOutbox``: the memory outbox as the Workspace uses it.

``await MemoryOutbox.open(root, changes)`` opens the stores under ``root`` (the workspace's
``memory/`` folder) and talks to the embedded fake memory service; pass
``honcho_transport=`` for another transport or ``base_url=`` (and ``api_key=``) for a real
Honcho server. Then: ``capture_turn``, ``sweep``, ``start``/``stop`` (the 15-minute timer),
``status``, ``search``/``chat``/``remember``, ``fork`` and ``representation``. Every change is
published on the feed as a ``Change`` with source ``"outbox"``.

Captured text is REPAIRED and FLAGGED, never refused (a turn cannot be sent again): a lone
surrogate becomes U+FFFD and NUL is dropped (``services.text.repair_text``), the record's
``repaired`` list says what was changed, and an ``outbox.warning`` change and an entry in the
status view's errors say so. Only a bad conversation id, owner, role or shape is refused
(``CaptureError``), and then nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from services.changes import ChangeFeed
from services.clock import Clock
from services.files import AsyncFileLock
from services.text import public_url, repair_text, text_problem

from .delivery import DeliveryEngine, DeliveryResult, StepHook
from .forks import ForkPlanner
from ...honcho_wire import Conclusion, InProcessHoncho
from .honcho_client import HonchoClient
from .honcho_view import HonchoSnapshot, read_memory
from .models import CaptureError, OutboxRecord, OutboxSettings, StoredMessage, check_conversation_id, honcho_id
from .quarantine import QuarantinedLine, drop_quarantined, read_quarantine, retry_quarantined
from .status import OutboxStatus, Representation, build_status, representation_of
from .stores import OutboxStores
from .sweep import SweepResult, run_sweep
from .tools import RecallTools

__all__ = ["MemoryOutbox", "StartChild"]

log = logging.getLogger("services.knowledge.outbox")

T = TypeVar("T")

StartChild = Callable[[str, list[dict[str, Any]]], Awaitable[str]]
"""Creates a child conversation from a parent id and the messages it starts with; returns its id."""

_ROLES = ("user", "assistant", "system")


class MemoryOutbox:
    """Capture, delivery, sweep, recall tools, forks and status of the memory outbox."""

    def __init__(self, stores: OutboxStores, client: HonchoClient, changes: ChangeFeed, *,
                 settings: OutboxSettings, clock: Clock, start_child: StartChild | None = None,
                 fake_honcho: InProcessHoncho | None = None, step_hook: StepHook | None = None,
                 served_at: str | None = None) -> None:
        self.stores = stores
        """The file stores under ``memory/``."""
        self.client = client
        """The Honcho client (fake or real server)."""
        self.changes = changes
        self.settings = settings
        self.clock = clock
        self.fake_honcho = fake_honcho
        """The memory service in this process (the embedded fake), when memory goes to one."""
        self.engine = DeliveryEngine(stores, client, settings, changes, clock, step_hook=step_hook)
        """The delivery engine (establish / deliver_pending)."""
        self.tools = RecallTools(self.engine, client, settings, changes, self.owner_of)
        self._forks = ForkPlanner(stores, client, self.engine, changes, clock)
        self._start_child = start_child
        self._owners: dict[str, str] = {}
        self._sweeping = asyncio.Lock()
        self._sweep_lock = AsyncFileLock(stores.state / "sweep.lock")
        self._timer: asyncio.Task[None] | None = None
        self.last_sweep: SweepResult | None = None
        """The result of the newest sweep of this process."""
        self.errors: deque[str] = deque(maxlen=50)
        """Recent sweep, delivery and tool errors, newest last."""
        self.embedded = fake_honcho is not None and served_at is None
        """Whether memory goes to the in-process fake only (the default, not worth a header note)."""
        self.destination = "embedded fake Honcho" if self.embedded else (
            f"{public_url(served_at or client.base_url)} (workspace {settings.workspace_id})")
        """Where memory goes, in a few words (the header shows it)."""
        self.unreachable: str | None = None
        """Why the memory service could not be reached (or refused the key) at the newest sweep
        that tried it; None once a sweep delivered again. Captures keep accumulating meanwhile."""

    @classmethod
    async def open(cls, root: Path, changes: ChangeFeed, *, honcho_transport: httpx.AsyncBaseTransport | None = None,
                   base_url: str | None = None, api_key: str | None = None, settings: OutboxSettings | None = None,
                   clock: Clock | None = None, start_child: StartChild | None = None,
                   step_hook: StepHook | None = None, honcho_service: InProcessHoncho | None = None,
                   served_at: str | None = None) -> "MemoryOutbox":
        """Open the outbox under ``root``, delivering to ``honcho_service``, ``honcho_transport`` or ``base_url``.

        ``honcho_service`` is a memory service in this process (the embedded fake,
        ``services.honcho.FakeHonchoService``, which the workspace makes), called through its
        transport; when it is also served over HTTP at ``served_at`` (a served workspace's
        ``/honcho``), apps read with Honcho's SDKs what the outbox delivered."""
        settings = settings or OutboxSettings()
        stores = await asyncio.to_thread(OutboxStores, Path(root), settings)
        fake = honcho_service
        if fake is not None:
            honcho_transport = fake.transport
            api_key = api_key or fake.api_key  # a served fake requires its key, in-process too
        elif honcho_transport is None and base_url is None:
            raise TypeError("MemoryOutbox.open needs a memory service: honcho_service, honcho_transport or base_url")
        client = HonchoClient(settings.workspace_id, base_url=base_url or "https://honcho.fake", api_key=api_key,
                              transport=honcho_transport)
        return cls(stores, client, changes, settings=settings, clock=clock or Clock(), start_child=start_child,
                   fake_honcho=fake, step_hook=step_hook, served_at=served_at)

    async def aclose(self) -> None:
        """Stop the timer, write the status index kept in memory and close the HTTP client."""
        await self.stop()
        await self.stores.locked(self.stores.flush_index)
        await self.client.aclose()
        self.engine.close()

    # -- capture ---------------------------------------------------------------------------

    async def capture_turn(self, conversation_id: str, owner: str | None, messages: list[dict[str, Any]]) -> str:
        """Append one completed root turn to the outbox; returns its batch id.

        ``messages`` are dicts with ``role`` (``user``/``assistant``/``system``), ``text`` and an
        optional ``peer``. Bad input raises ``CaptureError`` naming the field; nothing is written.
        Text that cannot be stored is repaired and the record flagged (see the module docstring);
        a failed write raises ``OutboxWriteError`` and leaves the outbox as it was.
        """
        conv = check_conversation_id(conversation_id)
        owner = "user" if owner is None else owner
        repairs: list[str] = []
        if isinstance(owner, str):
            owner = _repaired(owner, "owner", repairs)
        if not isinstance(owner, str) or not owner.strip() or len(owner) > 200:
            raise CaptureError(f"conversation {conv}: owner must be a non-empty string of at most 200 characters")
        if not isinstance(messages, list) or not messages:
            raise CaptureError(f"conversation {conv}: a turn needs at least one message")
        now_ms = int(self.clock.time() * 1000)
        stored: list[StoredMessage] = []
        for index, message in enumerate(messages):
            stored.append(self._message(conv, owner, index, message, now_ms, repairs))
        record: OutboxRecord = {"batchId": f"b_{uuid.uuid4().hex}", "conversationId": conv, "owner": owner,
                                  "status": "pending", "createdAt": now_ms, "messages": stored}
        if repairs:
            record["repaired"] = repairs
        await self.stores.append_committed([record])  # group commit: returns after the fsync covering it
        self._owners.setdefault(conv, owner)
        self.changes.announce("outbox", "capture.appended", conv, batch_id=record["batchId"], messages=len(stored),
                          repaired=len(repairs))
        if repairs:
            warning = (f"memory-honcho: captured turn {record['batchId']} of conversation {conv} was stored "
                       f"repaired ({'; '.join(repairs)})")
            log.warning("%s", warning)
            self.errors.append(warning)
            self.changes.announce("outbox", "outbox.warning", conv, message=warning)
        return record["batchId"]

    def _message(self, conv: str, owner: str, index: int, message: object, now_ms: int,
                 repairs: list[str]) -> StoredMessage:
        where = f"conversation {conv}: message {index}"
        if not isinstance(message, dict):
            raise CaptureError(f"{where} is not an object")
        role = message.get("role", "user")
        if role not in _ROLES:
            raise CaptureError(f"{where}: role {str(role)[:40]!r} is not one of {', '.join(_ROLES)}")
        text = message.get("text", message.get("content"))
        if not isinstance(text, str):
            raise CaptureError(f"{where}: 'text' must be a string")
        peer = message.get("peer")
        if peer is not None and (not isinstance(peer, str) or not peer.strip()):
            raise CaptureError(f"{where}: 'peer' must be a non-empty string")
        text = _repaired(text, f"message {index} text", repairs)
        if peer:
            peer = _repaired(peer, f"message {index} peer", repairs)
        if peer:
            peer_id = honcho_id("", peer)
        elif role == "user":
            peer_id = self.settings.peer_for_owner(owner)
        else:
            peer_id = self.settings.assistant_peer_id
        return {"role": role, "peerId": peer_id, "content": text, "createdAt": now_ms}

    async def owner_of(self, conversation_id: str) -> str:
        """The conversation's owner: from the ledger, else its newest outbox record, else ``"user"``."""
        conv = check_conversation_id(conversation_id)
        if conv in self._owners:
            return self._owners[conv]

        def find() -> str:
            try:
                ledger = self.stores.read_ledger(conv)
            except Exception:  # noqa: BLE001 - an unreadable ledger falls back to the outbox
                ledger = None
            if ledger and ledger.get("owner"):
                return str(ledger["owner"])
            owners = [r["owner"] for r in self.stores.read_outbox().records if r["conversationId"] == conv]
            return owners[-1] if owners else "user"

        owner = await self.stores.locked(find)
        self._owners[conv] = owner
        return owner

    # -- delivery and sweep ------------------------------------------------------------------

    async def deliver(self, conversation_id: str) -> DeliveryResult:
        """Deliver one conversation's pending records now (outside the sweep)."""
        conv = check_conversation_id(conversation_id)
        return await self.engine.deliver_pending(conv, await self.owner_of(conv))

    async def sweep(self) -> SweepResult:
        """Run one sweep now; a sweep already running in another process makes this one a no-op."""
        async with self._sweeping:
            if not await self._sweep_lock.try_acquire():
                result = SweepResult(started_at=self.clock.time(), finished_at=self.clock.time(),
                                     skipped="another process is sweeping this outbox")
                self.changes.announce("outbox", "sweep.skipped", "", reason=result.skipped)
                return result
            try:
                self.changes.announce("outbox", "sweep.started", "")
                result = await run_sweep(self.stores, self.engine, self.settings, self.clock, self.changes)
            finally:
                self._sweep_lock.release()
        self.last_sweep = result
        self.errors.extend(result.errors)
        if result.delivered_messages or (result.unreachable is None and not result.errors):
            self.unreachable = None
        elif result.unreachable is not None:
            self.unreachable = result.unreachable
        self.changes.announce("outbox", "sweep.finished", "", **result.as_dict())
        return result

    def start(self) -> None:
        """Start the sweep timer (every ``settings.sweep_interval_s`` of the injected clock)."""
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._tick(), name="outbox-sweep")

    async def stop(self) -> None:
        """Stop the sweep timer (a sweep in progress is cancelled; its work is crash-safe)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _tick(self) -> None:
        while True:
            await self.clock.sleep(self.settings.sweep_interval_s)
            try:
                await self.sweep()
            except Exception as exc:  # noqa: BLE001 - the timer must survive a failed sweep
                message = f"memory-honcho: sweep failed: {exc}"
                log.error("%s", message)
                self.errors.append(message)

    # -- recall tools, forks, status ---------------------------------------------------------

    async def search(self, conversation_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """The ``search`` recall tool."""
        return await self._tool(self.tools.search(conversation_id, query, limit))

    async def chat(self, conversation_id: str, query: str) -> str:
        """The ``chat`` recall tool."""
        return await self._tool(self.tools.chat(conversation_id, query))

    async def remember(self, conversation_id: str, fact: str) -> Conclusion:
        """The ``remember`` recall tool (a user-level conclusion)."""
        return await self._tool(self.tools.remember(conversation_id, fact))

    async def _tool(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except Exception as exc:
            self.errors.append(str(exc))
            raise

    async def fork(self, conversation_id: str, at_turn: int, *, start_child: StartChild | None = None) -> str:
        """Create a child conversation carrying the parent's messages up to ``at_turn``; its id."""
        starter = start_child or self._start_child
        conv = check_conversation_id(conversation_id)
        owner = await self.owner_of(conv)
        child = await self._forks.fork(conv, owner, at_turn, starter)
        self._owners.setdefault(child, owner)
        return child

    def representation(self, conversation_id: str) -> Representation | None:
        """The cached representation of a conversation (a synchronous cache read); None before one
        was fetched."""
        return representation_of(self.stores.read_representation(conversation_id))

    async def quarantined(self) -> list[QuarantinedLine]:
        """The lines set aside in quarantine, with their reasons."""
        return await self.stores.locked(lambda: read_quarantine(self.stores))

    async def retry_quarantined(self, item: QuarantinedLine) -> str:
        """Put a quarantined line back in the outbox when it now reads (its batch id), else
        ``QuarantineError`` and nothing changes."""
        record = await self.stores.locked(lambda: retry_quarantined(self.stores, item))
        self.changes.announce("outbox", "quarantine.retried", str(record["conversationId"]), batch_id=record["batchId"])
        return str(record["batchId"])

    async def drop_quarantined(self, item: QuarantinedLine) -> None:
        """Move a quarantined line out of the way (into ``dropped.jsonl``)."""
        await self.stores.locked(lambda: drop_quarantined(self.stores, item))
        self.changes.announce("outbox", "quarantine.dropped", "", position=item.position)

    async def read_honcho(self, *, session_id: str | None = None, peer_id: str | None = None,
                          query: str | None = None) -> HonchoSnapshot:
        """What the memory service holds (``honcho_view``), read with the client this outbox delivers with."""
        return await read_memory(self.client, session_id=session_id, peer_id=peer_id, query=query)

    async def status(self) -> OutboxStatus:
        """Counts per conversation, last delivery, pending forks, last sweep and recent errors."""
        return await self.stores.locked(lambda: build_status(self.stores, self.last_sweep, list(self.errors)))


def _repaired(value: str, what: str, repairs: list[str]) -> str:
    """``value`` made storable; what was wrong is added to ``repairs``."""
    problem = text_problem(value)
    if problem is None:
        return value
    repairs.append(f"{what}: {problem}")
    return repair_text(value)[0]
