"""The time cursor's read models: each pane's items as plain JSON objects, read from the live services.

One function per kind turns a service's read model into the value the history keeps (``Version``),
and ``read_frame`` reads every kind of a workspace at once: what the history records when it
starts (its baseline), and what a test compares the history's answer with. A frame is
``{kind: {key: value}}``; the kinds:

| kind | key | value (from) | pane |
|---|---|---|---|
| ``run`` | run id | ``RunView`` and the last event's ``seq`` | runs |
| ``grant`` | person id | ``GrantView`` | grants |
| ``object`` | object id | the object's own columns (no full name: that is its owner's) | canvas tree |
| ``edge`` | ``src kind dst`` | the edge | canvas graph |
| ``inbox`` | entry id | ``InboxEntryView`` (each owner's newest ``INBOX_KEPT``) | inbox |
| ``judgment`` | ``okf:<id>`` / ``insight:<id>`` | ``JudgmentItem`` / ``InsightReview`` | judgments |
| ``memory`` | ``status`` | the memory view's counts | memory |

A run's stream as of a moment is not copied: it is the run's own log up to the ``seq`` the history
saw by then (``TimeStore.seq_at``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..desk.views import run_view
from ..errors import ServiceError
from .store import Version

if TYPE_CHECKING:
    from ..canvas import Canvas
    from ..canvas.views import InboxEntryView
    from ..desk import Desk, GrantView, RunView
    from ..knowledge.insights import InsightReviews
    from ..knowledge.okf import Harvest
    from ..knowledge.outbox import MemoryOutbox

__all__ = ["KINDS", "INBOX_KEPT", "Frame", "read_frame", "run_version", "grant_version", "object_version",
           "edge_version", "inbox_version", "judgment_versions", "memory_version", "plain", "run_versions",
           "grant_versions", "object_versions", "edge_versions", "inbox_versions", "frame_versions", "frame_batches"]

KINDS = ("run", "grant", "object", "edge", "inbox", "judgment", "memory")
"""Every kind of item the history keeps, in the order a frame lists them."""
INBOX_KEPT = 200
"""How many of an owner's newest inbox entries the history keeps (the inbox pane shows as many)."""
PAGE = 2000
"""Runs, objects and edges read at once while every run and a whole canvas are walked."""

Frame = dict[str, dict[str, dict[str, Any]]]


def plain(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples become lists): what the history answers."""
    return json.loads(json.dumps(value, sort_keys=True))


def _inverse(seconds: float) -> str:
    """A sort key that orders times newest first."""
    return f"{1e11 - seconds:022.6f}"


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
"""The field names of a view's dataclass and a reader of them all, made once."""


def run_version(view: RunView, seq: int) -> Version:
    """A run as the runs pane lists it, with its last event's ``seq`` (its stream's length then)."""
    read = _FIELDS.get(type(view))
    if read is None:
        names = tuple(f.name for f in fields(view))
        read = _FIELDS[type(view)] = (names, attrgetter(*names))
    value: dict[str, Any] = dict(zip(read[0], read[1](view)))  # read at C speed: every run, at a baseline
    value["seq"] = seq
    if not _SCALARS.issuperset(map(type, value.values())):  # a view's fields are scalars: as JSON reads them
        value = plain(value)
    return Version("run", view.id, value, sort=_inverse(view.created_at) + view.id)


def run_versions(desk: Desk, ids: Iterable[str] | None = None) -> list[Version]:
    """The runs ``ids`` name (None: every run, deleted ones included); an unknown id is a run gone.
    A run's ``seq`` is its view's ``events`` (both its last event's sequence number)."""
    if ids is None:
        return [run_version(v, v.events) for v in desk.runs(include_deleted=True)]
    out = []
    for run_id in ids:
        try:
            view = desk.view(run_id)
        except (ServiceError, LookupError):  # the run is not known (any more): it has no row
            out.append(Version("run", run_id, None))
            continue
        out.append(run_version(view, view.events))
    return out


def grant_version(view: GrantView) -> Version:
    """A person's grant as the grants pane shows it."""
    return Version("grant", view.user_id, plain(asdict(view)), sort=view.user_id)


def grant_versions(desk: Desk) -> list[Version]:
    """Every person's grant."""
    return [grant_version(g) for g in desk.grants()]


_OBJECT_FIELDS = ("id", "type", "kind", "name", "owner_id", "privacy", "status", "created_at", "updated_at")


def object_version(columns: tuple[Any, ...]) -> Version:
    """An object's own columns (``Canvas.object_columns``), ordered by type and name."""
    value = dict(zip(_OBJECT_FIELDS, columns, strict=True))  # plain values (strings, floats, None) as JSON has them
    return Version("object", str(value["id"]), value, sort=f"{value['type']}\x00{value['name']}")


async def object_versions(canvas: Canvas, ids: Iterable[str]) -> list[Version]:
    """The objects ``ids`` name; one that no longer exists is a removal."""
    wanted = sorted(set(ids))
    found = {cols[0]: cols for _, cols in await canvas.object_columns(wanted)} if wanted else {}
    return [object_version(found[i]) if i in found else Version("object", i, None) for i in wanted]


def edge_version(src: str, kind: str, dst: str, created_at: float) -> Version:
    """One edge, found by either end."""
    return Version("edge", f"{src} {kind} {dst}",
                   {"src": src, "kind": kind, "dst": dst, "created_at": created_at}, sort=kind, a=src, b=dst)


async def edge_versions(canvas: Canvas, ids: Iterable[str], current: Iterable[str]) -> list[Version]:
    """The edges touching ``ids`` now, and a removal for each of ``current`` (the keys the history
    holds for them) that is gone."""
    wanted = sorted(set(ids))
    now = [edge_version(s, k, d, at) for _, s, k, d, at in await canvas.edge_rows(wanted)] if wanted else []
    kept = {v.key for v in now}
    return now + [Version("edge", key, None) for key in current if key not in kept]


_INBOX_FIELDS = ("id", "owner_id", "kind", "object_id", "object_name", "event_type", "level", "actor_id", "at",
                 "summary", "body", "read")
"""``InboxEntryView``'s fields: every one a plain value, so the view is its JSON as it is."""


def inbox_version(entry: InboxEntryView) -> Version:
    """One inbox entry, found by its owner, newest first."""
    return Version("inbox", str(entry.id), {f: getattr(entry, f) for f in _INBOX_FIELDS},
                   sort=f"{10**15 - entry.id:016d}", a=entry.owner_id)


async def inbox_versions(canvas: Canvas, owner: str, current: Iterable[str]) -> list[Version]:
    """The owner's newest ``INBOX_KEPT`` entries, and a removal for each of ``current`` not among them."""
    from ..canvas import ObjectNotFoundError

    try:
        page = await canvas.inbox(owner, limit=INBOX_KEPT)
        now = [inbox_version(e) for e in page.items]
    except ObjectNotFoundError:
        now = []
    kept = {v.key for v in now}
    return now + [Version("inbox", key, None) for key in current if key not in kept]


async def judgment_versions(okf: Harvest | None, insights: InsightReviews | None,
                            current: Iterable[str]) -> list[Version]:
    """Every judgment and insight review, and a removal for each of ``current`` that is gone."""
    now: list[Version] = []
    if okf is not None:
        for item in await okf.queue():
            now.append(Version("judgment", f"okf:{item.id}", plain({**asdict(item), "source": "okf"}),
                               sort=f"{item.created_at:020.6f}"))
    if insights is not None:
        for review in await insights.list():
            now.append(Version("judgment", f"insight:{review.id}", plain({**asdict(review), "source": "insight"}),
                               sort=f"{review.created_at:020.6f}"))
    kept = {v.key for v in now}
    return now + [Version("judgment", key, None) for key in current if key not in kept]


async def memory_version(outbox: MemoryOutbox | None) -> Version:
    """The memory view's counts (None: the workspace has no memory outbox)."""
    if outbox is None:
        return Version("memory", "status", None)
    status = await outbox.status()
    return Version("memory", "status", {
        "conversations": len(status.conversations),
        "pending": status.pending_total,
        "pending_forks": len(status.pending_forks),
        "resolved_forks": status.resolved_forks,
        "quarantined": status.quarantined,
        "corrupt_lines": status.corrupt_lines,
        "last_delivery_at": status.last_delivery_at,
    })


async def read_frame(desk: Desk, canvas: Canvas | None, okf: Harvest | None, insights: InsightReviews | None,
                     outbox: MemoryOutbox | None) -> Frame:
    """Every kind's items as the live services answer them now."""
    frame: Frame = {kind: {} for kind in KINDS}
    for version in await frame_versions(desk, canvas, okf, insights, outbox):
        if version.value is not None:
            frame[version.kind][version.key] = version.value
    return frame


async def frame_versions(desk: Desk, canvas: Canvas | None, okf: Harvest | None, insights: InsightReviews | None,
                         outbox: MemoryOutbox | None) -> list[Version]:
    """Every item of every kind now, as versions (``read_frame``'s)."""
    out: list[Version] = []
    async for batch in frame_batches(desk, canvas, okf, insights, outbox):
        out += batch
    return out


async def frame_batches(desk: Desk, canvas: Canvas | None, okf: Harvest | None, insights: InsightReviews | None,
                        outbox: MemoryOutbox | None) -> AsyncIterator[list[Version]]:
    """Every item of every kind now, a batch at a time: the grants, judgments and memory counts first,
    then the runs, the canvas's objects and its edges ``PAGE`` at a time, then the inboxes (what the
    history's baseline records without holding every run or a whole canvas at once, the loop free
    between two batches)."""
    small = grant_versions(desk) + await judgment_versions(okf, insights, ())
    memory = await memory_version(outbox)
    yield small + ([memory] if memory.value is not None else [])
    async for page in desk.run_pages():  # a window over many runs holds only some: the rest read a page at a time
        yield [run_version(v, v.events) for v in map(run_view, page)]
    if canvas is None:
        return
    after = 0
    while batch := await canvas.object_columns(after=after, limit=PAGE):
        yield [object_version(cols) for _, cols in batch]
        after = batch[-1][0]
    after = 0
    while edges := await canvas.edge_rows(after=after, limit=PAGE):
        yield [edge_version(s, k, d, at) for _, s, k, d, at in edges]
        after = edges[-1][0]
    owner = ""
    while True:
        owner, entries = await canvas.inbox_kept(after_owner=owner, owners=max(1, PAGE // INBOX_KEPT),
                                                 per_owner=INBOX_KEPT)
        if not entries:
            break
        yield [inbox_version(e) for e in entries]
