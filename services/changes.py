"""The change feed: every service write publishes a ``Change``; the Workspace forwards them to the UI.

A ``ChangeFeed`` fans each published change out to every subscriber. Publishing is safe from any
thread (watchdog's observer thread, ``asyncio.to_thread`` workers): subscribers' queues belong to
their event loop and are fed with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "ChangeFeed"]


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


class _Subscriber:
    __slots__ = ("loop", "queue", "callback")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        queue: asyncio.Queue[Change] | None,
        callback: Callable[[Change], None] | None,
    ) -> None:
        self.loop = loop
        self.queue = queue
        self.callback = callback


class ChangeFeed:
    """Fans out published changes to async iterators and plain callbacks."""

    def __init__(self) -> None:
        self._subscribers: tuple[_Subscriber, ...] = ()
        self._lock = threading.Lock()  # serialises replacing the tuple

    def publish(self, change: Change) -> None:
        """Hand ``change`` to every subscriber; callable from any thread.

        The subscribers are an immutable tuple replaced whole on (un)subscribe, so a publication
        reads it without the lock and never copies it."""
        running: asyncio.AbstractEventLoop | None | bool = False  # False: not looked up yet
        for sub in self._subscribers:
            if sub.callback is not None:
                sub.callback(change)
                continue
            assert sub.loop is not None and sub.queue is not None
            if sub.loop.is_closed():
                continue
            if running is False:
                try:
                    running = asyncio.get_running_loop()
                except RuntimeError:
                    running = None
            if running is sub.loop:
                sub.queue.put_nowait(change)
            else:
                sub.loop.call_soon_threadsafe(sub.queue.put_nowait, change)

    def announce(self, source: str, kind: str, id: str = "", **data: Any) -> Change:
        """Build a ``Change`` and publish it; returns it."""
        change = Change(source, kind, id, data)
        self.publish(change)
        return change

    def subscribe(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback`` synchronously for every change; returns the function that unsubscribes."""
        sub = _Subscriber(None, None, callback)
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
