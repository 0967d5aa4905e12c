"""Receivers that deliver: a custom object's ``url`` and ``argv`` receivers are called for each
event it hears.

A custom object hears events as a watcher (``watch(..., watcher=<custom object>)``); each one is an
entry in its inbox, which is the durable queue: an entry is settled (marked read) only once its
receiver took it, or gave up on it. ``ReceiverDispatcher`` finds unsettled entries after every
write that may have delivered one (and once at open, for what arrived while nobody was
listening), and hands them to **one worker per receiver** (per custom object), each delivering its
own entries in order: a slow or hung receiver (an ``argv`` command that sleeps until its timeout,
then its backoff) delays only its own deliveries. What waits in memory is **bounded**: at most
``queue_size`` entries in all and a quarter of that for any one receiver; the rest wait in the
inbox for the next pass, so nothing is dropped.

- ``url``: the event as JSON in an HTTPS ``POST`` (httpx). A 2xx settles it; a 5xx, a timeout or a
  connection error is retried with exponential backoff (``backoff * 2**n``) up to ``max_attempts``;
  any other status ends the delivery as ``failed``. Plain ``http`` is accepted only for a loopback
  host (``127.0.0.1``, ``::1``, ``localhost``): a receiver on the same machine, as in tests.
- ``argv``: the command runs without a shell (``create_subprocess_exec``), the event JSON on its
  stdin, within its ``timeout`` (killed after). Exit status 0 settles it; any other exit is
  ``failed`` (the command's answer, not retried); a timeout is retried like a 5xx. Its exit status
  and the end of its stderr are kept.

A receiver hears only what its owner may read (``eligibility``), checked when an event is
published (``events``) and again just before each entry is sent: an entry about an object that
went private to another owner in between is settled without being sent, as if it did not exist.

Every attempt is a row of ``receiver_attempts`` (``Canvas.receiver_attempts``): the attempt
number, ``delivered``/``retrying``/``failed``, the HTTP or exit status and the error.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from typing import TypedDict
from urllib.parse import urlsplit

import httpx
from sqlalchemy import ColumnElement, func, select, true, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from services.clock import Clock
from services.text import public_url, redact_urls

from .engine import read_session, write_session
from .errors import DocumentInvalidError
from .models import CustomObjectRow, InboxRow, ReceiverAttemptRow
from .views import ReceiverAttempt

__all__ = ["LOOPBACK_HOSTS", "ReceiverConfig", "EventPayload", "check_receiver", "ReceiverDispatcher", "attempt_view",
           "event_payload"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Hosts a ``url`` receiver may reach over plain ``http``."""
MAX_STDERR = 4000
"""How much of an ``argv`` receiver's stderr is kept (its end)."""


class ReceiverConfig(TypedDict, total=False):
    """A custom object's receiver settings, as stored (JSON)."""

    url: str
    argv: list[str]
    timeout: float


class EventPayload(TypedDict):
    """What a ``url`` or ``argv`` receiver is given for one event (as JSON)."""

    receiver: str
    entry_id: int | None
    event_id: int | None
    object_id: str | None
    object_name: str
    event: str
    level: int
    actor_id: str | None
    at: float
    summary: str


def check_receiver(receiver: str | None, *, url: str | None = None, argv: object = None,
                   timeout: float | None = None) -> ReceiverConfig:
    """The receiver's settings, checked: a ``url`` needs an https URL (http on loopback only), an
    ``argv`` a non-empty list of strings; ``timeout`` is 0 < t <= 300 seconds."""
    config: ReceiverConfig = {}
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
            raise DocumentInvalidError(f"the receiver timeout {timeout!r} must be a number of seconds in (0, 300]")
        config["timeout"] = float(timeout)
    if receiver == "url":
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or not parts.hostname or parts.scheme not in ("https", "http"):
            raise DocumentInvalidError(f"a url receiver needs an https URL, not {public_url(str(url))!r}")
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            raise DocumentInvalidError(f"the receiver URL {public_url(str(url))!r} must use https "
                                       "(plain http only to a loopback host)")
        config["url"] = url
    elif receiver == "argv":
        if (not isinstance(argv, (list, tuple)) or not argv
                or not all(isinstance(a, str) and a and "\x00" not in a for a in argv)):
            raise DocumentInvalidError("an argv receiver needs its command as a non-empty list of strings")
        config["argv"] = [str(a) for a in argv]
    elif url is not None or argv is not None:
        raise DocumentInvalidError(f"url and argv go with a url or argv receiver, not {receiver!r}")
    return config


def _may_read(session: Session, entry: InboxRow) -> bool:
    """Whether the receiver ``entry`` belongs to may still read what the entry is about, at the moment
    it would be sent: in its owner's view (``delivery.reader_access``). An entry about an object that
    went private to another owner after it was queued, or naming one as its actor or in its event's
    data (``events.hidden_entry_filters``), is withheld, as if the object did not exist."""
    from .delivery import reader_access
    from .events import hidden_entry_filters
    from .objects import get_row

    access = reader_access(session, entry.owner_id)
    if access is None:
        return True
    about = get_row(session, entry.object_id) if entry.object_id else None  # None: gone, or a message
    if about is not None and not access.allows(about.id, about.owner_id, about.privacy):
        return False
    where: list[ColumnElement[bool]] = [col(InboxRow.id) == entry.id]
    return session.execute(select(col(InboxRow.id)).where(*where, *hidden_entry_filters(session, where, access))
                           ).first() is not None


def attempt_view(row: ReceiverAttemptRow) -> ReceiverAttempt:
    """One attempt as a read model."""
    return ReceiverAttempt(object_id=row.object_id, entry_id=row.entry_id, event_type=row.event_type,
                           attempt=row.attempt, outcome=row.outcome, status=row.status, error=row.error, at=row.at)


def event_payload(entry: InboxRow) -> EventPayload:
    """What a receiver is given for one inbox entry."""
    return {"receiver": entry.owner_id, "entry_id": entry.id, "event_id": entry.event_id,
            "object_id": entry.object_id, "object_name": entry.object_name, "event": entry.event_type,
            "level": entry.level, "actor_id": entry.actor_id, "at": entry.at, "summary": entry.summary}


class ReceiverDispatcher:
    """Hands a canvas's unsettled receiver entries to their ``url`` and ``argv`` receivers."""

    def __init__(self, engine: Engine, clock: Clock, *, queue_size: int = 100, max_attempts: int = 4,
                 backoff: float = 0.5, timeout: float = 10.0, transport: httpx.AsyncBaseTransport | None = None,
                 on_attempt: Callable[[ReceiverAttempt], None] | None = None) -> None:
        self.engine, self.clock = engine, clock
        self.queue_size = queue_size
        """The most entries waiting in memory, for all receivers and for any one; the rest wait in the inbox."""
        self.max_attempts = max_attempts
        """Attempts per entry before it is ``failed`` (5xx and timeouts only are retried)."""
        self.backoff = backoff
        """Seconds before the second attempt; doubled for each next one."""
        self.timeout = timeout
        """A receiver's timeout in seconds unless its settings give one."""
        self.active = False
        """Whether any custom object has a url or argv receiver (nothing is scanned otherwise)."""
        self.on_attempt = on_attempt
        self._transport = transport
        self._lanes: dict[str, deque[int]] = {}
        """Each receiver's (custom object's) entries waiting in memory, oldest first."""
        self._workers: dict[str, asyncio.Task[None]] = {}
        """One worker per receiver with entries: a slow receiver delays only its own deliveries."""
        self._queued: set[int] = set()
        self._scan: asyncio.Task[None] | None = None
        self._rescan = False
        self._client: httpx.AsyncClient | None = None

    def refresh(self) -> None:
        """Learn (blocking) whether there are receivers to serve."""
        with read_session(self.engine) as s:
            self.active = s.execute(select(CustomObjectRow.object_id).where(
                CustomObjectRow.receiver.in_(("url", "argv"))).limit(1)).first() is not None

    def poke(self) -> None:
        """Look for unsettled entries soon (after a write that may have delivered one)."""
        if not self.active:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._scan is not None and not self._scan.done():
            self._rescan = True
            return
        self._scan = loop.create_task(self._scan_loop())

    async def _scan_loop(self) -> None:
        while True:
            self._rescan = False
            await self._fill()
            if not self._rescan:
                return

    def _lane_size(self) -> int:
        return max(1, self.queue_size // 4)

    async def _fill(self) -> None:
        room = self.queue_size - len(self._queued)
        if room <= 0:
            return
        skip = sorted(self._queued)
        lane_size = self._lane_size()

        def find() -> list[tuple[int, str]]:
            # each receiver's oldest unsettled entries, at most ``lane_size`` of each, so that one
            # receiver's backlog never fills the window the others' entries are found in
            ranked = (select(InboxRow.id, InboxRow.owner_id, func.row_number().over(
                partition_by=InboxRow.owner_id, order_by=InboxRow.id).label("n"))
                .join(CustomObjectRow, CustomObjectRow.object_id == InboxRow.owner_id)
                .where(CustomObjectRow.receiver.in_(("url", "argv")), InboxRow.read_at.is_(None),
                       InboxRow.id.not_in(skip) if skip else true())).subquery()
            stmt = select(ranked.c.id, ranked.c.owner_id).where(ranked.c.n <= lane_size).order_by(ranked.c.id)
            with read_session(self.engine) as s:
                return [(int(i), str(o)) for i, o in s.execute(stmt.limit(room))]
        loop = asyncio.get_running_loop()
        for entry_id, owner in await asyncio.to_thread(find):
            lane = self._lanes.setdefault(owner, deque())
            if entry_id in self._queued or len(lane) >= lane_size:
                continue
            self._queued.add(entry_id)
            lane.append(entry_id)
            worker = self._workers.get(owner)
            if worker is None or worker.done():
                self._workers[owner] = loop.create_task(self._work(owner, lane))

    async def _work(self, owner: str, lane: deque[int]) -> None:
        """Deliver one receiver's entries in order, one at a time."""
        while lane:
            entry_id = lane[0]
            try:
                await self._deliver(entry_id)
            finally:
                lane.popleft()
                self._queued.discard(entry_id)
            if len(lane) < self._lane_size() // 2 + 1:
                self.poke()  # its later entries (or others') that waited in the inbox
        if self._lanes.get(owner) is lane:
            del self._lanes[owner]

    def _tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (self._scan, *self._workers.values()) if t is not None and not t.done()]

    async def drain(self) -> None:
        """Wait until every entry found so far was delivered or given up on."""
        while True:
            tasks = self._tasks()
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Stop delivering (entries not yet settled stay in the inbox for the next open)."""
        for task in self._tasks():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._workers.clear()
        self._lanes.clear()
        self._queued.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- one entry -----------------------------------------------------------------------------

    def _load(self, entry_id: int) -> tuple[InboxRow, str, ReceiverConfig] | None:
        with read_session(self.engine) as s:
            entry = s.get(InboxRow, entry_id)
            if entry is None or entry.read_at is not None:
                return None
            custom = s.get(CustomObjectRow, entry.owner_id)
            if custom is None or custom.receiver not in ("url", "argv"):
                return None
            allowed = _may_read(s, entry)
            s.expunge(entry)
            loaded = entry, custom.receiver, json.loads(custom.config or "{}")
        if not allowed:  # settled unheard: nothing is sent and no attempt recorded
            with write_session(self.engine) as s:
                s.execute(update(InboxRow).where(InboxRow.id == entry_id, InboxRow.read_at.is_(None))
                          .values(read_at=self.clock.time()).execution_options(synchronize_session=False))
            return None
        return loaded

    def _record(self, entry: InboxRow, attempt: int, outcome: str, status: int | None, error: str) -> None:
        with write_session(self.engine) as s:
            row = ReceiverAttemptRow(object_id=entry.owner_id, entry_id=entry.id or 0, event_type=entry.event_type,
                                     attempt=attempt, outcome=outcome, status=status, error=error[:MAX_STDERR],
                                     at=self.clock.time())
            s.add(row)
            if outcome in ("delivered", "failed"):
                s.execute(update(InboxRow).where(InboxRow.id == entry.id, InboxRow.read_at.is_(None))
                          .values(read_at=self.clock.time()).execution_options(synchronize_session=False))
            s.flush()
            view = attempt_view(row)
        if self.on_attempt is not None:
            self.on_attempt(view)

    async def _deliver(self, entry_id: int) -> None:
        loaded = await asyncio.to_thread(self._load, entry_id)
        if loaded is None:
            return
        entry, receiver, config = loaded
        body = json.dumps(event_payload(entry), sort_keys=True).encode()
        timeout = float(config.get("timeout", self.timeout))
        for attempt in range(1, self.max_attempts + 1):
            if receiver == "url":
                ok, status, error, retry = await self._post(str(config.get("url")), body, timeout)
            else:
                ok, status, error, retry = await self._run(list(config.get("argv") or []), body, timeout)
            if ok:
                await asyncio.to_thread(self._record, entry, attempt, "delivered", status, error)
                return
            final = not retry or attempt == self.max_attempts
            await asyncio.to_thread(self._record, entry, attempt, "failed" if final else "retrying", status, error)
            if final:
                return
            await asyncio.sleep(self.backoff * 2 ** (attempt - 1))

    async def _post(self, url: str, body: bytes, timeout: float) -> tuple[bool, int | None, str, bool]:
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        try:
            response = await self._client.post(url, content=body, timeout=timeout,
                                               headers={"content-type": "application/json"})
        except httpx.TimeoutException as exc:
            return False, None, f"timed out after {timeout:g} s ({type(exc).__name__})", True
        except httpx.TransportError as exc:
            return False, None, redact_urls(f"could not reach the receiver: {exc}"), True
        if 200 <= response.status_code < 300:
            return True, response.status_code, "", False
        text = response.text[:500]
        return False, response.status_code, f"HTTP {response.status_code}: {text}", response.status_code >= 500

    async def _run(self, argv: list[str], body: bytes, timeout: float) -> tuple[bool, int | None, str, bool]:
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            return False, None, f"could not start {argv[0]!r}: {exc}", False
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(body), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return False, None, f"timed out after {timeout:g} s; the command was killed", True
        err = (stderr or b"").decode("utf-8", "replace")[-MAX_STDERR:]
        code = proc.returncode if proc.returncode is not None else -1
        if code == 0:
            return True, 0, f"stderr: {err}" if err else "", False
        return False, code, f"exit status {code}" + (f"; stderr: {err}" if err else ""), False
