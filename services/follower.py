"""The run follower: carries what a cloud's runs do into the canvas and the memory outbox.

It reads runs from the window's ``Desk`` (``services.desk``): each run's read model (``RunDetail``)
and its events from the desk's run mirror, converted once there and shared with the panes, whether
the cloud runs in this process or the window is attached to a server (whose desk keeps the runs
current from the server's change stream, reading each run a batch touches once). The changes it
follows arrive on its ``ChangeFeed``.

At launch it resumes where the canvas is (``_catch_up``): only what the canvas lacks of each run is
queued, so a relaunch over a caught-up canvas writes nothing. The runs are read a chunk at a time
(``CATCH_UP_CHUNK`` runs, ``CATCH_UP_EVENTS`` of history), many runs a request; in the background
each chunk is applied while the next is read, in transactions of up to ``CATCH_UP_BATCH`` changes,
and what the feed gives meanwhile waits until the whole catch-up is applied. Then it listens to the cloud's ``Change`` feed (run started, event appended, run deleted), queues each
change, and applies them from one background task, in order, a queued batch at a time:

- the canvas ``RunBridge`` keeps one node per run (and per child node) with statuses, inbox entries
  for pending messages and events with levels; text deltas are skipped (the bridge records none).
  A batch is applied in one canvas transaction, its runs and events as one bulk step
  (``RunBridge.batch_step``: the nodes it lacks, the events, inbox entries and node rows written a
  statement per table, not per change, in their order; in a background catch-up each node's events
  publish one ``node.updated`` a transaction: ``coalesce``); when it fails, its changes are applied
  again one by one, each in its own, so that one bad change is recorded and the rest are applied;
- each completed root turn is captured into the memory outbox (the turn's input as the person's
  message, its text as the assistant's), and, when a harvest is attached, as an OKF run record. The
  captures are made in order, from a task of their own, once their batch is written: the next batch
  does not wait for them (``idle`` does).

A failure applying one change is recorded in ``errors`` and published; it never stops the rest.
The last captured turn of each run is kept in ``state_path`` (atomic writes), so re-opening a
workspace whose runs replay (the sample world's fixed ids) never captures a turn twice.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .changes import Change, ChangeFeed, RunEvents
from .clock import iso
from .collector import collecting_less
from .desk import Desk, OperatorError, RunDetail, run_seq, seq_of
from .files import CorruptFileError, atomic_write_json, read_json

if TYPE_CHECKING:
    from .canvas.bridge import BridgeStep, PreparedEvent, RunBridge, RunPosition
    from .knowledge.outbox import MemoryOutbox

__all__ = ["RunFollower", "bridge_run", "run_record", "turn_messages"]

Event = Mapping[str, object]
"""A run event as the wire has it (its ``at`` as a wire time, or as float seconds in a read model)."""
Message = dict[str, str]
"""One message of a captured turn: ``role`` and ``text``."""

TURN_WINDOW = 2000
"""How many events before a turn's completion are read first to find its start (then, the whole log)."""
CATCH_UP_CHUNK = 256
"""How many runs' events a catch-up holds at a time, at most (read, placed, queued, then let go)."""
CATCH_UP_EVENTS = 20_000
"""How much history a catch-up chunk covers, at most, in events (deltas too; a longer run is a chunk
of its own): what it holds stays bounded however long the runs are."""
CATCH_UP_BATCH = 5000
"""How many caught-up changes one canvas transaction applies, at most (a live batch: ``_BATCH``):
each transaction costs its watchers a read of what it changed, so fewer, larger ones are cheaper."""
HEADS_AT_ONCE = 5000
"""How many runs a catch-up weighs between two turns of the loop (a window over many runs stays live)."""
_QUIET = frozenset({"node.output_text.delta", "node.activity"})
"""Event types the follower never applies (the run's node takes its activity from the run itself)."""
_BATCH = 500
_CAPTURED = frozenset({"node.turn.completed", "node.settled"})
"""The event types of a root node that ``_capture`` captures (a turn, a settle)."""
_CAPTURE_ONLY = "_capture_only"
"""Marks a caught-up change queued for its capture alone: the canvas already holds its event."""
_CLEAN = "_clean"
"""Marks a caught-up change whose event came in an answer with no suspect escape: storable as it is."""


def _object(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def turn_messages(events: Sequence[Event], completed: Event) -> list[Message]:
    """The person's input and the assistant's text of the root turn that ``completed`` ends (a failed
    turn: the input only)."""
    entry = completed.get("entry_id")
    started = next((e for e in reversed(events) if e["type"] == "node.turn.started" and e.get("entry_id") == entry), None)
    done = next((e for e in reversed(events) if e["type"] == "node.output_text.done" and e.get("entry_id") == entry), None)
    messages = []
    if started is not None:
        text = str(_object(started.get("input")).get("text") or "")
        if text:
            messages.append({"role": "user", "text": text})
    if done is not None and done.get("text"):
        messages.append({"role": "assistant", "text": str(done["text"])})
    # a failed turn adds nothing of its own: memory keeps what was said, and a failure is not speech
    return messages


def run_record(run: RunDetail) -> dict[str, object]:
    """A run as an OKF run record: ``{thread, turns: [{id, ts, role, text}]}`` from its root turns
    (``ts`` as the wire writes a time)."""
    turns: list[dict[str, object]] = []
    for event in run.events:
        if event["node_id"] != run.id:
            continue
        at = event.get("at")
        ts = iso(at) if isinstance(at, float) and at > 0 else ""
        if event["type"] == "node.turn.started":
            text = str(_object(event.get("input")).get("text") or "")
            if text:
                turns.append({"id": f"{run.id}:{event['seq']}", "ts": ts, "role": "user", "text": text})
        elif event["type"] == "node.output_text.done" and event.get("text"):
            turns.append({"id": f"{run.id}:{event['seq']}", "ts": ts, "role": "assistant", "text": str(event["text"])})
    return {"thread": run.id, "turns": turns}


def bridge_run(run: RunDetail) -> dict[str, object]:
    """A run's read model as the canvas ``RunBridge`` reads a run: the wire DTO's fields it takes."""
    return {"id": run.id, "user_id": run.user_id, "name": run.name, "status": run.status, "activity": run.activity,
            "params": run.params, "outcome": run.outcome, "pending": list(run.pending), "question": run.question,
            "last_turn_error": run.last_turn_error}


_LET_GO = "follower.let_go"
"""The marker a catch-up in the foreground queues behind its changes: once it is reached, the runs held
for the catch-up are let go."""
_CATCH_UP = "follower.catch_up"
"""The marker queued when a window over many runs read its runs again (``attach.reloaded``, after the
server's ``reset``): once what came before it is applied, the catch-up runs again (the window published
what changed of the runs it holds; the others are weighed against the canvas)."""
_MARKERS = frozenset({_LET_GO, _CATCH_UP})


class _Head(NamedTuple):
    """A run as the catch-up weighs it: its id, person, newest seq and deleted flag, and its DTO as the
    book holds it (read only, never copied: a window over many runs weighs them all), as the canvas's
    ``RunBridge.positions`` reads a run (a deleted run's status read as ``deleted``, as ``bridge_run``
    gives it)."""

    id: str
    user_id: str
    seq: int
    deleted: bool
    wire: Mapping[str, object]


def _head(dto: Mapping[str, object]) -> _Head:
    deleted = bool(dto.get("deleted"))
    return _Head(str(dto["id"]), str(dto["user_id"]), run_seq(dto), deleted,
                 {**dto, "status": "deleted"} if deleted else dto)


def _chunks(wanted: Mapping[str, int], seqs: Mapping[str, int]) -> list[dict[str, int]]:
    """``wanted`` (each run's seq to read after) in chunks of at most ``CATCH_UP_CHUNK`` runs covering
    at most ``CATCH_UP_EVENTS`` events of history (by each run's newest seq), in order."""
    chunks: list[dict[str, int]] = []
    chunk: dict[str, int] = {}
    covered = 0
    for run_id, after in wanted.items():
        size = max(0, seqs.get(run_id, 0) - after)
        if chunk and (len(chunk) >= CATCH_UP_CHUNK or covered + size > CATCH_UP_EVENTS):
            chunks.append(chunk)
            chunk, covered = {}, 0
        chunk[run_id] = after
        covered += size
    if chunk:
        chunks.append(chunk)
    return chunks


@dataclass
class _Item:
    """One thing of a batch to apply to the canvas: its step, and what names it when it fails."""

    label: str
    """``<change kind> <run id>``, or ``run <run id>`` for a run read again after its events."""
    id: str
    step: BridgeStep | None
    """What applies it alone (None for an event: ``RunFollower._step`` makes its ``event_step``)."""
    failed: bool = False
    event: PreparedEvent | None = None
    """The event of a ``run.event`` change (a batch's events are applied in bulk)."""
    run: dict[str, object] | None = None
    """The run as its step reads it (a batch's runs and events are applied in bulk)."""


class RunFollower:
    """Applies the cloud's run changes to the canvas and the outbox from one background task."""

    def __init__(
        self,
        desk: Desk,
        feed: ChangeFeed,
        *,
        bridge: RunBridge | None = None,
        outbox: MemoryOutbox | None = None,
        on_settled: Callable[[RunDetail], Awaitable[None]] | None = None,
        state_path: Path | None = None,
        ignore_users: frozenset[str] = frozenset(),
    ) -> None:
        self.desk = desk
        """Where runs are read: the window's desk and its run mirror (embedded, or attached to a server)."""
        self.feed = feed
        self.bridge = bridge
        self.outbox = outbox
        self.on_settled = on_settled
        self.ignore_users = ignore_users
        """People whose runs the canvas shows but whose turns are not captured (the harvest judge)."""
        self.errors: deque[str] = deque(maxlen=100)
        self.state_path = state_path
        self._captured: dict[str, int] = self._load_state()
        self._queue: asyncio.Queue[Change] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._busy = False
        self._captures: deque[Change] = deque()
        """Changes whose turn or settle is to be captured, in order (``_capture_all``)."""
        self._capturing: asyncio.Task[None] | None = None
        self._saving = asyncio.Lock()
        self.applied = 0
        """How many changes this follower has applied (each queued change, once its batch is written)."""
        self.catch_up_s: float | None = None
        """How long the last start took to read where the canvas is and queue what it lacks."""
        self.background = False
        """The last start's catch-up reads after ``start`` returned."""
        self._catching = False
        self._lent: list[str] = []
        """Runs the desk holds for the catch-up only (a window over many runs holds only some): let go
        once what the catch-up queued is applied and captured."""

    async def start(self, *, catch_up: bool = True, background: bool = False) -> None:
        """Start following; with ``catch_up`` the runs that already exist are applied first. With
        ``background`` the catch-up reads after this returns (``idle`` waits for it too): a window
        attached to a large workspace opens without waiting for every run it lacks to be read."""
        # subscribed first: what the cloud does while the catch-up reads is queued behind what the
        # catch-up queues (an event applied twice is skipped by the canvas, a capture made twice by
        # ``follower.json``), so nothing published meanwhile is missed
        self._unsubscribe = self.feed.subscribe(self._on_change, many=self._on_changes)
        self.background = catch_up and background
        if self.background:
            self._catching = True
            self._task = asyncio.get_running_loop().create_task(self._catch_up_then_drain())
            return
        if catch_up:
            await self._catch_up_queued()
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _catch_up_queued(self) -> None:
        """The catch-up's changes queued ahead of those the feed gave meanwhile (``catch_up_s``: its time)."""
        began = time.perf_counter()
        live = []
        while not self._queue.empty():
            live.append(self._queue.get_nowait())
        caught: list[Change] = []
        with collecting_less():
            await self._catch_up(caught.append)
        while not self._queue.empty():
            live.append(self._queue.get_nowait())
        for change in (*caught, *live):
            self._queue.put_nowait(change)
        self.catch_up_s = time.perf_counter() - began
        if self._lent:  # applied by the drain, after which they are let go
            self._queue.put_nowait(Change("workspace", _LET_GO, ""))

    async def _catch_up_then_drain(self) -> None:
        """The catch-up in the background: each chunk of runs it reads is applied while the next is
        read (the server reads, this process writes), and what the feed gives meanwhile waits in the
        queue until the last of it is applied."""
        with collecting_less():  # the catch-up's burst of medium-lived objects, walked less often
            began = time.perf_counter()
            caught: asyncio.Queue[Change | None] = asyncio.Queue()
            applying = asyncio.get_running_loop().create_task(self._drain_caught(caught))
            try:
                try:
                    await self._catch_up(caught.put_nowait)
                    self.catch_up_s = time.perf_counter() - began
                except Exception as exc:  # recorded and published; what the feed gives is still applied
                    self._failed("catch-up", "", exc)
                caught.put_nowait(None)
                try:
                    await asyncio.shield(applying)
                except Exception as exc:  # a batch that failed past its changes' own records
                    self._failed("catch-up", "", exc)
                await self._let_go_lent()
            except asyncio.CancelledError:  # stopped: what the catch-up queued is dropped with the rest
                applying.cancel()
                raise
            finally:
                self._catching = False
        await self._drain()

    async def _drain_caught(self, caught: asyncio.Queue[Change | None]) -> None:
        """Apply what the catch-up queues on ``caught``, a batch at a time, until its end (None)."""
        while True:
            first = await caught.get()
            if first is None:
                return
            batch = [first]
            end = False
            while len(batch) < CATCH_UP_BATCH and not caught.empty():
                change = caught.get_nowait()
                if change is None:
                    end = True
                    break
                batch.append(change)
            self._busy = True
            try:
                await self._apply(batch, coalesce=True)
                self.applied += len(batch)
            finally:
                self._busy = False
            if end:
                return

    async def _catch_up(self, put: Callable[[Change], None]) -> None:
        """Queue what the canvas and the captures lack of the runs that exist, and only that.

        The canvas says how far it holds each run (``RunBridge.positions``, one read a page): a run whose
        nodes hold its events up to the last one the follower applies, and whose node shows the run as
        it is, queues nothing; any other run queues its ``run.started`` (when its node is missing or
        not current) and the events after the highest ``seq`` its nodes hold. Events the live path
        ignores (text deltas, activity) are never queued. A completed turn or a settle not yet captured
        (``follower.json``: a capture that failed is tried again at each launch) is queued for its
        capture alone, however far the canvas is."""
        looked = False
        # every run a page at a time, each as the desk reads it (a window over many runs holds only
        # some: the others are read here a page at a time, and held only when the canvas lacks them)
        async for page in self.desk.run_pages():
            looked = await self._catch_up_page(page, put) or looked
        if looked:
            await self._save_state()

    async def _catch_up_page(self, dtos: Sequence[Mapping[str, object]], put: Callable[[Change], None]) -> bool:
        """Queue what the canvas and the captures lack of a page of runs (``_catch_up``); True when
        a run was marked as looked at through its last event."""
        details: dict[str, _Head] = {}
        for start in range(0, len(dtos), HEADS_AT_ONCE):  # the loop runs between two slices
            if start:
                await asyncio.sleep(0)
            details.update((head.id, head) for head in map(_head, dtos[start:start + HEADS_AT_ONCE]))
        # where the canvas is, first by each run's root node alone: only the events after that are
        # read (from the mirror, or a window's server), and a child node holding a later event is
        # named by one of them, so the second read gives each run's true position
        positions: Mapping[str, RunPosition] = {}
        if self.bridge is not None:
            positions = await self.bridge.positions({run_id: (run.wire, ()) for run_id, run in details.items()})
        wanted: dict[str, int] = {}
        for count, (run_id, run) in enumerate(list(details.items()), start=1):
            if count % HEADS_AT_ONCE == 0:
                await asyncio.sleep(0)
            position = positions.get(run_id)
            if self.bridge is not None:  # the canvas lacks what its nodes do not hold (all of a run it lacks)
                after = position.held if position is not None else 0
            else:
                after = run.seq
            for key in self._capture_keys(run):  # a capture not made yet is looked for too
                after = min(after, self._captured.get(key, 0))
            if after >= run.seq and (self.bridge is None or (position is not None and position.current)):
                continue  # the canvas holds it all, and nothing of it waits to be captured
            wanted[run_id] = after
        if wanted:  # the runs queued are read from the desk when applied: it holds them until then
            self._lent += self.desk.hold_runs([dto for dto in dtos if str(dto["id"]) in wanted], lent=True)
        looked = False
        for chunk in _chunks(wanted, {run_id: details[run_id].seq for run_id in wanted}):
            clean: set[str] = set()
            read = await self._read_all(chunk, clean)
            runs = {run_id: (details[run_id], read[run_id]) for run_id in chunk if run_id in read}
            if self.bridge is not None:
                positions = {**positions, **await self.bridge.positions({
                    run_id: (run.wire, {str(e.get("node_id")) for e in events})
                    for run_id, (run, events) in runs.items()})}
            looked = self._queue_missing(runs, positions, put, clean) or looked
        return looked

    def _queue_missing(self, runs: Mapping[str, tuple["_Head", Sequence[Event]]],
                       positions: Mapping[str, RunPosition], put: Callable[[Change], None],
                       clean: Collection[str] = ()) -> bool:
        """``put`` what the canvas and the captures lack of ``runs`` (each with its events after where
        it was read from; ``clean``: the runs whose events hold only storable text); True when a run
        was marked as looked at through its last event."""
        looked = False
        for run_id, (run, events) in runs.items():
            marks = {_CLEAN: True} if run_id in clean else {}
            position = positions.get(run_id)
            held = position.held if position is not None else 0
            if self.bridge is not None and not run.deleted and (position is None or not position.current):
                put(Change("cloud", "run.started", run_id))
            waiting = False
            for event in events:
                if event.get("type") in _QUIET:
                    continue
                canvas = self.bridge is not None and seq_of(event) > held
                uncaptured = run.user_id not in self.ignore_users and self._uncaptured(run_id, event)
                waiting = waiting or uncaptured
                if canvas:
                    put(Change("cloud", "run.event", run_id, {"event": event, **marks}))
                elif uncaptured:
                    put(Change("cloud", "run.event", run_id, {"event": event, _CAPTURE_ONLY: True}))
            # the events were read to the newest (the quiet ones left out): nothing up to the run's
            # sequence number as read, or the last event, waits to be captured: not looked at again
            last = max(run.seq, seq_of(events[-1]) if events else 0)
            if not waiting and last:
                for key in self._capture_keys(run):
                    if self._captured.get(key, 0) < last:
                        self._captured[key] = last
                        looked = True
        return looked

    async def _read_all(self, wanted: Mapping[str, int], clean: set[str] | None = None) -> dict[str, Sequence[Event]]:
        """Each wanted run's events after its sequence number, the runs read together (a window
        attached to a server asks for many runs' events a request: ``Desk.read_events_many``); a run
        the cloud no longer knows is left out. ``clean`` gets the runs whose text needs no scan."""
        return dict(await self.desk.read_events_many(wanted, exclude=_QUIET, clean=clean))

    def _capture_keys(self, run: "RunDetail | _Head") -> list[str]:
        """The keys of ``_captured`` that say how far the captures of ``run`` are made (none when this
        follower captures nothing of it)."""
        if run.user_id in self.ignore_users:
            return []
        return ([run.id] if self.outbox is not None else []) + (
            [f"settled:{run.id}"] if self.on_settled is not None else [])

    def _uncaptured(self, run_id: str, event: Event) -> bool:
        """Whether ``event`` is a root turn's completion or a settle not captured yet (and this follower
        captures that: into its outbox, through its ``on_settled``)."""
        kind = event.get("type")
        if event.get("node_id") != event.get("run_id") or not (
                (kind == "node.turn.completed" and self.outbox is not None)
                or (kind == "node.settled" and self.on_settled is not None)):
            return False
        key = run_id if kind == "node.turn.completed" else f"settled:{run_id}"
        return self._captured.get(key, 0) < seq_of(event)

    async def stop(self) -> None:
        """Stop following (changes still queued are dropped)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for task in (self._task, self._capturing):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._task = self._capturing = None
        self._captures.clear()

    async def _catch_up_again(self) -> None:
        """The catch-up once more, its changes queued behind what the feed gave meanwhile."""
        try:
            with collecting_less():
                await self._catch_up(self._queue.put_nowait)
        except Exception as exc:  # recorded and published; what the feed gives is still applied
            self._failed("catch-up", "", exc)
        if self._lent:
            self._queue.put_nowait(Change("workspace", _LET_GO, ""))

    async def _let_go_lent(self) -> None:
        """Let go of the runs held for the catch-up, once their captures are made (those still
        waiting read them)."""
        while self._captures or (self._capturing is not None and not self._capturing.done()):
            await asyncio.sleep(0.05)
        lent, self._lent = self._lent, []
        self.desk.let_go(lent)

    async def idle(self) -> None:
        """Wait until every queued change has been applied."""
        while (self._catching or not self._queue.empty() or self._busy or self._captures
               or (self._capturing is not None and not self._capturing.done())):
            await asyncio.sleep(0.005)

    def _on_change(self, change: Change) -> None:
        if change.source == "workspace" and change.kind == "attach.reloaded":
            if self.desk.unread_runs():  # the runs it does not hold may have changed unseen
                self._queue.put_nowait(Change("workspace", _CATCH_UP, ""))
            return
        if change.source != "cloud" or change.kind not in ("run.started", "run.event", "run.deleted"):
            return
        if change.kind == "run.event":
            event = change.data.get("event")
            if not isinstance(event, dict) or event.get("type") in _QUIET:
                return  # a change that carries no event object has nothing to apply
        self._queue.put_nowait(change)

    def _on_changes(self, changes: Sequence[Change]) -> None:
        """A burst: a run's events are looked at by type first, so a quiet one costs no change object."""
        if not isinstance(changes, RunEvents):
            for change in changes:
                self._on_change(change)
            return
        if changes.source != "cloud":
            return
        put, data = self._queue.put_nowait, changes.data
        for event in changes.events:
            if event.get("type") not in _QUIET:
                put(Change("cloud", "run.event", changes.run_id, {"event": event, **data}))

    async def _drain(self) -> None:
        while True:
            first = await self._queue.get()
            self._busy = True
            try:
                batch = [first]
                while len(batch) < _BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                part: list[Change] = []
                for change in batch:
                    if change.source != "workspace" or change.kind not in _MARKERS:
                        part.append(change)
                        continue
                    if part:  # what came before the marker is applied first
                        await self._apply(part)
                        self.applied += len(part)
                        part = []
                    if change.kind == _LET_GO:  # the catch-up's runs are applied: let go of those held for it
                        await self._let_go_lent()
                    else:
                        await self._catch_up_again()
                if part:
                    await self._apply(part)
                    self.applied += len(part)
            finally:
                self._busy = False

    async def _apply(self, batch: list[Change], *, coalesce: bool = False) -> None:
        """Apply a batch: every change's canvas step and then each run it touched read again, in one
        transaction, then the captures of the turns and settles it carries, in order (``coalesce``: a
        catch-up's batch, each node's events announced once: ``RunBridge.batch_step``)."""
        items: list[_Item] = []
        made: list[tuple[Change, _Item | None]] = []
        touched: dict[str, None] = {}
        # the batch's events are checked for text to repair at once (one scan, not one per event)
        clean = self.bridge is not None and self.bridge.clean(
            [c.data["event"] for c in batch if c.kind == "run.event" and not c.data.get(_CAPTURE_ONLY)
             and not c.data.get(_CLEAN)])  # a caught-up event read in a spotless answer: not scanned again
        for change in batch:
            try:
                item = self._item(change, touched, clean)
            except Exception as exc:  # a change the bridge cannot take: nothing of it is applied
                self._failed(f"{change.kind} {change.id}", change.id, exc)
                continue
            if item is not None:
                items.append(item)
            made.append((change, item))
        for run_id in touched:
            try:
                synced = self._run_item(run_id)
            except Exception as exc:
                self._failed(f"run {run_id}", run_id, exc)
                continue
            if synced is not None:
                items.append(synced)
        await self._write(items, coalesce=coalesce)
        for change, item in made:
            if change.kind != "run.event" or (item is not None and item.failed):
                continue
            event = change.data["event"]
            if event.get("node_id") == event.get("run_id") and event.get("type") in _CAPTURED:
                self._captures.append(change)
        if self._captures and (self._capturing is None or self._capturing.done()):
            self._capturing = asyncio.get_running_loop().create_task(self._capture_all())

    async def _capture_all(self) -> None:
        """Capture the queued turns and settles, in order, beside the canvas writes: a capture reads
        the turn's events and writes the outbox, and the next batch need not wait for it."""
        while self._captures:
            change = self._captures[0]
            try:
                await self._capture(change)
            except Exception as exc:  # one bad change never stops the follower
                self._failed(f"{change.kind} {change.id}", change.id, exc)
            finally:
                self._captures.popleft()

    def _item(self, change: Change, touched: dict[str, None], clean: bool = False) -> _Item | None:
        """The canvas step of one change (None when it has none; ``clean``: the batch's events hold no
        text to repair)."""
        if change.kind == "run.started":
            try:
                return self._run_item(change.id)
            except Exception as exc:  # named as the run, as a run read again after its events is
                self._failed(f"run {change.id}", change.id, exc)
                return None
        if self.bridge is None or change.data.get(_CAPTURE_ONLY):
            if change.kind == "run.event" and self.bridge is None:
                touched[change.id] = None
            return None
        label = f"{change.kind} {change.id}"
        if change.kind == "run.deleted":
            return _Item(label, change.id, self.bridge.deleted_step(change.id))
        event = self.bridge.prepare_event(change.data["event"], clean=clean)
        item = _Item(label, change.id, None, event=event)
        touched[change.id] = None
        return item

    def _run_item(self, run_id: str) -> _Item | None:
        """The canvas step bringing a run's node up to the run as the desk reads it now."""
        if self.bridge is None:
            return None
        try:
            run = self.desk.detail(run_id, events=False)
        except OperatorError:  # the cloud does not know the run
            return None
        if run.deleted:
            return None
        dto = bridge_run(run)
        return _Item(f"run {run_id}", run_id, self.bridge.run_step(dto, view=False), run=dto)

    async def _write(self, items: list[_Item], *, coalesce: bool = False) -> None:
        """Apply ``items`` in one canvas transaction; when it fails, each again alone (order kept)."""
        if not items or self.bridge is None:
            return
        if len(items) > 1:
            try:
                await self.bridge.apply_steps(self._bulk(items, coalesce=coalesce))
                return
            except Exception:  # found again below, step by step, and recorded there
                pass
        for item in items:
            try:
                await self.bridge.apply_steps([self._step(item)])
            except Exception as exc:
                item.failed = True
                self._failed(item.label, item.id, exc)

    def _bulk(self, items: list[_Item], *, coalesce: bool = False) -> list[BridgeStep]:
        """The steps of ``items``, in order: each stretch of runs and events one ``batch_step`` (the
        nodes it lacks made, the events and the inbox entries written, by table; with ``coalesce``
        each node's events announced in one ``node.updated``), anything else (a run deleted) a step of
        its own."""
        assert self.bridge is not None
        steps: list[BridgeStep] = []
        stretch: list[Mapping[str, object] | PreparedEvent] = []
        for item in items:
            if item.event is not None:
                stretch.append(item.event)
                continue
            if item.run is not None:
                stretch.append(item.run)
                continue
            if stretch:
                steps.append(self.bridge.batch_step(stretch, coalesce=coalesce))
                stretch = []
            steps.append(self._step(item))
        if stretch:
            steps.append(self.bridge.batch_step(stretch, coalesce=coalesce))
        return steps

    def _step(self, item: _Item) -> BridgeStep:
        """The step applying ``item`` alone."""
        assert self.bridge is not None
        if item.step is not None:
            return item.step
        assert item.event is not None
        return self.bridge.event_step(item.event)

    def _failed(self, label: str, run_id: str, exc: Exception) -> None:
        message = f"{label}: {type(exc).__name__}: {exc}"
        self.errors.append(message)
        self.feed.announce("workspace", "follower.error", run_id, error=message)

    async def _capture(self, change: Change) -> None:
        event = change.data["event"]
        if event["node_id"] != event["run_id"]:
            return
        if event["type"] == "node.turn.completed":
            await self._turn_completed(change.id, event)
        elif event["type"] == "node.settled":
            await self._settled(change.id, event)

    async def _run(self, run_id: str) -> RunDetail | None:
        """The run with its whole log, unless the cloud does not know it or its person is ignored."""
        try:
            if self.desk.detail(run_id, events=False).user_id in self.ignore_users:
                return None
            return await self.desk.read_detail(run_id)
        except OperatorError:
            return None

    async def _turn_completed(self, run_id: str, event: Mapping[str, object]) -> None:
        seq = seq_of(event)
        if self._captured.get(run_id, 0) >= seq:
            return
        try:
            user_id = self.desk.detail(run_id, events=False).user_id
            if user_id in self.ignore_users:
                return
            # the turn's own events: the newest before its completion, the whole log only when the
            # turn started before them
            events = await self.desk.read_events(run_id, max(0, seq - TURN_WINDOW), seq, exclude=_QUIET)
            entry = event.get("entry_id")
            if not any(e["type"] == "node.turn.started" and e.get("entry_id") == entry for e in events):
                events = await self.desk.read_events(run_id, 0, seq, exclude=_QUIET)
        except OperatorError:  # the cloud does not know the run
            return
        messages = turn_messages(events, event)
        if messages and self.outbox is not None:
            try:
                await self.outbox.capture_turn(run_id, user_id, messages)
            except Exception as exc:  # shown as a capture badge; the turn is tried again on the next open
                self.feed.announce("outbox", "capture.failed", run_id, error=f"{type(exc).__name__}: {exc}")
                raise
        self._captured[run_id] = seq
        await self._save_state()

    async def _settled(self, run_id: str, event: Mapping[str, object]) -> None:
        key = f"settled:{run_id}"
        seq = seq_of(event)
        if self.on_settled is None or self._captured.get(key, 0) >= seq:
            return
        run = await self._run(run_id)
        if run is None:
            return
        await self.on_settled(run)
        self._captured[key] = seq
        await self._save_state()

    async def _save_state(self) -> None:
        if self.state_path is None:
            return
        async with self._saving:  # one write at a time, each of the state as it is when its turn comes
            # a copy taken here: the catch-up and the captures change ``_captured`` while it is written
            await asyncio.to_thread(atomic_write_json, self.state_path, {"captured": dict(self._captured)})

    def _load_state(self) -> dict[str, int]:
        if self.state_path is None or not self.state_path.exists():
            return {}
        try:
            data = read_json(self.state_path)
            return {str(k): int(v) for k, v in data.get("captured", {}).items()}
        except (CorruptFileError, AttributeError, TypeError, ValueError) as exc:
            self.errors.append(f"{self.state_path}: unreadable, starting over ({exc})")
            return {}
