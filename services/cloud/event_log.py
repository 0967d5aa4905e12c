"""``EventLog``: a run's event log that keeps only its newest events in memory.

An embedded cloud's run keeps its whole log in a plain list. A served cloud's store gives each run
an ``EventLog`` instead (``CloudState.event_log``): it reads like that list (``len``, indexes,
slices, iteration, ``==`` with a list), but holds in memory only a tail: the events the store has
not written yet, and at most ``keep`` more. Older events are read from an ``EventSource`` (the
store) by seq range when asked for, so what a run costs in memory is bounded by ``keep``, not by
its history.

What the store promises the log: every event older than the tail's first one is stored (the store
``release``s events only after the transaction holding them committed).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Protocol, overload

from ..wire import events_without

__all__ = ["EventLog", "EventSource", "events_between", "PAGE"]

PAGE = 512
"""How many stored events one read takes at most (iteration reads page by page)."""

Event = dict[str, Any]


class EventSource(Protocol):
    """Where a log's older events are stored (a served cloud's ``cloud.db``)."""

    def read(self, after: int, before: int | None, limit: int | None, offset: int = 0, *,
             exclude: Collection[str] = ()) -> list[Event]:
        """The stored events with ``after < seq < before`` (``before`` None: no upper bound) in seq
        order, leaving out those whose ``type`` is in ``exclude``, skipping ``offset`` of them and
        taking at most ``limit``."""
        ...

    def count(self, after: int, before: int | None) -> int:
        """How many stored events have ``after < seq < before``."""
        ...


class EventLog(Sequence[Event]):
    """A run's events, oldest first: a tail in memory, the rest in ``source``."""

    __slots__ = ("_tail", "_older", "floor", "keep", "source")

    def __init__(self, events: Iterable[Event] = (), *, keep: int = 256, source: EventSource | None = None,
                 older: int = 0, floor: int = 0) -> None:
        if keep < 0:
            raise ValueError(f"keep must be zero or more events, not {keep!r}")
        self._tail: list[Event] = list(events)
        self._older = older
        """How many events older than the tail are only in ``source``."""
        self.floor = floor
        """Events with ``seq <= floor`` were expired: never read back from ``source``."""
        self.keep = keep
        """How many written events the tail keeps (besides every unwritten one)."""
        self.source = source

    # -- reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._older + len(self._tail)

    @property
    def in_memory(self) -> int:
        """How many events the log holds in memory now."""
        return len(self._tail)

    def _boundary(self) -> int | None:
        """The seq of the tail's first event (every older one is stored); None for an empty tail."""
        return self._tail[0]["seq"] if self._tail else None

    def _stored(self, after: int, before: int | None, limit: int | None, offset: int = 0, *,
                exclude: Collection[str] = ()) -> list[Event]:
        if self.source is None:
            raise LookupError("this run's older events are not held in memory and the log has no store")
        return self.source.read(max(after, self.floor), before, limit, offset, exclude=exclude)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        older = self._older
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            if stop <= start:
                return []
            out: list[Event] = []
            if start < older:
                boundary = self._boundary()
                out = self._stored(self.floor, boundary, min(stop, older) - start, start)
            out.extend(self._tail[max(0, start - older):max(0, stop - older)])
            return out
        if not isinstance(index, int):
            raise TypeError(f"event log indices must be integers or slices, not {type(index).__name__}")
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event log index out of range")
        if index >= older:
            return self._tail[index - older]
        return self._stored(self.floor, self._boundary(), 1, index)[0]

    def __iter__(self) -> Iterator[Event]:
        tail = list(self._tail)  # a snapshot: the store may release events while this is read
        if self._older:
            boundary = tail[0]["seq"] if tail else None
            after = self.floor
            while True:
                page = self._stored(after, boundary, PAGE)
                yield from page
                if len(page) < PAGE:
                    break
                after = page[-1]["seq"]
        yield from tail

    def __reversed__(self) -> Iterator[Event]:
        return reversed(list(self))

    def between(self, after: int, upto: int | None = None, limit: int | None = None, *,
                exclude: Collection[str] = ()) -> list[Event]:
        """The events with ``after < seq <= upto`` (``upto`` None: every later one), oldest first,
        at most ``limit``, leaving out those whose ``type`` is in ``exclude``: from memory when the
        tail holds them all, the older part from the store (which leaves them out as it reads)."""
        part = self.stored_part(after, upto)
        stored = self._stored(part[0], part[1], limit, exclude=exclude) if part is not None else []
        return self.joined(stored, after, upto, limit, exclude=exclude)

    def stored_part(self, after: int, upto: int | None = None) -> tuple[int, int | None] | None:
        """The seqs ``between(after, upto)`` reads from the store, as ``(after, before)`` (``after <
        seq < before``; before None: no bound), or None when the tail holds all of them: a reader of
        many runs reads their stored parts together, then ``joined`` each."""
        boundary = self._boundary()
        if not (self._older and (boundary is None or after + 1 < boundary)):
            return None
        if self.source is None:
            raise LookupError("this run's older events are not held in memory and the log has no store")
        before = boundary if upto is None else (upto + 1 if boundary is None else min(boundary, upto + 1))
        return max(after, self.floor), before

    def joined(self, stored: list[Event], after: int, upto: int | None = None, limit: int | None = None, *,
               exclude: Collection[str] = ()) -> list[Event]:
        """``between(after, upto, limit, exclude=)`` given what it reads from the store (``stored``: the
        events of ``stored_part``, as many as ``limit`` allows, none of the types in ``exclude``; read
        with no await since ``stored_part`` was asked, so the tail is the one it was asked of)."""
        tail = self._tail
        boundary = self._boundary()
        out = stored
        if self._older and (boundary is None or after + 1 < boundary):
            if limit is not None and len(out) >= limit:
                return out[:limit]
            if boundary is not None:  # every stored event before the tail was looked at
                after = max(after, boundary - 1)
        start = bisect.bisect_right(tail, after, key=_seq)
        stop = len(tail) if upto is None else bisect.bisect_right(tail, upto, key=_seq)
        if exclude:
            return out + events_without(tail[start:stop], exclude, None if limit is None else limit - len(out))
        if limit is not None:
            stop = min(stop, start + limit - len(out))
        out.extend(tail[start:stop])
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, EventLog)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventLog({len(self)} events, {len(self._tail)} in memory)"

    # -- writing -------------------------------------------------------------------------------

    def append(self, event: Event) -> None:
        self._tail.append(event)

    def extend(self, events: Iterable[Event]) -> None:
        self._tail.extend(events)

    def release(self, written: int, keep: int | None = None) -> None:
        """The store has written every event up to seq ``written``: keep only ``keep`` of those
        (the log's own ``keep`` when None; 0: none, a run the store let go of) and every later one in
        memory."""
        tail = self._tail
        keep = self.keep if keep is None else keep
        if self.source is None or len(tail) <= keep:
            return
        drop = min(len(tail) - keep, bisect.bisect_right(tail, written, key=_seq))
        if drop > 0:
            del tail[:drop]
            self._older += drop

    def expire(self, up_to: int) -> None:
        """Forget the events with ``seq <= up_to`` (a cursor before them answers ``stream_gap``)."""
        if up_to <= self.floor:
            return
        self.floor = up_to
        self._tail = [e for e in self._tail if e["seq"] > up_to]
        if self._older:
            self._older = self.source.count(up_to, self._boundary()) if self.source is not None else 0


def _seq(event: Event) -> int:
    return event["seq"]


def events_between(events: Sequence[Event], after: int, upto: int | None = None,
                   limit: int | None = None, *, exclude: Collection[str] = ()) -> list[Event]:
    """``EventLog.between`` of any run's events (a plain list: an embedded cloud's run)."""
    if isinstance(events, EventLog):
        return events.between(after, upto, limit, exclude=exclude)
    out = []
    for event in events:  # as a stream always read a list: each event after the last one taken
        seq = event["seq"]
        if seq > after and (upto is None or seq <= upto):
            after = seq
            if exclude and event.get("type") in exclude:
                continue
            out.append(event)
            if limit is not None and len(out) >= limit:
                break
    return out
