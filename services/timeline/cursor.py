"""``TimeCursor``: a position in the history, and every pane read as of there.

The cursor is a moment's number. ``step`` moves it change by change, ``minutes`` by a minute of the
moments' own times, ``jump`` to the last change at or before a time (``parse_when`` reads what a person
types: ``14:02:11``, ``14:02:11.320``, ``-5m``, ``2026-12-04 14:02``). The cursor does not move with
what keeps arriving: ``arrived`` counts it, and ``to_now`` goes to the newest moment.
"""

from __future__ import annotations

import asyncio
import re
import time as _time
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Callable
from typing import Any, TypeVar

from .store import Moment, TimeStore

__all__ = ["TimeCursor", "Panes", "parse_when", "banner_time"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Panes:
    """Every pane's first page as of one moment, read at once (``TimeCursor.panes``)."""

    moment: Moment | None
    objects: list[tuple[str, dict[str, Any]]]
    object_count: int
    edges: list[tuple[str, dict[str, Any]]]
    """The selected object's edges out."""
    names: dict[str, str]
    """The names of the objects the pages refer to (edge targets, inbox owners), by id."""
    inbox: list[tuple[str, dict[str, Any]]]
    inbox_count: int
    runs: list[tuple[str, dict[str, Any]]]
    seqs: dict[str, int]
    """Each listed run's last event then (its stream's end)."""
    grants: list[tuple[str, dict[str, Any]]]
    judgments: list[tuple[str, dict[str, Any]]]
    memory: dict[str, Any] | None

_RELATIVE = re.compile(r"^-\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_when(text: str, *, now: float) -> float:
    """The time ``text`` names, in seconds since the epoch, or ``ValueError`` in words. Accepted:
    ``-90s`` / ``-5m`` / ``-2h`` / ``-1d`` (before ``now``), ``HH:MM[:SS[.fff]]`` (today, local time;
    yesterday when that is still to come), ``YYYY-MM-DD HH:MM[:SS[.fff]]`` or the same with ``T``."""
    value = text.strip()
    if not value:
        raise ValueError("type a time: 14:02:11, -5m or 2026-12-04 14:02")
    relative = _RELATIVE.match(value)
    if relative:
        return now - float(relative.group(1)) * _UNITS[relative.group(2)]
    for form in ("%H:%M:%S.%f", "%H:%M:%S", "%H:%M"):
        try:
            clock = datetime.strptime(value, form).time()
        except ValueError:
            continue
        today = datetime.fromtimestamp(now).date()
        when = datetime.combine(today, clock).timestamp()
        return when - 86400.0 if when > now else when
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        pass
    raise ValueError(f"not a time: {value[:40]!r} (try 14:02:11, 14:02:11.320, -5m or 2026-12-04 14:02)")


def banner_time(at: float) -> str:
    """``14:02:11.320`` (local time), the date in front when it is not today."""
    moment = datetime.fromtimestamp(at)
    shown = moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    if moment.date() != datetime.fromtimestamp(_time.time()).date():
        shown = moment.strftime("%Y-%m-%d ") + shown
    return shown


class TimeCursor:
    """Where in the history the panes are drawn from."""

    def __init__(self, store: TimeStore) -> None:
        self.store = store
        self.entered = store.last()
        """The newest moment when the cursor was made: what it calls now."""
        self.moment = self.entered
        """The moment the panes show."""
        self.at: float | None = None
        """That moment's time (None: the history has none yet)."""
        self.first = store.first()
        found = store.moment(self.moment)
        self.at = found.at if found else None

    async def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    # -- moving --------------------------------------------------------------------------------

    async def _go(self, moment: int) -> int:
        return await self._call(self._go_now, moment)

    def _go_now(self, moment: int) -> int:
        store = self.store
        self.first = store.first()
        self.moment = max(self.first, min(moment, store.last()))
        found = store.moment(self.moment)
        self.at = found.at if found else None
        return self.moment

    async def step(self, count: int) -> int:
        """Move ``count`` changes (negative: back); stops at the first and the newest."""
        return await self._go(self.moment + count)

    async def minutes(self, count: int) -> int:
        """Move ``count`` minutes of the changes' own times (negative: back): to the last change at or
        before that time, and at least one change (a quiet minute is stepped over, not stood in)."""
        if self.at is None or count == 0:
            return self.moment
        moment = await self._call(self.store.at_or_before, self.at + 60.0 * count)
        if count < 0:
            return await self._go(min(max(moment, self.first), self.moment - 1))
        return await self._go(max(moment, self.moment + 1))

    async def jump(self, when: float) -> int:
        """Go to the last change at or before ``when`` (the first one when ``when`` is before them all)."""
        moment = await self._call(self.store.at_or_before, when)
        return await self._go(moment or self.first)

    async def to_now(self) -> int:
        """Go to the newest change."""
        self.entered = await self._call(self.store.last)
        return await self._go(self.entered)

    async def newest_at(self) -> float | None:
        """The newest change's time (what a relative time such as ``-5m`` counts back from)."""
        found: Moment | None = await self._call(lambda: self.store.moment(self.store.last()))
        return found.at if found else None

    # -- saying where it is ------------------------------------------------------------------------

    def _banner(self) -> str:
        """``as of 14:02:11.320 · 1,204 changes ago · esc: back to now``, and what arrived since the
        cursor was made (counted, not drawn)."""
        if self.at is None:
            return "no history yet · esc: back to now"
        ago = self.store.between(self.moment, self.entered)
        arrived = self.store.between(self.entered, 2**62)
        text = f"as of {banner_time(self.at)} · {ago:,} change{'s' if ago != 1 else ''} ago"
        if arrived:
            text += f" · {arrived:,} new since, not drawn"
        return text + " · esc: back to now"

    # -- reading as of the cursor ------------------------------------------------------------------

    async def count(self, kind: str, *, a: str | None = None) -> int:
        """How many items of ``kind`` there were as of the cursor."""
        return await self._call(self.store.count, kind, self.moment, a=a)

    async def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """One item as of the cursor (None: it did not exist then)."""
        return await self._call(self.store.get, kind, key, self.moment)

    async def every(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every item of ``kind`` as of the cursor (for the small kinds: grants, judgments)."""
        return await self._call(self.store.every, kind, self.moment)

    async def panes(self, selected_object: str | None, *, limit: int = 200) -> Panes:
        """Every pane's first ``limit`` items as of the cursor, with what they name, in one read."""
        return await self._call(self._panes, self.moment, selected_object, limit)

    async def banner_and_panes(self, selected_object: str | None, *, limit: int = 200) -> tuple[str, Panes]:
        """The banner (``as of 14:02:11.320 · 1,204 changes ago · esc: back to now``) and ``panes()``, in
        one hop to the history's thread."""
        return await self._call(lambda: (self._banner(), self._panes(self.moment, selected_object, limit)))

    def _panes(self, moment: int, selected_object: str | None, limit: int) -> Panes:
        store = self.store
        objects = store.page("object", moment, limit=limit)
        if selected_object is None or not any(k == selected_object for k, _ in objects):
            selected_object = objects[0][0] if objects else None
        edges = store.page("edge", moment, a=selected_object, limit=40) if selected_object else []
        inbox = store.page("inbox", moment, limit=limit)
        names = {k: str(v.get("name") or k) for k, v in objects}
        wanted = sorted({str(e["dst"]) for _, e in edges} | {str(v.get("owner_id")) for _, v in inbox} - set(names))
        found = store.get_many("object", wanted, moment)
        names.update((k, str(found[k].get("name") or k) if k in found else k) for k in wanted)
        runs = store.page("run", moment, limit=limit)
        seqs = {}
        for key, value in runs:
            kept = value.get("seq")
            seqs[key] = max(store.seq_at(key, moment), kept if isinstance(kept, int) else 0)
        return Panes(moment=store.moment(moment), objects=objects, object_count=store.count("object", moment),
                     edges=edges, names=names, inbox=inbox, inbox_count=store.count("inbox", moment), runs=runs,
                     seqs=seqs, grants=store.page("grant", moment, limit=limit),
                     judgments=store.page("judgment", moment, limit=limit), memory=store.get("memory", "status", moment))

    async def seq(self, run_id: str) -> int:
        """The last event of the run the history had seen as of the cursor (its stream's end then)."""
        row = await self.get("run", run_id)
        seen = await self._call(self.store.seq_at, run_id, self.moment)
        return max(seen, int(row["seq"]) if row and isinstance(row.get("seq"), int) else 0)
