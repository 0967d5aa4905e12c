"""``RunMirror``: one per window, each run's event log as read models, fed by the change feed.

A run's events are held with their ``at`` as float seconds, each converted once. The mirror reads a
run's whole log from the desk's ``RunBook`` the first time it is asked for it; after that, every
``run.event`` change on the window's feed hands it the new event, which is queued as given (publishing
stays cheap) and converted the first time it is read. ``since`` answers only the events after a
sequence number, so a pane that applies new events never reads the whole run again; ``events``
answers the whole log (checked against the book, so a log cut at its start or replaced by a fresh read
is read again). The newest ``keep`` runs are held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..times import parse_time

if TYPE_CHECKING:
    from ..changes import Change, ChangeFeed
    from .book import RunBook

__all__ = ["RunMirror", "converted", "seq_of"]


def seq_of(event: Mapping[str, object]) -> int:
    """An event's sequence number (0 when it has none that is a whole number)."""
    seq = event.get("seq")
    return seq if isinstance(seq, int) else int(seq) if isinstance(seq, str) and seq.isdigit() else 0


_last_at: tuple[object, float] = (None, 0.0)
"""The last wire time parsed (events of one burst share their millisecond: it is parsed once)."""


def converted(event: Mapping[str, object]) -> dict[str, object]:
    """``event`` with its ``at`` as float seconds (0.0 when it holds no usable time)."""
    global _last_at
    if "at" not in event:
        return dict(event)
    at = event["at"]
    last = _last_at
    if at != last[0] or type(at) is not type(last[0]):
        last = _last_at = (at, parse_time(at))
    return {**event, "at": last[1]}


class _Log:
    """One run's events: the wire's (``sources``), their read models (``events``), and those given by
    the feed but not yet converted (``fresh``)."""

    __slots__ = ("sources", "events", "fresh")

    def __init__(self) -> None:
        self.sources: list[Mapping[str, object]] = []
        self.events: list[dict[str, object]] = []
        self.fresh: list[Mapping[str, object]] = []

    def last_seq(self) -> int:
        last = self.fresh[-1] if self.fresh else self.sources[-1] if self.sources else None
        return seq_of(last) if last is not None else 0

    def settle(self) -> None:
        """Convert the events the feed gave since the last read."""
        if not self.fresh:
            return
        fresh, self.fresh = self.fresh, []
        self.sources.extend(fresh)
        self.events.extend(converted(event) for event in fresh)


class RunMirror:
    """Each run's events as read models, converted once, kept current by the window's change feed."""

    def __init__(self, book: RunBook, feed: ChangeFeed | None = None, *, keep: int = 64) -> None:
        self.book = book
        self.keep = keep
        """How many runs' logs are held (the least recently read go first)."""
        self._runs: OrderedDict[str, _Log] = OrderedDict()
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = feed.subscribe(self.given) if feed is not None else None

    def close(self) -> None:
        """Stop following the feed."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def given(self, change: Change) -> None:
        """A change from the feed: a new event of a held run is queued (converted when read)."""
        if change.kind == "attach.reloaded":  # every run was read afresh: read each again when asked
            self.forget()
            return
        if change.kind != "run.event" or change.source != "cloud":
            return
        log = self._runs.get(change.id)
        event = change.data.get("event")
        if log is None or not isinstance(event, Mapping):
            return  # not held yet: the first read takes the whole log from the book
        with self._lock:
            if seq_of(event) > log.last_seq():
                log.fresh.append(event)

    def _log(self, run_id: str) -> _Log:
        with self._lock:
            log = self._runs.get(run_id)
            if log is None:
                log = self._runs[run_id] = _Log()
                self._fill(log, self.book.events(run_id))
                while len(self._runs) > self.keep:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(run_id)
                log.settle()
            return log

    @staticmethod
    def _fill(log: _Log, events: tuple[dict[str, object], ...]) -> None:
        log.sources = list(events)
        log.events = [converted(event) for event in events]
        log.fresh = []

    def events(self, run_id: str) -> tuple[dict[str, object], ...]:
        """The run's whole log, each event's ``at`` in seconds (checked against the book's log)."""
        log = self._log(run_id)
        events = self.book.events(run_id)
        with self._lock:
            log.settle()
            done = len(log.sources)
            if done > len(events) or (done and (log.sources[0] is not events[0]
                                                or log.sources[-1] is not events[done - 1])):
                self._fill(log, events)  # cut at its start, or read afresh: convert again
            else:
                log.sources.extend(events[done:])
                log.events.extend(converted(event) for event in events[done:])
            return tuple(log.events)

    def since(self, run_id: str, seq: int) -> list[dict[str, object]]:
        """The run's events after ``seq`` (each ``at`` in seconds), oldest first; only those are read."""
        log = self._log(run_id)
        events = log.events
        start = len(events)
        while start and seq_of(events[start - 1]) > seq:
            start -= 1
        return events[start:]

    def forget(self, run_id: str | None = None) -> None:
        """Drop one run's log (or every one): the next read takes it from the book again."""
        with self._lock:
            if run_id is None:
                self._runs.clear()
            else:
                self._runs.pop(run_id, None)
