"""``RunMirror``: one per window, each run's event log as read models, converted once.

A run's events are held with their ``at`` as float seconds, each converted once. A mirror is one of two
kinds, by where a run's log comes from:

- over a live log (``source``: an in-process cloud's own list of a run's events): the mirror reads a
  run's whole log from it the first time it is asked for it; after that, every ``run.event`` change on
  the window's feed hands it the new event, queued as given (publishing stays cheap) and converted the
  first time it is read. ``events`` checks the log against the source, so a log cut at its start or
  replaced by a fresh read is read again. The newest ``keep`` runs are held (the source has the rest),
  each its newest ``tail`` events (``SOURCE_TAIL``), ``budget`` events in all; what is older is read
  from the source and converted when it is asked for, not kept.
- fed (no ``source``: a window attached to a server): the mirror is a bounded cache of the runs'
  logs, never a copy of them all. Its holder gives it what it read of a run (``hold``: the newest
  events, or the whole log) and each event the server's change stream carries (``append``), before
  that change is published. Each run keeps at most its newest ``tail`` events (``lo``: every event
  after that sequence number is held), and at most ``keep`` runs are held (the least recently given
  or read go first); what is not held is read from the server (``Desk.read_events``).

``since`` answers only the events after a sequence number, so a pane that applies new events never
reads the whole run again; ``events`` answers the whole log (a fed mirror: what it holds of it;
``covers`` says whether that reaches back far enough).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ..times import parse_time
from ..wire import events_without

from ..changes import RunEvents

if TYPE_CHECKING:
    from ..changes import Change, ChangeFeed

__all__ = ["LogSource", "RunMirror", "converted", "converted_all", "seq_of", "wire_seq", "FED_TAIL", "FED_KEEP"]

FED_TAIL = 5000
"""How many of a run's newest events a fed mirror holds (a run's stream shows them without a read)."""
FED_KEEP = 48
"""How many runs a fed mirror holds events of (the least recently given or read go first)."""
FED_BUDGET = 60_000
"""How many events a fed mirror holds in all (past it, the least recently given or read runs go)."""
SOURCE_TAIL = 20_000
"""Over a live source, how many of a run's newest events are held converted (an older one is
converted again when it is read: a whole log, a range before them)."""
SOURCE_BUDGET = 200_000
"""Over a live source, how many converted events are held in all."""

LogSource = Callable[[str], Sequence[Mapping[str, object]]]
"""A run's whole event log, as the wire has it, read live (an empty sequence for a run it does not know)."""
def _same(held: Mapping[str, object] | None, event: Mapping[str, object]) -> bool:
    """Whether ``event`` is the event ``held`` was when it was read: the same object, or (a stored
    log's older events are read back as new objects each time) the same sequence number and id."""
    return held is event or (held is not None and held.get("seq") == event.get("seq")
                             and held.get("id") == event.get("id"))


def seq_of(event: Mapping[str, object]) -> int:
    """An event's sequence number (0 when it has none that is a whole number)."""
    seq = event.get("seq")
    return seq if isinstance(seq, int) else int(seq) if isinstance(seq, str) and seq.isdigit() else 0


def wire_seq(event: Mapping[str, object]) -> int:
    """An event's sequence number as the control API carries it (a number, or a number as text), or
    ``TypeError`` naming what it is instead (0 when it has none)."""
    seq = event.get("seq", 0)
    if isinstance(seq, (int, float, str)):
        return int(seq)
    raise TypeError(f"an event's seq is {type(seq).__name__}, not a number")


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
    out = dict(event)  # a plain copy, then one key set: faster than ``{**event, "at": ...}``
    out["at"] = last[1]
    return out


def converted_all(events: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """``converted`` of each of ``events``, in one loop (a burst shares its times: each parsed once)."""
    global _last_at
    raw, seconds = _last_at
    out: list[dict[str, object]] = []
    append = out.append
    for event in events:
        copied = dict(event)
        if "at" in copied:
            at = copied["at"]
            if at != raw or type(at) is not type(raw):
                raw, seconds = at, parse_time(at)
            copied["at"] = seconds
        append(copied)
    _last_at = (raw, seconds)
    return out


class _Log:
    """One run's events: their read models (``events``), those given by the feed but not yet converted
    (``fresh``), and, over a live source, how much of it was read (``seen``, ``first``, ``last``: the
    length and the first and last event objects of the source's log, to tell whether it was cut or
    replaced since)."""

    __slots__ = ("events", "fresh", "seen", "first", "last", "top", "lo")

    def __init__(self, lo: int = 0) -> None:
        self.events: list[dict[str, object]] = []
        self.fresh: list[Mapping[str, object]] = []
        self.seen = 0
        self.first: Mapping[str, object] | None = None
        self.last: Mapping[str, object] | None = None
        self.top = 0
        """The sequence number of the newest event held or queued."""
        self.lo = lo
        """Every event after this sequence number is held (0: the whole log; a fed mirror's cut tail: more)."""

    def fill(self, events: Sequence[Mapping[str, object]]) -> None:
        """The whole log, read afresh."""
        self.events = converted_all(events)
        self.fresh = []
        self.seen = len(events)
        self.first = events[0] if events else None
        self.last = events[-1] if events else None
        self.top = seq_of(events[-1]) if events else 0

    def fill_tail(self, events: Sequence[Mapping[str, object]], tail: int) -> None:
        """The whole log, read afresh, of which only the newest ``tail`` events are converted and held."""
        count = len(events)
        start = max(0, count - tail)
        self.events = converted_all(events[start:] if start else events)
        self.fresh = []
        self.seen = count
        self.first = events[0] if count else None
        self.last = events[-1] if count else None
        self.top = seq_of(self.last) if self.last is not None else 0
        self.lo = seq_of(events[start - 1]) if start else 0

    def add(self, event: Mapping[str, object], seq: int) -> None:
        """One event given as it happened, and its sequence number (converted when read)."""
        self.fresh.append(event)
        self.top = seq

    def settle(self) -> None:
        """Convert the events given since the last read."""
        if not self.fresh:
            return
        fresh, self.fresh = self.fresh, []
        self.seen += len(fresh)
        self.last = fresh[-1]
        if self.first is None:
            self.first = fresh[0]
        self.events.extend(converted_all(fresh))

    def cut(self, tail: int) -> None:
        """Keep only the newest ``tail`` events (``lo`` moves up to the newest one let go)."""
        self.settle()
        drop = len(self.events) - tail
        if drop > 0:
            self.lo = max(self.lo, seq_of(self.events[drop - 1]))
            del self.events[:drop]


class RunMirror:
    """Each run's events as read models, converted once: over a live log kept current by the window's
    change feed, or fed the logs a served window reads."""

    def __init__(self, feed: ChangeFeed | None = None, *, source: LogSource | None = None, keep: int | None = None,
                 tail: int | None = None, budget: int | None = None) -> None:
        self.source = source
        """Where a run's whole log is read (None: the mirror is fed what its holder reads, a bounded cache)."""
        self.keep = keep if keep is not None else 64 if source is not None else FED_KEEP
        """How many runs' logs are held (the least recently read, or given, go first)."""
        self.tail = tail if tail is not None else FED_TAIL if source is None else SOURCE_TAIL
        """How many of a run's newest events are held."""
        self.budget = max(budget if budget is not None else FED_BUDGET if source is None else SOURCE_BUDGET, self.tail)
        """How many events are held in all (checked as a run is held or cut)."""
        self._runs: OrderedDict[str, _Log] = OrderedDict()
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = (
            feed.subscribe(self.given, many=self.given_many) if feed is not None and source is not None else None)

    def close(self) -> None:
        """Stop following the feed."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- fed by the feed (over a live source) ----------------------------------------------------

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
            return  # not held yet: the first read takes the whole log from the source
        seq = seq_of(event)
        with self._lock:
            if seq > log.top:
                log.add(event, seq)

    def given_many(self, changes: Sequence[Change]) -> None:
        """A burst of changes from the feed (a run's events appended at once), as ``given`` takes each,
        in one pass under one lock (a run's burst, ``RunEvents``, in one step)."""
        if isinstance(changes, RunEvents):
            if changes.source == "cloud":
                self._given_events(changes.run_id, changes.events)
            return
        runs = self._runs
        run_id: str | None = None
        log: _Log | None = None
        with self._lock:
            for change in changes:
                if change.kind != "run.event" or change.source != "cloud":
                    if change.kind == "attach.reloaded":
                        runs.clear()
                        run_id = log = None
                    continue
                if change.id != run_id:
                    run_id = change.id
                    log = runs.get(run_id)
                event = change.data.get("event")
                if log is None or not isinstance(event, Mapping):
                    continue
                seq = seq_of(event)
                if seq > log.top:
                    log.fresh.append(event)
                    log.top = seq

    def _given_events(self, run_id: str, events: Sequence[Mapping[str, object]]) -> None:
        """A held run's new events, oldest first: those after the newest held are queued at once."""
        log = self._runs.get(run_id)
        if log is None or not events:
            return
        with self._lock:
            top = log.top
            start = 0
            if seq_of(events[0]) <= top:  # some were held already (read from the source meanwhile)
                start = next((i for i, event in enumerate(events) if seq_of(event) > top), len(events))
                if start == len(events):
                    return
            log.fresh.extend(events[start:] if start else events)
            log.top = max(top, seq_of(events[-1]))

    # -- fed by its holder (a served window) -----------------------------------------------------

    def hold(self, run_id: str, events: Sequence[Mapping[str, object]], *, lo: int = 0) -> None:
        """What was just read of a run: its events after ``lo`` (0: its whole log), replacing what was
        held; events the change stream carried after the newest of the read are kept after it (the read
        may be older than them: a large answer is written a run at a time while the stream goes on).
        Only the newest ``tail`` are kept."""
        log = _Log(lo)
        log.fill(events)
        with self._lock:
            held = self._runs.get(run_id)
            if held is not None and held.top > log.top:
                held.settle()
                top = log.top
                log.events.extend(event for event in held.events if seq_of(event) > top)
                log.top = held.top
            self._runs[run_id] = log
            self._runs.move_to_end(run_id)
            if len(log.events) > self.tail:
                log.cut(self.tail)
            self._bound()

    def append(self, run_id: str, event: Mapping[str, object]) -> None:
        """One event the change stream carried: held once, after the events before it (one already
        held is skipped); an event whose ``seq`` is no number is refused (``TypeError``), nothing kept.
        A run not held yet starts a log holding what comes from now on."""
        seq = wire_seq(event)
        with self._lock:
            log = self._runs.get(run_id)
            if log is None:
                log = self._runs[run_id] = _Log(max(0, seq - 1))
                self._bound()
            if not (log.events or log.fresh) or seq > log.top:
                log.add(event, seq)
                if len(log.fresh) + len(log.events) > self.tail + self.tail // 5:
                    log.cut(self.tail)
                    self._runs.move_to_end(run_id)  # a run streaming on is not the least recent
                    self._bound()

    def _bound(self) -> None:
        """Let the least recently read runs go until ``keep`` are held and their events are within
        ``budget`` (under the lock; the newest run stays)."""
        runs = self._runs
        while len(runs) > self.keep:
            runs.popitem(last=False)
        total = sum(len(log.events) + len(log.fresh) for log in runs.values())
        while total > self.budget and len(runs) > 1:
            _, gone = runs.popitem(last=False)
            total -= len(gone.events) + len(gone.fresh)

    def covers(self, run_id: str, after: int) -> bool:
        """Whether every event of the run after ``after`` is held (over a live source: always)."""
        if self.source is not None:
            return True
        log = self._runs.get(run_id)
        return log is not None and log.lo <= after

    def held_from(self, run_id: str) -> int | None:
        """Every event of the run after this sequence number is held (None: nothing of it is)."""
        if self.source is not None:
            return 0
        log = self._runs.get(run_id)
        return None if log is None else log.lo

    def last_seq(self, run_id: str) -> int:
        """The sequence number of the newest event held of a run (0 when none is)."""
        log = self._runs.get(run_id)
        return log.top if log is not None else 0

    # -- reads -----------------------------------------------------------------------------------

    def _log(self, run_id: str) -> _Log:
        with self._lock:
            log = self._runs.get(run_id)
            if log is None:
                if self.source is None:
                    return _Log()  # a fed mirror holds only what it was given: no log yet
                log = self._runs[run_id] = _Log()
                log.fill_tail(self.source(run_id), self.tail)
                self._bound()
            else:
                self._runs.move_to_end(run_id)
                log.settle()
                if self.source is not None and len(log.events) > self.tail + self.tail // 5:
                    log.cut(self.tail)
                    self._bound()
            return log

    def events(self, run_id: str) -> tuple[dict[str, object], ...]:
        """The run's whole log, each event's ``at`` in seconds (over a live source, checked against it;
        the events older than those held are converted for this answer, not kept)."""
        log = self._log(run_id)
        if self.source is None:
            return tuple(log.events)
        events = self.source(run_id)
        with self._lock:
            log.settle()
            done = log.seen
            if done > len(events) or (done and not (_same(log.first, events[0]) and _same(log.last, events[done - 1]))):
                log.fill_tail(events, self.tail)  # cut at its start, or read afresh: convert again
            elif done < len(events):
                more = events[done:]
                log.events.extend(converted_all(more))
                log.seen, log.last, log.top = len(events), events[-1], seq_of(events[-1])
                if log.first is None:
                    log.first = events[0]
            held, older = tuple(log.events), log.seen - len(log.events)
        if log.lo <= 0 or older <= 0:
            return held
        return tuple(converted_all(events[:older])) + held

    def since(self, run_id: str, seq: int, *, exclude: Collection[str] = ()) -> list[dict[str, object]]:
        """The run's events after ``seq`` (each ``at`` in seconds), oldest first, none of the types in
        ``exclude``; only those are read (over a live source, those older than the held ones are
        converted for this answer: a store-backed log leaves out the excluded ones as it reads)."""
        log = self._log(run_id)
        events = log.events
        if self.source is not None and seq < log.lo:
            source = self.source(run_id)
            # a store-backed log reads a range by seq, its store leaving out the excluded types
            between = getattr(source, "between", None)
            older: Sequence[Mapping[str, object]]
            if between is not None:
                older = between(seq, log.lo, exclude=exclude)
            else:
                older = events_without(source[bisect_right(source, seq, key=seq_of):bisect_right(source, log.lo, key=seq_of)],
                             exclude)
            return converted_all(older) + events_without(events, exclude)
        if not events or seq_of(events[-1]) <= seq:
            return []
        return events_without(events[bisect_right(events, seq, key=seq_of):], exclude)  # a log's sequence numbers only grow

    def forget(self, run_id: str | None = None) -> None:
        """Drop one run's log (or every one): over a live source, the next read takes it again."""
        with self._lock:
            if run_id is None:
                self._runs.clear()
            else:
                self._runs.pop(run_id, None)
