"""The desk of a window attached to a served workspace: ``ServedDesk``.

It is the one ``services.desk.Desk``, acting through the server's control API (``RemoteCloud``) and
reading a ``StreamBook``: the runs and people as last read from the server, kept current by its
change stream, and the runs' events in the desk's fed ``RunMirror`` (the window's one copy of them).
Every change the server publishes is applied to the book and the mirror first and then republished
on the window's own ``ChangeFeed``, so panes and the follower read fresh views from the desk without
asking the server again (each run a batch touches is read from the server once). A window's own changes to the shared stores
(canvas, insights, OKF, outbox) are relayed to the server (``POST /changes``), tagged with the
window's ``origin``, so every other window redraws them too: in the order they were made, in batches
(one request in flight; what is made meanwhile goes in the next, up to ``BATCH_CHANGES`` or
``BATCH_BYTES``), and a ``caught_up`` marker goes through the same queue, behind them. The server's answer is the truth, so
two windows acting on one run see each other's refusals in the cloud's own words.

A dropped change stream reconnects with ``Last-Event-ID`` (the newest id read) and the server
sends exactly what was missed; when it no longer holds all of it (``reset``), or when no id was
read yet, the desk reads runs and people again and publishes what changed meanwhile once.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import sys
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..changes import RELAYED_SOURCES, Change, ChangeFeed
from ..clock import Clock
from ..desk import Desk, OperatorError, RunMirror
from ..errors import ServiceError
from ..times import parse_time, time_or_none
from .discovery import ServerInfo
from .client import ControlError, RemoteCloud, change_json

__all__ = ["ServedDesk", "StreamBook"]

Dto = dict[str, object]
"""A run, an event or a person as the control API answers it (a JSON object)."""


RELAYED = RELAYED_SOURCES
"""The sources whose changes a window relays to the others (through the server's change stream)."""
CAUGHT_UP = "attach.caught_up"
"""The kind of the marker a window publishes through the server and waits for on its stream
(``ServedDesk.caught_up``); never republished on a window's feed."""
CAUGHT_UP_S = 10.0
"""How long ``caught_up`` waits for its marker to come back."""
NOT_PEOPLE = frozenset({"failure.armed"})
"""The cloud's changes that leave the people as they were (every other one reads them again)."""
FIRST_RUNS = 1000
"""How many of the newest runs a window reads and holds when it attaches (with what the older ones
count): what the panes draw. An older run is read when something shows it (the runs list scrolled to
it, a filter or a search that finds it, a jump to it, the change stream naming it), so a window over
many runs opens in the time its newest take and holds what it shows, not every run."""
OLDER_RUNS = 2000
"""How many older runs one read asks for (a page of the runs list scrolled past its end, a page a
reader of every run walks)."""
SHARED_PAGES = 8
"""How many pages of older runs read lately a walk over them keeps for the walks going on beside it."""
PRELOAD_RUNS = 16
"""How many of the newest runs have their newest events read when a window attaches (or reloads)."""
PRELOAD_EVENTS = 2000
"""How many of each such run's newest events are read then."""
BATCH_CHANGES = 500
"""At most this many changes go in one relay request (the server takes up to ``MAX_CHANGES``)."""
BATCH_BYTES = 256 * 1024
"""A relay request is cut before its changes pass this many bytes (a server's bodies are capped at
1 MiB unless ``--max-body`` says otherwise; a batch refused as too large is sent again in halves)."""


UNKEPT = ("messages", "idempotency_key")
"""A run DTO's fields the book does not keep, read by no one from it: every message the run was ever
sent (its messages are its events, and the list grows with its history) and the app's idempotency key."""
TIMES = ("created_at", "updated_at")
"""A run DTO's times, kept as seconds (a window over many runs holds one float each, not a string)."""
SHARED = ("user_id", "status", "activity")
"""A run DTO's strings that many runs share, each kept once (interned)."""
COUNTED = ("user_id", "status", "deleted")
"""A run DTO's fields the counts by person and by status read."""


class _Queued(NamedTuple):
    """A change waiting to be relayed: as sent, as made, and who waits for it to be sent (a marker)."""

    part: bytes
    change: Change
    sent: "asyncio.Future[None] | None"


class StreamBook:
    """Runs and people of a served cloud as last read from its control API, kept current from its
    change stream (``RunBook``). It keeps no event log: the runs' events go to the window's
    ``RunMirror`` (fed: the window's one copy of them), as read and as the stream carries them."""

    keeps_dtos = True
    """A run's DTO is replaced when the run changes, never edited in place (a reader may keep what it
    made of one while the book holds it: ``Desk``'s list views)."""

    def __init__(self, remote: RemoteCloud, mirror: RunMirror) -> None:
        self.remote = remote
        self.mirror = mirror
        """Where each run's events are held, as read models."""
        self.runs: dict[str, Dto] = {}
        """Each run's DTO, by id, without its events or what ``UNKEPT`` names; its times as seconds."""
        self.persons: dict[str, Dto] = {}
        """Each person's DTO, by id."""
        self.unread = 0
        """How many runs are not read yet (0: every run is held): they are those before the start-order
        position of the oldest page read, which is this number."""
        self._people_before: dict[str, int] = {}
        """While runs are unread: by person, the runs before the first page read that were not deleted then."""
        self._statuses_before: dict[str, int] = {}
        """While runs are unread: by status, the runs before the first page read that were not deleted then."""
        self._counted: set[str] = set()
        """While runs are unread: the runs held that are before the first page read (the counts above
        hold them, as the server last counted them): read since by a page, a search, a jump, a reader or
        the change stream."""
        self._ranges: list[tuple[int, list[str]]] = []
        """While runs are unread: each page read, as its first position and its runs' ids in start order."""
        self._floor_time = 0.0
        """While runs are unread: when the oldest run of the first page started (a run read since that
        started before it is one of the older runs, which the counts above hold)."""
        self._base = 0
        """While runs are unread: the start-order position of the first page read (the counts above
        count the runs before it)."""
        self._walks = 0
        """How many walks over the older runs (``pages``) go on now."""
        self._shared: OrderedDict[tuple[int, int], asyncio.Future[tuple[list[Dto], int]]] = OrderedDict()
        """The pages of older runs read lately, for the other walks going on at once (``_older_page``)."""
        self._lent: set[str] = set()
        """Older runs held for a reader that lets them go when done (``lend``, ``let_go``): the
        follower's catch-up carrying them into the canvas. Read for anything else, a run is kept."""
        self._by_person: dict[str, int] = {}
        self._by_status: dict[str, int] = {}
        """The runs held that are not deleted (nor in ``_counted``), by person and by status: kept as
        each run is taken in, so a count is not a walk over every run on each change."""

    def run_dtos(self) -> list[Dto]:
        """The runs held, in the order read (not those lent to a reader: nothing lists them)."""
        if self._lent:
            lent = self._lent
            return [dto for run_id, dto in self.runs.items() if run_id not in lent]
        return list(self.runs.values())

    def run_dto(self, run_id: str) -> Dto | None:
        return self.runs.get(run_id)

    def people(self) -> list[Dto]:
        return list(self.persons.values())

    def person(self, user_id: str) -> Dto | None:
        return self.persons.get(user_id)

    def absorb_run(self, dto: Mapping[str, object], *, owned: bool = False, older: bool = False) -> None:
        """Keep a run as an answer showed it (its events too, when the answer carries them); an
        ``owned`` DTO (a list's, read here and held by nobody else) is kept as it is, not copied.
        ``older``: one of the runs before the first page read (a page of them showed it)."""
        run = dto if owned and isinstance(dto, dict) else dict(dto)
        events = run.pop("events", None)
        _kept(run)
        run_id = str(run["id"])
        if events is not None and not isinstance(events, list):  # refused before anything is kept
            raise TypeError(f"the events of run {run_id} are {type(events).__name__}, not a list")
        runs = self.runs
        old = runs.get(run_id)
        self._lent.discard(run_id)
        if old is not None:
            self._tally(old, -1)
        elif self.unread:  # older runs unread: one of them, counted by the server? (every run of the
            # first page is held: one not held that started when the oldest of them did is older)
            started = run.get("created_at")
            if older or (type(started) is float and started <= self._floor_time):
                self._counted.add(run_id)
        runs[run_id] = run
        self._tally(run, 1)
        if events is not None:
            self.mirror.hold(run_id, events)

    def append_event(self, run_id: str, event: Dto) -> None:
        """An event the change stream carried (one already held is skipped)."""
        self.mirror.append(run_id, event)

    async def load(self, *, full: bool = False, first: int | None = None) -> None:
        """Read every run (without its events: the newest runs' tails are read next, the rest when
        shown) and every person; ``full`` also forgets runs the server no longer has. With ``first``,
        only the newest ``first`` runs are read, with what the older ones count (``unread`` says how
        many remain: ``read_older`` reads them)."""
        params = {"limit": first, "counts": 1} if first is not None else None
        answer = await self.remote.call("GET", "/runs", params=params)
        people = await self.remote.people()
        # swapped in one step, after both reads: nobody sees the runs of the new read beside the old people
        if full:
            self.runs = {}
            self.mirror.forget()
        self.unread = 0  # the page is taken in whole, then what it says of the rest
        self._counted, self._lent = set(), set()
        page = answer["runs"]
        for dto in page:
            self.absorb_run(dto, owned=True)
        self.persons = {p["id"]: p for p in people}
        low = answer.get("from") if first is not None else 0
        before = low if type(low) is int and low > 0 else 0  # a server that answers every run: none
        counts = answer.get("counts_before") if before else None
        counts = counts if isinstance(counts, dict) else {}
        self.unread = before
        self._people_before = _counts(counts.get("people"))
        self._statuses_before = _counts(counts.get("statuses"))
        self._base = before
        self._ranges = [(before, [str(dto["id"]) for dto in page])] if before else []
        times = [t for t in (self.runs[run_id].get("created_at") for run_id in self._ranges[0][1])
                 if type(t) is float] if before else []
        self._floor_time = min(times, default=0.0)
        self._recount()

    async def read_older(self, count: int) -> bool:
        """Read the ``count`` runs before the oldest read (a run held already was read since, newer,
        and is kept); True while older runs remain. Once every run is read, the book holds them in
        start order, as a whole read does."""
        if not self.unread:
            return False
        answer = await self.remote.call("GET", "/runs", params={"limit": count, "before": self.unread})
        low = answer.get("from")
        ids: list[str] = []
        counted = self._counted
        for dto in answer["runs"]:
            run_id = str(dto["id"])
            ids.append(run_id)
            self._lent.discard(run_id)  # listed from now on
            held = self.runs.get(run_id)
            if run_id not in counted:  # before the first page: the server's counts hold it
                if held is not None:
                    self._tally(held, -1)
                counted.add(run_id)
            if held is None:
                self.absorb_run(dto, owned=True)
        # a position that does not go down would be read forever: what the server answers ends it
        low = low if type(low) is int and 0 <= low < self.unread else 0
        self._ranges.append((low, ids))
        self.unread = low
        if not low:
            self._in_start_order()
        return bool(low)

    def _in_start_order(self) -> None:
        """Every run read: hold them in start order (the pages' order, then runs started since)."""
        ordered: dict[str, Dto] = {}
        runs = self.runs
        for _, ids in sorted(self._ranges, key=lambda r: r[0]):
            for run_id in ids:
                dto = runs.get(run_id)
                if dto is not None and run_id not in ordered:
                    ordered[run_id] = dto
        for run_id, dto in runs.items():
            ordered.setdefault(run_id, dto)
        self.runs = ordered
        self._ranges, self._counted, self._people_before, self._statuses_before = [], set(), {}, {}
        self._base, self._lent = 0, set()
        self._recount()

    def hold_older(self, dtos: Sequence[Mapping[str, object]], *, lent: bool = False) -> list[str]:
        """Hold the runs of ``dtos`` (older runs a page showed) that are not held, or held only for a
        reader; the ids of those taken in. ``lent``: for a reader that lets them go when done
        (``let_go``), and nothing lists them meanwhile."""
        taken = []
        for dto in dtos:
            run_id = str(dto["id"])
            if lent and run_id in self.runs or not lent and self.keep(run_id):
                continue
            self.absorb_run(dto, older=True)
            if run_id in self._counted:  # one of the older runs (once every run is read, all are kept)
                if lent:
                    self._lent.add(run_id)
                taken.append(run_id)
        return taken

    def is_lent(self, run_id: str) -> bool:
        """Whether the run is held only for a reader (``lend``): nothing lists it."""
        return run_id in self._lent

    def keep(self, run_id: str) -> bool:
        """Keep a run held (one lent to a reader stays once something shows it); False when not held."""
        self._lent.discard(run_id)
        return run_id in self.runs

    def let_go(self, run_ids: Sequence[str]) -> None:
        """Let go of runs ``hold_older(lent=True)`` took in that nothing else read since."""
        self._forget_older([run_id for run_id in run_ids if run_id in self._lent])

    def release(self, run_ids: Sequence[str]) -> None:
        """Let go of older runs a search held (a filter's matches, once it changes), but those a page
        of the runs list read since."""
        paged = {run_id for _, ids in self._ranges for run_id in ids}
        self._forget_older([run_id for run_id in run_ids if run_id not in paged])

    def _forget_older(self, run_ids: Sequence[str]) -> None:
        """Stop holding older runs (those the server's counts hold: the counts stay as they are)."""
        for run_id in run_ids:
            if run_id in self._counted:
                self._counted.discard(run_id)
                self._lent.discard(run_id)
                self.runs.pop(run_id, None)
                self.mirror.forget(run_id)

    def counted_apart(self, run_id: str) -> bool:
        """Whether the run is held and one of the older runs the server's counts hold: a change of
        its status, person or deletion is counted by reading those counts again (``recount``)."""
        return run_id in self._counted

    async def recount(self) -> None:
        """Read again what the server counts of the runs before the first page read (a run among them
        changed): by person and by status, the runs not deleted."""
        base = self._base
        if not base or not self.unread:
            return
        answer = await self.remote.call("GET", "/runs", params={"limit": 1, "before": base, "counts": 1})
        counts = answer.get("counts_before")
        counts = counts if isinstance(counts, dict) else {}
        people, statuses = _counts(counts.get("people")), _counts(counts.get("statuses"))
        for dto in answer["runs"]:  # the page's one run, the last before the first page: counted too
            _count_in(dto, people, statuses, 1)
        if self._base == base and self.unread:  # no whole read meanwhile
            self._people_before, self._statuses_before = people, statuses

    async def pages(self, count: int, *, held: bool = True) -> AsyncGenerator[list[Dto], None]:
        """Every run a page at a time, as the book keeps a DTO (the runs held first, as held; then the
        older ones, ``count`` at a time from the server, newest page first, none of them held):
        what a reader of every run walks without the window holding them all. ``held=False``: only
        the runs not held."""
        runs = self.runs
        seen = set(runs) if held else set()  # as they are now: a run held while this walks is read below
        before = self.unread
        if held:
            snapshot = list(runs.values())
            for start in range(0, len(snapshot), count):
                yield snapshot[start:start + count]
            del snapshot
        self._walks += 1
        try:
            while before > 0:
                read, low = await self._older_page(before, count)
                page: list[Dto] = []
                for dto in read:
                    run_id = str(dto["id"])
                    if run_id in seen:
                        continue
                    now = self.runs.get(run_id)  # read since: as held (it is newer)
                    if now is None:
                        page.append(dto)
                    elif held or run_id in self._lent:  # one lent to a reader is not held for the window
                        page.append(now)
                if page:
                    yield page
                before = low if 0 <= low < before else 0
        finally:
            self._walks -= 1
            if not self._walks:  # what was kept for a walk that stopped early
                self._shared.clear()

    async def _older_page(self, before: int, count: int) -> tuple[list[Dto], int]:
        """The ``count`` runs before the position ``before`` as the book keeps a DTO (shared: nobody
        edits them), and the position the page starts at (-1 when the server does not say). Read once
        for the walks going on at once: the newest ``SHARED_PAGES`` pages read are kept for the others
        while more than one walks (the follower's catch-up and the history's baseline walk together),
        and a read on its way is waited for by a walk that asks for it meanwhile."""
        key = (before, count)
        read = self._shared.get(key)
        if read is None:
            read = asyncio.ensure_future(self._read_page(before, count))
            read.add_done_callback(_retrieved)  # a walk that stopped waiting leaves its failure unread
            self._shared[key] = read  # a walk beginning meanwhile waits for the same read
            while len(self._shared) > SHARED_PAGES:
                self._shared.popitem(last=False)
        try:
            page = await asyncio.shield(read)
        except ServiceError:
            if self._shared.get(key) is read:  # read again by the next walk that asks
                del self._shared[key]
            raise
        if self._walks < 2:  # a walk alone keeps nothing
            self._shared.pop(key, None)
        return page

    async def _read_page(self, before: int, count: int) -> tuple[list[Dto], int]:
        answer = await self.remote.call("GET", "/runs", params={"limit": count, "before": before})
        low = answer.get("from")
        return [_kept(dto) for dto in answer["runs"]], low if type(low) is int else -1

    def runs_by_person(self) -> dict[str, int]:
        """How many runs each person has that are not deleted: counted over the runs held and, while
        older runs are unread, with what the server counted of them."""
        return self._counted_by("user_id", self._people_before)

    def runs_by_status(self) -> dict[str, int]:
        """How many runs have each status, deleted ones left out (counted as ``runs_by_person``)."""
        return self._counted_by("status", self._statuses_before)

    def _counted_by(self, field: str, before: dict[str, int]) -> dict[str, int]:
        counts = dict(before)
        for key, count in (self._by_person if field == "user_id" else self._by_status).items():
            if count:
                counts[key] = counts.get(key, 0) + count
        return counts

    def _tally(self, dto: Mapping[str, object], sign: int) -> None:
        """Count a run held in (``sign`` 1) or out (-1) of the counts by person and by status."""
        if str(dto["id"]) not in self._counted:
            _count_in(dto, self._by_person, self._by_status, sign)

    def _recount(self) -> None:
        """The counts by person and by status, counted again over every run held."""
        self._by_person, self._by_status = {}, {}
        for dto in self.runs.values():
            self._tally(dto, 1)

    async def refresh_people(self) -> None:
        people = await self.remote.people()
        self.persons = {p["id"]: p for p in people}


class ServedDesk(Desk):
    """The operator's desk over a served cloud (``RemoteCloud``), kept current by its change stream."""

    def __init__(self, remote: RemoteCloud, changes: ChangeFeed, *, clock: Clock | None = None,
                 reconnect_s: float = 0.5, folder: Path | None = None, info: ServerInfo | None = None) -> None:
        mirror = RunMirror()  # fed by the book, before each change is published
        self.stream_book = StreamBook(remote, mirror)
        super().__init__(remote, self.stream_book, changes, clock=clock or Clock(), mirror=mirror)
        self.remote = remote
        """The ``RemoteCloud`` of the server."""
        self.folder = folder
        """The served workspace: where a server that went away is looked for again (``serve.json``)."""
        self.info = info
        """The server this desk follows (its URL, process and token), as ``serve.json`` last named it."""
        self.lost_since: float | None = None
        """When the server stopped answering (None while it answers)."""
        self.errors: deque[str] = deque(maxlen=100)
        """What went wrong following the server (a dropped stream, a run that could not be read)."""
        self.last_event_id: str | None = None
        """The id of the newest change read from the stream (sent as ``Last-Event-ID`` on reconnect)."""
        self.reconnect_s = reconnect_s
        """How long to wait before reconnecting a dropped change stream."""
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._unrelay: Callable[[], None] | None = None
        self._queue: deque[_Queued] = deque()
        """Changes to relay, oldest first: sent in batches, one request in flight at a time."""
        self._sender: asyncio.Task[None] | None = None
        self._batch_bytes = BATCH_BYTES
        self._closing = False
        self._connection: "asyncio.Future[None] | None" = None
        self._markers: dict[str, asyncio.Future[None]] = {}
        """The ``caught_up`` markers sent and not yet seen on the stream, by id."""

    # -- following the server ------------------------------------------------------------------

    async def load(self, *, full: bool = False, first: int | None = None) -> None:
        """Read every run (with ``first``: the newest ``first``, and what the older ones count) and
        every person from the server, then the newest events of the newest runs (``PRELOAD_RUNS``,
        each its newest ``PRELOAD_EVENTS``): what the panes show first is held when they draw, and the
        rest of every run is read when it is shown."""
        await self.stream_book.load(full=full, first=first)
        live = (d for d in self.stream_book.runs.values() if not d.get("deleted"))
        wanted = [str(d["id"]) for d in heapq.nlargest(PRELOAD_RUNS, live, key=lambda d: parse_time(d.get("created_at")))]
        gate = asyncio.Semaphore(4)

        async def tail(run_id: str) -> None:
            async with gate:
                try:
                    await self.hold_tail(run_id, PRELOAD_EVENTS)
                except ServiceError as exc:  # gone meanwhile: the next change names it again
                    self.errors.append(f"run {run_id}: {exc}")

        await asyncio.gather(*(tail(run_id) for run_id in wanted))

    async def start(self) -> None:
        """Follow the server's change stream (returns once subscribed, then reloads to close the gap)."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._follow())

        here = threading.get_ident()

        def relay(change: Change) -> None:  # any thread: the send happens on the loop
            if change.source in RELAYED and "origin" not in change.data and not loop.is_closed():
                if threading.get_ident() == here:
                    self._send_many((change,))  # queued now: a marker asked for after it comes after it
                else:
                    loop.call_soon_threadsafe(self._send_many, (change,))

        def relay_many(changes: Sequence[Change]) -> None:  # a burst: one hop onto the loop
            mine = [c for c in changes if c.source in RELAYED and "origin" not in c.data]
            if mine and not loop.is_closed():
                if threading.get_ident() == here:
                    self._send_many(mine)
                else:
                    loop.call_soon_threadsafe(self._send_many, mine)

        self._unrelay = self.changes.subscribe(relay, many=relay_many)
        waiter = asyncio.ensure_future(self._subscribed.wait())
        done, _ = await asyncio.wait({waiter, self._task}, timeout=10.0, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            waiter.cancel()
            self._task.result()
        if waiter not in done:
            waiter.cancel()
            raise OperatorError(f"the change stream of {self.remote.url} did not open")
        # anything that changed before the subscription took is read again: the newest runs, and what
        # the older ones count (each of those is read when something shows it)
        await self.load(first=FIRST_RUNS)

    def unread_runs(self) -> int:
        return self.stream_book.unread

    async def read_older_runs(self, count: int | None = None) -> int:
        from ..collector import collecting_less

        book = self.stream_book
        held = len(book.runs)
        with collecting_less():  # a page of runs read, each held from then on
            await book.read_older(count or OLDER_RUNS)
        return len(book.runs) - held

    def has_run(self, run_id: str) -> bool:
        book = self.stream_book
        return run_id in book.runs and not book.is_lent(run_id)

    async def hold_run(self, run_id: str) -> bool:
        if self.stream_book.keep(run_id):
            return True
        try:
            dto = await self._read_run(run_id)
        except ControlError as exc:
            if exc.status == 404:
                return False
            raise
        if run_id not in self.stream_book.runs:  # the change stream may have read it meanwhile (newer)
            self.stream_book.absorb_run(dto, owned=True)
        return True

    def hold_runs(self, dtos: Sequence[Mapping[str, object]], *, lent: bool = False) -> list[str]:
        return self.stream_book.hold_older(dtos, lent=lent)

    async def _read_run(self, run_id: str) -> Dto:
        """The run as the server has it now, without its events."""
        dto: Dto = await self.remote.call("GET", f"/runs/{_q(run_id)}", params={"events": "0"})
        return dto

    def let_go(self, run_ids: Sequence[str]) -> None:
        self.stream_book.let_go(run_ids)

    def release_runs(self, run_ids: Sequence[str]) -> None:
        self.stream_book.release(run_ids)

    async def run_pages(self, *, held: bool = True) -> AsyncGenerator[list[Mapping[str, Any]], None]:
        async with contextlib.aclosing(self.stream_book.pages(OLDER_RUNS, held=held)) as pages:
            async for page in pages:  # closed with this walk (a search that stops early ends its walk)
                yield list(page)

    def runs_by_person(self) -> dict[str, int]:
        return self.stream_book.runs_by_person()

    def waiting_on_user(self) -> int:
        return self.stream_book.runs_by_status().get("waiting_on_user", 0)

    async def caught_up(self, timeout: float = CAUGHT_UP_S) -> bool:
        """Wait until every change the server published before now is in the book and the mirror: a
        marker is published through the server (``POST /changes``, behind every change this window
        relays before it) and, the stream keeping the server's order, once it comes back everything
        before it has been applied. False (and the reason kept in ``errors``) when the marker cannot
        be sent or does not come back in time."""
        token = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        sent: asyncio.Future[None] = loop.create_future()
        self._markers[token] = waiter
        try:
            marker = Change("workspace", CAUGHT_UP, token, {"origin": self.origin})
            # queued behind the changes other threads have handed to the loop before now, too
            loop.call_soon(self._enqueue, _Queued(change_json(marker), marker, sent))
            await sent
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
            return True
        except (ServiceError, asyncio.TimeoutError) as exc:
            self.errors.append(f"catching up with {self.remote.url}: {exc or 'no answer in time'}")
            return False
        finally:
            self._markers.pop(token, None)

    # -- relaying this window's changes --------------------------------------------------------

    def _send_many(self, changes: Sequence[Change]) -> None:
        """Queue this window's changes for the others (tagged with its ``origin``), in order."""
        for change in changes:
            tagged = Change(change.source, change.kind, change.id, {**change.data, "origin": self.origin})
            try:
                part = change_json(tagged)
            except (TypeError, ValueError) as exc:  # not JSON: nobody could read it
                self.errors.append(f"relay {change.kind} {change.id}: {type(exc).__name__}: {exc}")
                continue
            self._queue.append(_Queued(part, tagged, None))
        self._start_sender()

    def _enqueue(self, item: _Queued) -> None:
        self._queue.append(item)
        self._start_sender()

    def _start_sender(self) -> None:
        if self._queue and (self._sender is None or self._sender.done()):
            self._sender = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Send the queue a batch at a time (what is queued meanwhile goes in the next one), so the
        server publishes this window's changes in the order they were made."""
        queue = self._queue
        while queue:
            batch = [queue.popleft()]
            size = len(batch[0].part)
            while queue and len(batch) < BATCH_CHANGES and size + len(queue[0].part) + 1 <= self._batch_bytes:
                size += len(queue[0].part) + 1
                batch.append(queue.popleft())
            answered = await self._publish(batch, size)
            if not answered and self._closing and queue:  # closing, and the server is not answering
                dropped = list(queue)
                queue.clear()
                self._not_sent(dropped, ServiceError(f"the window closed while {self.remote.url} did not answer"))

    async def _publish(self, batch: list[_Queued], size: int) -> bool:
        """Send one batch; False when the server did not answer (True when it took or refused it)."""
        try:
            await self.remote.publish_encoded([item.part for item in batch])
        except ControlError as exc:
            if exc.status in (400, 413) and len(batch) > 1:
                # refused whole: too large for this server, or one change in it refused; halves
                # go separately, so only what the server refuses on its own is lost
                if exc.status == 413:
                    self._batch_bytes = max(1024, min(self._batch_bytes, size // 2))
                half = len(batch) // 2
                first = await self._publish(batch[:half], sum(len(item.part) + 1 for item in batch[:half]))
                return await self._publish(batch[half:], sum(len(item.part) + 1 for item in batch[half:])) and first
            self._not_sent(batch, exc)
            return exc.code != "unreachable"
        except Exception as exc:  # the sender keeps going: the next batch may get through
            self._not_sent(batch, exc)
            return False
        for item in batch:
            if item.sent is not None and not item.sent.done():
                item.sent.set_result(None)
        return True

    def _not_sent(self, batch: list[_Queued], exc: Exception) -> None:
        """One line in ``errors`` for a batch the server did not take; a marker in it fails its waiter."""
        relayed = [item.change for item in batch if item.sent is None]
        if len(relayed) == 1:  # the other windows miss one redraw; this window's data is already saved
            self.errors.append(f"relay {relayed[0].kind} {relayed[0].id}: {exc}")
        elif relayed:
            self.errors.append(f"relay: {len(relayed)} changes not relayed ({relayed[0].kind} {relayed[0].id} "
                               f"to {relayed[-1].kind} {relayed[-1].id}): {exc}")
        failure = exc if isinstance(exc, ServiceError) else ServiceError(f"{type(exc).__name__}: {exc}")
        for item in batch:
            if item.sent is not None and not item.sent.done():
                item.sent.set_exception(failure)

    async def stop(self) -> None:
        """Stop following: what is queued is sent first (dropped, in one line of ``errors``, once a
        batch finds the server not answering), then the change stream closes."""
        self._closing = True
        if self._unrelay is not None:
            self._unrelay()
            self._unrelay = None
        while self._sender is not None and not self._sender.done():  # what is queued is sent first
            with contextlib.suppress(Exception):
                await self._sender
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._task = None
        await self.drop_stream()  # the connection closes before the window goes

    async def _follow(self) -> None:
        """Follow the change stream; after a drop, resume after the last change seen (the server
        sends what was missed, or ``reset``, and then everything is read again)."""
        import httpx

        from .client import ControlError

        while True:
            self._connection = asyncio.ensure_future(self._read_stream())
            dropped_here = False
            try:
                await asyncio.shield(self._connection)
                error = "the server closed the change stream"
            except asyncio.CancelledError:
                if not self._connection.cancelled():  # this task itself was cancelled: stop
                    self._connection.cancel()
                    raise
                dropped_here = True  # only the connection was dropped (``drop_stream``): reconnect below
            except (httpx.TransportError, httpx.StreamError, ControlError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                if self.lost_since is None:
                    self.errors.append(f"change stream: {error}")
            if not dropped_here and self.lost_since is None:
                self.lost_since = self.clock.time()
                self.changes.announce("workspace", "attach.lost", self.remote.url, error=error)
            await asyncio.sleep(self.reconnect_s)
            if self.lost_since is not None:
                await self._find_server_again()
            if self.last_event_id is None:  # nothing to resume from: read everything once, then follow
                with contextlib.suppress(Exception):
                    await self._reload()

    async def _find_server_again(self) -> None:
        """While the server is gone: read ``serve.json`` again, and follow the server it names now
        (the same one back, or a new process on another port with another token)."""
        if self.folder is None:
            return
        from .client import RemoteCloud
        from .discovery import find_server

        try:
            found = await find_server(self.folder)
        except ServiceError:  # a server holds the folder but does not answer yet: try again later
            return
        if found is None or (self.info is not None and (found.url, found.token) == (self.info.url, self.info.token)):
            return
        old, self.info = self.remote, found
        self.remote = self.stream_book.remote = RemoteCloud(found.url, found.token)
        if getattr(self.control, "inner", None) is old:  # a wrapper (a recording's) keeps wrapping the new one
            setattr(self.control, "inner", self.remote)
        else:
            self.control = self.remote
        self.last_event_id = None  # another process: nothing to resume, everything is read again
        with contextlib.suppress(Exception):
            await old.aclose()

    def unavailable(self) -> str | None:
        """Why an action cannot reach the server now (None while it answers)."""
        if self.lost_since is None:
            return None
        from ..clock import iso

        return (f"the server at {self.remote.url} has not answered since {iso(self.lost_since)[11:19]} UTC; "
                f"the window keeps trying and says when it is back")

    def _came_back(self) -> None:
        if self.lost_since is not None:
            self.lost_since = None
            self.changes.announce("workspace", "attach.back", self.remote.url)

    async def _read_stream(self) -> None:
        async for batch in self.remote.change_batches(self.last_event_id, self.origin):
            if batch.subscribed:
                self._subscribed.set()
                if self.lost_since is not None:
                    if self.last_event_id is None:
                        await self._reload()  # a new server process: read everything, publish what changed
                    self._came_back()
                continue
            if batch.reset:
                await self._reload()
            if batch.changes:
                await self._apply(batch.changes)
            if batch.last_id:
                self.last_event_id = batch.last_id

    async def _reload(self) -> None:
        """After a ``reset``: read the newest runs (and what the older ones count) and every person
        again, then publish what changed meanwhile once (each new run, each event not seen before,
        each deletion) of the runs held, so the panes and the follower miss nothing they show; the
        shared stores' panes, and the follower (which weighs every run against the canvas), are told
        to read again (``attach.reloaded``)."""
        book = self.stream_book
        # how far this window has seen each run: what its stream carried (the mirror's newest), or
        # for a run the mirror let go, the run as last read
        before = {run_id: (self.mirror.last_seq(run_id) if self.mirror.held_from(run_id) is not None
                           else _int(dto.get("seq")), bool(dto.get("deleted")))
                  for run_id, dto in book.runs.items()}
        await self.load(full=True, first=FIRST_RUNS)
        mark = {"origin": "server"}  # never relayed back
        for run_id, dto in list(book.runs.items()):
            user = {"user_id": dto["user_id"], **mark}
            seen, was_deleted = before.get(run_id, (-1, False))
            if seen < 0:
                self.changes.publish(Change("cloud", "run.started", run_id, user))
            if _int(dto.get("seq")) > max(seen, 0):  # only a run that grew meanwhile is read
                try:
                    missed = await self.read_events(run_id, max(seen, 0))
                except ServiceError as exc:
                    self.errors.append(f"run {run_id}: {exc}")
                    missed = []
                for event in missed:
                    self.changes.publish(Change("cloud", "run.event", run_id, {"event": event, **user}))
            if dto.get("deleted") and not was_deleted:
                self.changes.publish(Change("cloud", "run.deleted", run_id, user))
        for user_id in book.persons:
            self.changes.publish(Change("cloud", "grant.changed", user_id, dict(mark)))
        for source in ("workspace", *sorted(RELAYED)):
            self.changes.publish(Change(source, "attach.reloaded", self.remote.url, dict(mark)))

    async def drop_stream(self) -> None:
        """Close the change stream from this side (it reconnects, resuming after the last change seen)."""
        connection = self._connection
        if connection is not None and not connection.done():
            connection.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await connection

    async def _apply(self, batch: list[Change]) -> None:
        runs: dict[str, None] = {}
        people = False
        for change in batch:
            if change.source != "cloud":
                continue
            if change.kind == "run.event":
                self.stream_book.append_event(change.id, change.data.get("event") or {})
                runs[change.id] = None
            elif change.kind in ("run.started", "run.deleted"):
                runs[change.id] = None
                people = True
            elif change.kind not in NOT_PEOPLE:
                people = True
        book = self.stream_book
        recount = False
        for run_id in runs:
            try:
                dto = await self._read_run(run_id)
                old = book.runs.get(run_id)
                book.absorb_run(dto, owned=True)
                if book.counted_apart(run_id):  # counted by the server: counted again when that changed
                    new = book.runs[run_id]
                    recount = recount or old is None or any(old.get(k) != new.get(k) for k in COUNTED)
            except ServiceError as exc:
                self.errors.append(f"run {run_id}: {exc}")
        if recount:
            try:
                await book.recount()
            except ServiceError as exc:
                self.errors.append(f"counting the older runs: {exc}")
        if people:
            with contextlib.suppress(ServiceError):
                await self.stream_book.refresh_people()
        for change in batch:
            if change.kind == CAUGHT_UP and change.source == "workspace":
                waiter = self._markers.get(change.id)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)  # everything before the marker is applied and published
                continue
            origin = change.data.get("origin")
            if origin == self.origin:
                continue  # this window's own change, published here when it happened
            if origin is None:  # marked, so that this window never relays it back
                change = Change(change.source, change.kind, change.id, {**change.data, "origin": "server"})
            self.changes.publish(change)


def _count_in(dto: Mapping[str, object], people: dict[str, int], statuses: dict[str, int], sign: int) -> None:
    """Count a run (unless deleted) in (``sign`` 1) or out (-1) of counts by person and by status."""
    if dto.get("deleted"):
        return
    for counts, key in ((people, dto.get("user_id")), (statuses, dto.get("status"))):
        if isinstance(key, str):
            counts[key] = counts.get(key, 0) + sign


def _retrieved(done: "asyncio.Future[Any]") -> None:
    """A read's failure taken (whoever waits for it sees it; nobody need be waiting)."""
    if not done.cancelled():
        done.exception()


def _kept(run: Dto) -> Dto:
    """A run's DTO made as the book keeps it, in place: without what ``UNKEPT`` names, its times as
    seconds, its shared strings interned."""
    for key in UNKEPT:
        run.pop(key, None)
    for key in TIMES:  # as seconds (what every reader makes of them), when they are usable times
        seconds = time_or_none(run.get(key))
        if seconds is not None:
            run[key] = seconds
    for key in SHARED:
        value = run.get(key)
        if type(value) is str:
            run[key] = sys.intern(value)
    return run


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _counts(value: object) -> dict[str, int]:
    """An answer's counts by name (what is not a whole number left out)."""
    if not isinstance(value, dict):
        return {}
    return {str(key): count for key, count in value.items() if type(count) is int and count >= 0}


def _int(value: object) -> int:
    """A DTO's whole number (0 when it holds none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
