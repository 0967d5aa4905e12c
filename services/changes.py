"""The change feed: every service write publishes a ``Change``; the Workspace forwards them to the UI.

A ``ChangeFeed`` fans each published change out to every subscriber. Publishing is safe from any
thread (watchdog's observer thread, ``asyncio.to_thread`` workers): subscribers' queues belong to
their event loop and are fed with ``call_soon_threadsafe``.

A burst (a run's batch of events appended at once) is published with ``publish_many``: every
subscriber still sees every change, in order, exactly once, but a subscriber that takes a batch
(``subscribe(..., many=...)``) is called once for the whole burst, and a queue is fed in one hop.
A run's burst travels as ``RunEvents``: a sequence that reads as its ``run.event`` changes (each
built when it is read), so a batch subscriber that knows it takes the run's events in one step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

__all__ = ["Change", "ChangeFeed", "RunEvents", "RELAYED_SOURCES"]

RELAYED_SOURCES = frozenset({"canvas", "insights", "okf", "outbox"})
"""The sources of the changes a window attached to a served workspace relays to the others (through the
server's change stream); the server does not send one back to the window that relayed it."""


@dataclass(frozen=True, slots=True)
class Change:
    """One thing that changed: which service, what kind of change, which item, and a small payload."""

    source: str
    """The publishing service: ``cloud``, ``canvas``, ``okf``, ``insights``, ``outbox``."""
    kind: str
    """What happened, e.g. ``run.event``, ``object.written``, ``judgment.pending``."""
    id: str = ""
    """The id of the item that changed (a run id, an object id, a judgment id)."""
    data: dict[str, Any] = field(default_factory=dict)
    """A small JSON-like payload; never a live ORM object."""


class RunEvents(Sequence[Change]):
    """A burst of one run's new events, published at once: reads as the changes
    ``Change(source, "run.event", run_id, {"event": event, **data})`` of each event, in order."""

    __slots__ = ("source", "run_id", "events", "data")

    def __init__(self, source: str, run_id: str, events: Sequence[dict[str, Any]], data: dict[str, Any]) -> None:
        self.source = source
        """The publishing service (``cloud``)."""
        self.run_id = run_id
        """The run whose events these are."""
        self.events = events
        """The events, oldest first (the cloud's own objects: read, never changed)."""
        self.data = data
        """What each change carries besides its event (``user_id``)."""

    def __len__(self) -> int:
        return len(self.events)

    @overload
    def __getitem__(self, index: int) -> Change: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Change]: ...

    def __getitem__(self, index: int | slice) -> Change | Sequence[Change]:
        if isinstance(index, slice):
            return RunEvents(self.source, self.run_id, self.events[index], self.data)
        return Change(self.source, "run.event", self.run_id, {"event": self.events[index], **self.data})

    def __iter__(self) -> Iterator[Change]:
        source, run_id, data = self.source, self.run_id, self.data
        for event in self.events:
            yield Change(source, "run.event", run_id, {"event": event, **data})


class _Subscriber:
    __slots__ = ("loop", "queue", "callback", "many")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        queue: asyncio.Queue[Change] | None,
        callback: Callable[[Change], None] | None,
        many: Callable[[Sequence[Change]], None] | None = None,
    ) -> None:
        self.loop = loop
        self.queue = queue
        self.callback = callback
        self.many = many


class ChangeFeed:
    """Fans out published changes to async iterators and plain callbacks."""

    def __init__(self) -> None:
        self._subscribers: tuple[_Subscriber, ...] = ()
        self._lock = threading.Lock()  # serialises replacing the tuple

    def publish(self, change: Change) -> None:
        """Hand ``change`` to every subscriber; callable from any thread.

        The subscribers are an immutable tuple replaced whole on (un)subscribe, so a publication
        reads it without the lock and never copies it. One change goes to each subscriber's
        ``callback`` (a run's events are published one by one at this rate: no batch is built)."""
        for sub in self._subscribers:
            if sub.callback is not None:
                sub.callback(change)
            else:
                _enqueue(sub, (change,))

    def publish_many(self, changes: Sequence[Change]) -> None:
        """Hand every change of ``changes`` to every subscriber, in order; callable from any thread.

        A subscriber that takes batches is called once with all of them; a plain callback once per
        change; an async iterator's queue is fed in one hop onto its loop."""
        if not changes:
            return
        for sub in self._subscribers:
            if sub.many is not None:
                sub.many(changes)
            elif sub.callback is not None:
                for change in changes:
                    sub.callback(change)
            else:
                _enqueue(sub, changes)

    def announce(self, source: str, kind: str, id: str = "", /, **data: Any) -> Change:
        """Build a ``Change`` and publish it; returns it. The first three are positional only, so
        ``data`` may hold fields named ``source``, ``kind`` or ``id``."""
        change = Change(source, kind, id, data)
        self.publish(change)
        return change

    def subscribe(
        self, callback: Callable[[Change], None], *, many: Callable[[Sequence[Change]], None] | None = None
    ) -> Callable[[], None]:
        """Call ``callback`` synchronously for every change; returns the function that unsubscribes.

        With ``many``, a burst published at once (``publish_many``) is handed to ``many`` in one call
        instead of to ``callback`` change by change."""
        sub = _Subscriber(None, None, callback, many)
        with self._lock:
            self._subscribers = (*self._subscribers, sub)
        return lambda: self._remove(sub)

    async def changes(self) -> AsyncIterator[Change]:
        """Iterate over every change published from now on, until the iterator is closed."""
        sub = _Subscriber(asyncio.get_running_loop(), asyncio.Queue(), None)
        with self._lock:
            self._subscribers = (*self._subscribers, sub)
        try:
            while True:
                assert sub.queue is not None
                yield await sub.queue.get()
        finally:
            self._remove(sub)

    def _remove(self, sub: _Subscriber) -> None:
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s is not sub)


def _enqueue(sub: _Subscriber, changes: Sequence[Change]) -> None:
    """Put ``changes`` on an async iterator's queue: directly on its own loop, else in one hop onto it."""
    assert sub.loop is not None and sub.queue is not None
    if sub.loop.is_closed():
        return
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is sub.loop:
        _put_all(sub.queue, changes)
    else:
        sub.loop.call_soon_threadsafe(_put_all, sub.queue, tuple(changes))


def _put_all(queue: asyncio.Queue[Change], changes: Sequence[Change]) -> None:
    for change in changes:
        queue.put_nowait(change)
