"""``Timeline``: keeps the history a time cursor reads, from the changes a window sees.

It starts by recording every pane's items as they are (a ``history.opened`` moment: what changed
while no window kept the history is one step), then follows the change feed. Every change becomes a
moment; after each burst the items the burst touched are read again from the live services and
recorded where they differ (``TimeStore.record``: one transaction per burst). What it reads again:

- a run's change (``run.*``, an operator's action on it): the run's row; a run's event is a moment
  only as its seq grows;
- any change of the cloud or of the workspace but a run's event: every person's grant;
- a canvas change: each object it names (its row, its edges either way), and the inboxes whose kept
  counts moved (an event delivered to a watcher is not announced as the watcher's inbox's change);
  a canvas connection restored: the whole canvas;
- an OKF or insights change, or a judge run's: the judgments; an outbox change: the memory counts.

The work runs on the loop in one task, bursts coalesced while the previous one is recorded; the
writes run in a thread. ``settled`` waits until everything published before it is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..changes import Change, ChangeFeed, RunEvents
from ..clock import Clock
from ..desk.mirror import seq_of
from ..desk.models import JUDGE_USER
from ..collector import collecting_less
from .frames import (KINDS, edge_versions, frame_batches, frame_versions, grant_versions, inbox_versions,
                     judgment_versions, memory_version, object_versions, run_versions)
from .store import TimeStore, Version

if TYPE_CHECKING:
    from ..canvas import Canvas
    from ..desk import Desk
    from ..knowledge.insights import InsightReviews
    from ..knowledge.okf import Harvest
    from ..knowledge.outbox import MemoryOutbox

__all__ = ["Timeline", "PLUMBING", "OPENED"]

log = logging.getLogger(__name__)

OPENED = "history.opened"
"""The moment the history starts (again): every item as the window found it."""
CANVAS_FINGERPRINT = "canvas.fingerprint"
"""The canvas's ``fingerprint`` when the history last closed cleanly (its meta key)."""
CANVAS_KINDS = ("object", "edge", "inbox")
"""The kinds read from the canvas."""
PLUMBING = ("attach.", "canvas.connection.", "history.")
"""Kinds that are the window's own plumbing, not a change to step through."""
_IDS = ("object_id", "src", "dst", "src_id", "dst_id", "owner_id", "target_id", "parent_id", "node_id", "watcher_id")
"""Fields of a canvas change that name another object it touched."""

Moment = tuple[float, str, str, str, str | None, int | None]


class Timeline:
    """The history of one window's workspace: a ``TimeStore`` kept current from the change feed."""

    def __init__(self, store: TimeStore, feed: ChangeFeed, desk: Desk, *, canvas: Canvas | None = None,
                 okf: Harvest | None = None, insights: InsightReviews | None = None,
                 outbox: MemoryOutbox | None = None, clock: Clock | None = None) -> None:
        self.store = store
        self.feed = feed
        self.desk = desk
        self.canvas = canvas
        self.okf = okf
        self.insights = insights
        self.outbox = outbox
        self.clock = clock or Clock()
        self.notice: str | None = None
        """Said where the history begins when an earlier one could not be read (and was set aside)."""
        self.errors: list[str] = []
        """What could not be recorded, in its own words (the history goes on with the next burst)."""
        self._pending: list[tuple[float, Change]] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seqs: dict[str, int] = {}
        """Each run's newest event ``seq`` recorded: an event at or below it (a stream read again after
        a reconnect) is no change, so a run's recorded seqs only grow."""
        self._inboxes: dict[str, tuple[int, int]] = {}
        """Each inbox's (unread, total) when last recorded: an inbox whose counts moved is read again
        (an event delivered to a watcher's inbox is not announced as the inbox's own change)."""

    # -- life ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Record every item as it is now, then follow the feed."""
        self._loop = asyncio.get_running_loop()
        self._unsubscribe = self.feed.subscribe(self._one, many=self._many)
        self._idle.clear()
        self._task = self._loop.create_task(self._run())

    async def close(self) -> None:
        """Stop following (what was published is recorded first) and close the file."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            clean = False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.settled(), 5.0)
                clean = not self.errors
            if clean and self.canvas is not None:  # the next open need not read the canvas again if it is as now
                with contextlib.suppress(Exception):
                    fingerprint = json.dumps(await self.canvas.fingerprint())
                    await asyncio.to_thread(self.store.set_meta, CANVAS_FINGERPRINT, fingerprint)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await asyncio.to_thread(self.store.close)

    async def settled(self) -> None:
        """Return once every change published before this call is recorded."""
        await asyncio.sleep(0)  # changes handed over with call_soon_threadsafe land first
        while self._pending or not self._idle.is_set():
            await self._idle.wait()
            await asyncio.sleep(0)

    # -- following -----------------------------------------------------------------------------

    def _one(self, change: Change) -> None:
        self._many((change,))

    def _many(self, changes: Sequence[Change]) -> None:  # any thread
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        now = self.clock.time()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._take(now, changes)
        else:
            loop.call_soon_threadsafe(self._take, now, changes)

    def _take(self, now: float, changes: Sequence[Change]) -> None:
        if isinstance(changes, RunEvents):
            self._pending.append((now, changes))  # type: ignore[arg-type]  # read as its changes when recorded
        else:
            self._pending.extend((now, c) for c in changes)
        self._idle.clear()
        self._wake.set()

    async def _run(self) -> None:
        try:
            with collecting_less():  # a version of every item, each alive until its batch is recorded
                await self._baseline()
        except Exception as exc:  # the history starts later; the window goes on
            log.exception("history baseline")
            self.errors.append(f"recording where things stand: {exc}")
        while True:
            if not self._pending:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            batch, self._pending = self._pending, []
            try:
                await self._record(batch)
            except Exception as exc:
                log.exception("history record")
                self.errors.append(f"recording {len(batch)} change(s): {exc}")

    async def _baseline(self) -> None:
        """Every item as it is now, at one ``history.opened`` moment, a batch at a time; what the history
        held and is gone now is closed at that moment. A canvas whose fingerprint is the one kept when
        the history last closed is not read again (nothing of it changed while no window kept it)."""
        store = self.store
        canvas = self.canvas
        kinds = list(KINDS)
        if canvas is not None:
            kept = await asyncio.to_thread(store.meta, CANVAS_FINGERPRINT)
            await asyncio.to_thread(store.set_meta, CANVAS_FINGERPRINT, None)  # kept again only by a clean close
            if kept is not None and kept == json.dumps(await canvas.fingerprint()):
                canvas = None
                kinds = [k for k in kinds if k not in CANVAS_KINDS]
        if self.canvas is not None:
            self._inboxes = await self.canvas.inbox_count_table()
        seen: dict[str, set[str]] = {kind: set() for kind in KINDS}
        first = True
        async for batch in frame_batches(self.desk, canvas, self.okf, self.insights, self.outbox):
            for v in batch:
                seen[v.kind].add(v.key)
            opened = [(self.clock.time(), "workspace", OPENED, "", None, None)] if first else []
            await asyncio.to_thread(store.record, opened, batch)
            first = False

        def close_gone() -> None:
            gone = [Version(kind, key, None) for kind in kinds for key in store.keys(kind) if key not in seen[kind]]
            store.record([], gone)
        await asyncio.to_thread(close_gone)

    def _newest_seq(self, run_id: str) -> int:
        if run_id not in self._seqs:
            self._seqs[run_id] = self.store.seq_at(run_id, self.store.last())
        return self._seqs[run_id]

    # -- one burst -----------------------------------------------------------------------------

    async def _record(self, batch: list[tuple[float, Any]]) -> None:
        moments: list[Moment] = []
        runs: set[str] = set()
        grants = judgments = memory = whole_canvas = canvas_changed = False
        objects: set[str] = set()
        owners: set[str] = set()
        for at, item in batch:
            if isinstance(item, RunEvents):
                runs.add(item.run_id)
                judgments = judgments or item.data.get("user_id") == JUDGE_USER
                newest = self._newest_seq(item.run_id)
                for event in item.events:
                    event_seq = seq_of(event)
                    if event_seq > newest:
                        moments.append((at, item.source, "run.event", item.run_id, item.run_id, event_seq))
                        newest = event_seq
                self._seqs[item.run_id] = newest
                continue
            change: Change = item
            if change.kind.startswith(PLUMBING):
                if change.kind == "canvas.connection.restored":
                    whole_canvas = True
                continue
            seq: int | None = None
            run_id: str | None = None
            if change.source in ("cloud", "workspace"):
                if change.kind.startswith("run.") or change.kind == "operator.action":
                    runs.add(change.id)
                    run_id = change.id
                    if change.kind == "run.event":
                        payload = change.data.get("event")
                        seq = seq_of(payload) if isinstance(payload, dict) else 0
                        newest = self._newest_seq(change.id)
                        if seq <= newest:
                            continue  # seen already: no change
                        self._seqs[change.id] = seq
                if change.kind != "run.event":
                    grants = True
                judgments = judgments or change.data.get("user_id") == JUDGE_USER  # a judgment is its judge's run
            elif change.source == "canvas":
                canvas_changed = True
                if change.id:
                    objects.add(change.id)
                objects.update(str(change.data[k]) for k in _IDS if isinstance(change.data.get(k), str))
                if change.kind.startswith("inbox.") or change.kind == "message.received":
                    owners.add(change.id)
            elif change.source in ("okf", "insights"):
                judgments = True
            elif change.source == "outbox":
                memory = True
            moments.append((at, change.source, change.kind, change.id, run_id, seq))
        versions = run_versions(self.desk, sorted(runs)) if runs else []
        if grants:
            versions += grant_versions(self.desk)
        canvas = self.canvas
        if canvas is not None and whole_canvas:
            self._inboxes = await canvas.inbox_count_table()
            store_keys = await asyncio.to_thread(lambda: {k: set(self.store.keys(k)) for k in ("object", "edge", "inbox")})
            fresh = [v for v in await frame_versions(self.desk, canvas, None, None, None) if v.kind in store_keys]
            seen = {(v.kind, v.key) for v in fresh}
            versions += fresh + [Version(k, key, None) for k, keys in store_keys.items() for key in keys
                                 if (k, key) not in seen]
        elif canvas is not None and (objects or owners or canvas_changed):
            counts = await canvas.inbox_count_table()
            owners.update(o for o in set(counts) | set(self._inboxes) if counts.get(o) != self._inboxes.get(o))
            self._inboxes = counts
            versions += await object_versions(canvas, objects)
            touching = await asyncio.to_thread(
                lambda: sorted({*(k for o in objects for k in self.store.keys_by("edge", "a", o)),
                                *(k for o in objects for k in self.store.keys_by("edge", "b", o))}))
            versions += await edge_versions(canvas, objects, touching)
            for owner in sorted(owners):
                current = await asyncio.to_thread(self.store.keys_by, "inbox", "a", owner)
                versions += await inbox_versions(canvas, owner, current)
        if judgments:
            current_judgments = await asyncio.to_thread(self.store.keys, "judgment")
            versions += await judgment_versions(self.okf, self.insights, current_judgments)
        if memory:
            versions.append(await memory_version(self.outbox))
        if moments or versions:
            await asyncio.to_thread(self.store.record, moments, versions)
