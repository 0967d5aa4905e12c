"""``RunBook``: every run of one cloud, by id and in start order, some of them only in a store.

An embedded cloud holds every run it started as a ``FakeRun``. A served cloud's store reads back,
at start, no run: each is a ``RunSlot`` (its id, person, generation and status) until something
asks for it by id or walks the runs, when the store's ``loader`` reads it from ``cloud.db`` and it
is held from then on. After each write the store lets go of the runs used least recently past a
bound (``release``), never one in use. So a restart costs nothing per run but its slot, and a run
read back is the same object on every read while anything holds it (what one caller changes, the
next one sees).

``CloudState.runs`` is the book (a mapping of run id to the current run of that id: ``get``, ``[]``,
``in``); ``CloudState.run_log`` is its ``log``, the runs in start order, deleted ones kept. What
only needs what a slot knows (the ids of the runs in start order, whose they are, whether they are
deleted) reads ``slots`` and reads nothing back. ``QuestionBook`` is ``CloudState.questions``: the
run that opened each question, the ones of runs not read back found through the store's ``finder``.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from .runs import FakeRun

__all__ = ["RunSlot", "RunBook", "RunLog", "QuestionBook", "READ_BACK"]

READ_BACK = 256
"""How many stored runs a walk of ``RunLog`` asks the loader for at once."""


class RunSlot:
    """One run in start order: the ``FakeRun`` once held (``run``), else what the store told of it."""

    __slots__ = ("id", "user_id", "gen", "deleted", "status", "run", "prev", "ref")

    def __init__(self, run_id: str, user_id: str, *, gen: int | None = None, deleted: bool = False,
                 status: str = "running", run: "FakeRun | None" = None, prev: "RunSlot | None" = None) -> None:
        self.id = run_id
        self.user_id = user_id
        self.gen = gen
        """Which run of this id it is (0 the first; a deleted id may start again), once a store numbered it."""
        self.deleted = deleted
        self.status = status
        self.run = run
        """The run, once held; None while it is only stored."""
        self.prev = prev
        """The slot this id had before this run started under it (a deleted run), if any."""
        self.ref: "weakref.ref[FakeRun] | None" = None
        """The run it held before the book let go of it (``release``): while anything still holds that
        run, reading the slot holds it again, so a run is never two objects at once."""

    @property
    def is_deleted(self) -> bool:
        return self.run.deleted if self.run is not None else self.deleted

    @property
    def run_status(self) -> str:
        return self.run.status if self.run is not None else self.status

    def __repr__(self) -> str:
        held = "held" if self.run is not None else "stored"
        return f"RunSlot({self.id!r}, gen={self.gen}, {held})"


Loader = Callable[[list[RunSlot], bool], "list[FakeRun]"]
"""Reads the runs of stored slots back: with ``True`` each is held (set on its slot, the store follows
it from then on); with ``False`` each is a copy for one read (an export), held by nobody."""


class RunLog(Sequence["FakeRun"]):
    """Every run in start order, deleted ones kept (``CloudState.run_log``): stored ones are read back
    as they are reached, ``READ_BACK`` at a time."""

    __slots__ = ("_book",)

    def __init__(self, book: "RunBook") -> None:
        self._book = book

    @property
    def slots(self) -> list[RunSlot]:
        return self._book.slots

    def __len__(self) -> int:
        return len(self._book.slots)

    @overload
    def __getitem__(self, index: int) -> "FakeRun": ...

    @overload
    def __getitem__(self, index: slice) -> "list[FakeRun]": ...

    def __getitem__(self, index: int | slice) -> "FakeRun | list[FakeRun]":
        if isinstance(index, slice):
            return self._book.held_runs(self._book.slots[index])
        return self._book.held_runs([self._book.slots[index]])[0]

    def __iter__(self) -> Iterator["FakeRun"]:
        slots = self._book.slots
        for start in range(0, len(slots), READ_BACK):
            yield from self._book.held_runs(slots[start:start + READ_BACK])

    def __reversed__(self) -> Iterator["FakeRun"]:
        slots = self._book.slots
        for end in range(len(slots), 0, -READ_BACK):
            yield from reversed(self._book.held_runs(slots[max(0, end - READ_BACK):end]))

    def append(self, run: "FakeRun") -> None:
        self._book.add(run)

    def clear(self) -> None:
        self._book.clear()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, RunLog)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunLog({len(self)} runs)"


class RunBook(Mapping[str, "FakeRun"]):
    """The current run of each id (``CloudState.runs``), and ``log``: every run in start order."""

    def __init__(self) -> None:
        self._slots: list[RunSlot] = []
        self._current: dict[str, RunSlot] = {}
        self._of: dict[int, RunSlot] = {}
        """The slot of each held run, by ``id(run)``."""
        self.loader: Loader | None = None
        """Reads stored slots back (a served cloud's store sets it); without one every run is held."""
        self.log = RunLog(self)
        self._recent: OrderedDict[RunSlot, None] = OrderedDict()
        """The slots of held runs, the one read or started least recently first (``release``)."""

    # -- reading --------------------------------------------------------------------------------

    def __getitem__(self, run_id: str) -> "FakeRun":
        return self._read(self._current[run_id])

    def get(self, run_id: str, default: "FakeRun | None" = None) -> "FakeRun | None":  # type: ignore[override]
        slot = self._current.get(run_id)
        return default if slot is None else self._read(slot)

    def _read(self, slot: RunSlot) -> "FakeRun":
        run = slot.run
        if run is None:
            return self.held_runs([slot])[0]
        self._recent.move_to_end(slot)
        return run

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._current

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current))

    def __len__(self) -> int:
        return len(self._current)

    @property
    def slots(self) -> list[RunSlot]:
        """Every run's slot in start order (nothing read back)."""
        return self._slots

    def values(self) -> "list[FakeRun]":  # type: ignore[override]
        """The current run of each id, stored ones read back (``READ_BACK`` at a time) and held."""
        current = list(self._current.values())
        return [run for start in range(0, len(current), READ_BACK)
                for run in self.held_runs(current[start:start + READ_BACK])]

    def items(self) -> "list[tuple[str, FakeRun]]":  # type: ignore[override]
        return [(run.id, run) for run in self.values()]

    def slot(self, run_id: str) -> RunSlot | None:
        """The current slot of ``run_id`` (nothing read back)."""
        return self._current.get(run_id)

    def slot_of(self, run: "FakeRun") -> RunSlot | None:
        """The slot of a held run."""
        return self._of.get(id(run))

    def held(self) -> Iterator["FakeRun"]:
        """The runs held in memory (a stored one has no stream open and nothing unwritten)."""
        return (slot.run for slot in list(self._recent) if slot.run is not None)

    def held_runs(self, slots: Sequence[RunSlot]) -> "list[FakeRun]":
        """The runs of ``slots``, the stored ones read back (and held from now on)."""
        for slot in slots:
            alive = slot.ref() if slot.ref is not None and slot.run is None else None
            if alive is not None:  # let go of, but still held by someone: the same run again
                self._hold(slot, alive)
            elif slot.ref is not None:
                slot.ref = None  # (gone: read back from the store below)
        stored = [slot for slot in slots if slot.run is None]
        if stored:
            if self.loader is None:
                raise KeyError(f"run {stored[0].id} is stored and this cloud has no store to read it from")
            for run, slot in zip(self.loader(stored, True), stored, strict=True):
                self._hold(slot, run)
        for slot in slots:
            self._recent.move_to_end(slot)
        return [slot.run for slot in slots]  # type: ignore[misc]

    def _hold(self, slot: RunSlot, run: "FakeRun") -> None:
        slot.run, slot.ref = run, None
        self._of[id(run)] = slot
        self._recent[slot] = None

    def peek(self, run_id: str) -> "FakeRun | None":
        """The current run of ``run_id`` for one read: held as it is, else a copy read back (not
        held); None when unknown."""
        slot = self._current.get(run_id)
        if slot is None:
            return None
        return slot.run if slot.run is not None else self.copies([slot])[0]

    def copies(self, slots: Sequence[RunSlot]) -> "list[FakeRun]":
        """The runs of ``slots`` for one read: held ones as they are, stored ones read back as copies
        nobody holds (an export reads every run without holding them all)."""
        alive = {id(slot): slot.ref() for slot in slots if slot.run is None and slot.ref is not None}
        stored = [slot for slot in slots if slot.run is None and alive.get(id(slot)) is None]
        read = iter(self.loader(stored, False) if stored and self.loader is not None else [])
        if stored and self.loader is None:
            raise KeyError(f"run {stored[0].id} is stored and this cloud has no store to read it from")
        return [slot.run if slot.run is not None else alive.get(id(slot)) or next(read) for slot in slots]

    def release(self, keep: int, busy: Callable[["FakeRun"], bool]) -> "list[FakeRun]":
        """Let go of the runs read or started least recently until at most ``keep`` are held, leaving
        those ``busy`` says are in use (a stream open, something unwritten): a run let go of is read
        back from the store when asked for again (the same object while anything still holds it).
        Only a cloud with a ``loader`` lets go of any. Returns the runs let go of."""
        if self.loader is None or len(self._recent) <= keep:
            return []
        gone: list["FakeRun"] = []
        kept: list[RunSlot] = []
        while len(self._recent) - len(kept) > keep and self._recent:
            slot, _ = self._recent.popitem(last=False)
            run = slot.run
            if run is None:
                continue
            if busy(run):
                kept.append(slot)
                continue
            slot.user_id, slot.deleted, slot.status = run.user_id, run.deleted, run.status
            slot.run, slot.ref = None, weakref.ref(run)
            self._of.pop(id(run), None)
            gone.append(run)
        for slot in reversed(kept):  # still the oldest: looked at first next time
            self._recent[slot] = None
            self._recent.move_to_end(slot, last=False)
        return gone


    # -- changing -------------------------------------------------------------------------------

    def add(self, run: "FakeRun") -> RunSlot:
        """A run just started: the current one of its id, last in start order."""
        slot = RunSlot(run.id, run.user_id, run=run, prev=self._current.get(run.id))
        self._slots.append(slot)
        self._current[run.id] = slot
        self._of[id(run)] = slot
        self._recent[slot] = None
        return slot

    def restore(self, slots: list[RunSlot]) -> None:
        """Every run at once (a load or an import), in start order: held ones and stored ones."""
        self.clear()
        for slot in slots:
            slot.prev = self._current.get(slot.id)
            self._current[slot.id] = slot
            if slot.run is not None:
                self._of[id(slot.run)] = slot
                self._recent[slot] = None
        self._slots = slots

    def clear(self) -> None:
        self._slots = []
        self._current = {}
        self._of = {}
        self._recent = OrderedDict()

    def __repr__(self) -> str:
        held = sum(1 for slot in self._slots if slot.run is not None)
        return f"RunBook({len(self._slots)} runs, {held} held)"


class QuestionBook(Mapping[str, "FakeRun"]):
    """The run that opened each question, by question id (``CloudState.questions``): the questions of
    held runs, and through ``finder`` (a served cloud's store) those of runs still stored."""

    def __init__(self, held: dict[str, "FakeRun"] | None = None) -> None:
        self._held: dict[str, "FakeRun"] = dict(held or {})
        self.finder: Callable[[str], "FakeRun | None"] | None = None

    def get(self, question_id: str, default: "FakeRun | None" = None) -> "FakeRun | None":  # type: ignore[override]
        run = self._held.get(question_id)
        if run is None and self.finder is not None and isinstance(question_id, str):
            run = self.finder(question_id)
            if run is not None:
                self._held[question_id] = run
        return run if run is not None else default

    def __getitem__(self, question_id: str) -> "FakeRun":
        run = self.get(question_id)
        if run is None:
            raise KeyError(question_id)
        return run

    def __contains__(self, question_id: object) -> bool:
        return isinstance(question_id, str) and self.get(question_id) is not None

    def __setitem__(self, question_id: str, run: "FakeRun") -> None:
        self._held[question_id] = run

    def setdefault(self, question_id: str, run: "FakeRun") -> "FakeRun":
        return self._held.setdefault(question_id, run)

    def forget(self, run: "FakeRun", question_ids: Iterator[str] | list[str]) -> None:
        """Let go of ``run`` for these questions (the book let go of the run: found again through
        ``finder`` when asked for)."""
        for question_id in question_ids:
            if self._held.get(question_id) is run:
                del self._held[question_id]

    def __iter__(self) -> Iterator[str]:
        """The questions of the runs held (a stored run's are found when asked for)."""
        return iter(list(self._held))

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> None:
        self._held.clear()
