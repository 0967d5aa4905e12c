"""The served change stream's memory: recent changes with increasing ids, for ``Last-Event-ID``.

``ChangeLog(feed)`` numbers every change the feed publishes and keeps the newest ``size`` of them
as ready server-sent-event frames (``id: <epoch>-<n>``, ``event: <kind>``, ``data: {source, kind,
id, data}``). The epoch is new for each log (each server process), so an id from before a restart
is never taken for a recent one.

``follow(last_id)`` starts a listener and, in the same step, hands it what the client missed: the
changes after ``last_id`` when the log still holds all of them, else one ``reset`` frame (``event:
reset``, ``data: {"reset": {"reason"}}``, carrying the newest id) that tells the client to read
its snapshots again in full. Without ``last_id`` the listener gets only what happens from now on.
``announce_reset`` sends every stream a ``reset`` (the cloud's state was reset or replaced).
Changes may be published from any thread; each listener receives its frames in log order.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import threading
from collections import deque

from collections.abc import Sequence

from ..changes import RELAYED_SOURCES, Change, ChangeFeed, RunEvents
from ..wire import event_line_name

__all__ = ["ChangeLog", "ChangeListener", "CHANGE_LOG_SIZE"]

CHANGE_LOG_SIZE = 4096
"""How many recent changes a served cloud keeps for clients that reconnect."""


class ChangeListener:
    """One stream's frames, in order: ``await listener.get()``; ``close()`` stops it."""

    def __init__(self, log: "ChangeLog", loop: asyncio.AbstractEventLoop, origin: str | None = None) -> None:
        self._log = log
        self._loop = loop
        self.origin = origin
        """The window this stream goes to (its ``origin`` tag): the changes it relayed itself are not sent
        back to it (its markers are: a window waits for those on its stream)."""
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    def put(self, frame: bytes) -> None:
        """Queue ``frame`` (from any thread; always through the loop's own queue of callbacks, so
        frames from different threads keep the log's order)."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.queue.put_nowait, frame)

    def put_many(self, frames: list[bytes]) -> None:
        """``put`` of each of ``frames``, in order, in one hop onto the loop."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._put_all, frames)

    def _put_all(self, frames: list[bytes]) -> None:
        for frame in frames:
            self.queue.put_nowait(frame)

    async def get(self) -> bytes:
        return await self.queue.get()

    def close(self) -> None:
        self._log.remove(self)


class ChangeLog:
    """A bounded, numbered log of a feed's changes (see the module docstring)."""

    def __init__(self, feed: ChangeFeed, *, size: int = CHANGE_LOG_SIZE) -> None:
        self.size = size
        """How many recent changes are kept (older ones are forgotten first)."""
        self.epoch = secrets.token_hex(4)
        self._ring: deque[tuple[int, _Entry]] = deque()
        """The newest changes by number: each as its frame once a listener needed it, else the
        ``Change`` itself or its place in a run's burst (a run event is not encoded, nor its change
        built, for a log nobody follows)."""
        self._last = 0
        self._lock = threading.Lock()
        self._listeners: set[ChangeListener] = set()
        self._unsubscribe = feed.subscribe(self._record, many=self._record_many)

    @property
    def last_id(self) -> str:
        """The id of the newest change (``<epoch>-0`` before the first)."""
        return f"{self.epoch}-{self._last}"

    def _record(self, change: Change) -> None:
        with self._lock:
            self._last += 1
            entry: bytes | Change = change
            if self._listeners or change.kind not in _APPEND_ONLY:
                entry = self._encode(self._last, change)
            self._ring.append((self._last, entry))
            while len(self._ring) > max(self.size, 0):
                self._ring.popleft()
            origin = change.data.get("origin") if change.source in RELAYED_SOURCES else None
            for listener in self._listeners:  # under the lock: every listener sees the log's order
                assert isinstance(entry, bytes)
                if origin is None or origin != listener.origin:
                    listener.put(entry)

    def _record_many(self, changes: Sequence[Change]) -> None:
        """``_record`` of each change of a burst, under one hold of the lock, with one hop per listener."""
        if not isinstance(changes, RunEvents):
            for change in changes:
                self._record(change)
            return
        with self._lock:
            first = self._last + 1
            self._last += len(changes)
            ring = self._ring
            if self._listeners:
                frames = [self._encode(first + i, change) for i, change in enumerate(changes)]
                ring.extend(zip(range(first, self._last + 1), frames, strict=True))
                for listener in self._listeners:  # under the lock: every listener sees the log's order
                    listener.put_many(frames)
            else:
                count = len(changes)
                ring.extend(zip(range(first, first + count), zip(itertools.repeat(changes), range(count))))
            for _ in range(len(ring) - max(self.size, 0)):
                ring.popleft()

    def _frame_of(self, number: int, entry: "_Entry") -> bytes:
        """The frame of a ring entry (encoded now when it was kept unencoded)."""
        if isinstance(entry, bytes):
            return entry
        if isinstance(entry, tuple):
            burst, index = entry
            return self._encode(number, burst[index])
        return self._encode(number, entry)

    def _encode(self, number: int, change: Change) -> bytes:
        return _frame(f"{self.epoch}-{number}", change.kind, {
            "source": change.source, "kind": change.kind, "id": change.id, "data": change.data})

    def follow(self, last_id: str | None, origin: str | None = None) -> ChangeListener:
        """A listener fed from now on, first given what came after ``last_id`` (or a ``reset``); with
        ``origin``, the changes a window with that tag relayed are left out of what it is fed from now on."""
        listener = ChangeListener(self, asyncio.get_running_loop(), origin or None)
        with self._lock:
            if last_id:
                for frame in self._missed(last_id):
                    listener.put(frame)
            self._listeners.add(listener)
        return listener

    def announce_reset(self, reason: str) -> None:
        """Tell every stream to read everything again (the cloud's state was replaced); a stream
        resumed later from any earlier id is told the same."""
        with self._lock:
            self._last += 1
            self._ring.clear()
            frame = _frame(self.last_id, "reset", {"reset": {"reason": reason}})
            for listener in self._listeners:
                listener.put(frame)

    def remove(self, listener: ChangeListener) -> None:
        with self._lock:
            self._listeners.discard(listener)

    def close(self) -> None:
        """Stop recording (listeners get nothing more)."""
        self._unsubscribe()

    def _missed(self, last_id: str) -> list[bytes]:
        epoch, _, number = last_id.strip().rpartition("-")
        seen = int(number) if number.isascii() and number.isdigit() else -1  # "²" is a digit to isdigit
        oldest = self._ring[0][0] if self._ring else self._last + 1
        if epoch != self.epoch or seen < 0 or seen > self._last:
            reason = "the stream was restarted since that id"
        elif seen + 1 < oldest:
            reason = f"more than {self.size} changes happened since that id"
        else:
            return [self._frame_of(number_, entry) for number_, entry in self._ring if number_ > seen]
        return [_frame(self.last_id, "reset", {"reset": {"reason": reason}})]


_Entry = bytes | Change | tuple[RunEvents, int]
"""A ring entry: a frame, a change not encoded yet, or the place of one in a run's burst."""
_APPEND_ONLY = frozenset({"run.event"})
"""Changes whose payload is never changed after it is published (a run's appended event): these
may wait in the log unencoded until a listener asks for them."""


def _frame(event_id: str, event: str, payload: dict[str, object]) -> bytes:
    data = json.dumps(payload, default=str)  # ASCII: a lone surrogate travels as its escape
    return f"id: {event_id}\nevent: {event_line_name(event)}\ndata: {data}\n\n".encode()
