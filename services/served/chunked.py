"""Large control answers as JSON written in pieces, so that building one never holds the server.

A window attaching reads every run with every event (``GET /runs?events=1``: 21 MB at 100k events),
and ``GET /state`` and ``GET /runs/{id}`` of a long run are as large. Encoded in one ``json.dumps``
on the server's event loop, such an answer held every other client (app calls, event streams, other
windows' actions) for as long as it took: half a second at 100k events, seconds at 1M. Here each is
a generator of text pieces: a run's fields, then its events a slice at a time, each piece encoded
when it is asked for. ``ControlApp`` sends the pieces in chunks of about ``CHUNK_BYTES`` and lets the
loop run between two chunks, so the pause another client sees is one chunk's encoding, whatever the
workspace's size.

The answers keep their shapes (the same JSON as ``json.dumps`` of the whole answer). Each run is read
as it is when its turn comes (its fields and the events it holds then, together), so a run that
grows while the answer is written is sent as it was at that moment; what comes after reaches a window
through the change stream it opened first, as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..text import json_text_suspect, repair_value
from .dtos import run_dto

if TYPE_CHECKING:
    from ..cloud.cloud import FakeCloud
    from ..cloud.book import RunSlot
    from ..cloud.runs import FakeRun

__all__ = ["CHUNK_BYTES", "EVENT_SLICE", "runs_answer", "run_answer", "state_answer", "chunks"]

CHUNK_BYTES = 128 * 1024
"""About how much of an answer is sent at once (the loop runs between two chunks)."""
EVENT_SLICE = 256
"""How many events are encoded in one piece."""


def _events(events: Sequence[object]) -> Iterator[str]:
    """``json.dumps(events)``, a slice of ``EVENT_SLICE`` at a time."""
    yield "["
    for start in range(0, len(events), EVENT_SLICE):
        if start:
            yield ", "
        yield json.dumps(events[start:start + EVENT_SLICE])[1:-1]
    yield "]"


def _with_events(head: dict[str, object], events: Sequence[object]) -> Iterator[str]:
    """``json.dumps({**head, "events": events})`` in pieces (``events`` last, as ``run_dto`` puts it)."""
    text = json.dumps(head)
    yield text[:-1] + (", " if len(text) > 2 else "") + '"events": '
    yield from _events(events)
    yield "}"


def _run(run: "FakeRun", events: bool) -> Iterator[str]:
    """``json.dumps(run_dto(run, events=events))`` in pieces; the run read once, as it is now."""
    dto = run_dto(run, events=False)
    if not events:
        yield json.dumps(dto)
        return
    yield from _with_events(dto, list(run.events))  # a copy of the list: the events held now


def runs_answer(cloud: "FakeCloud", slots: "Sequence[RunSlot]", *, events: bool,
                stored: "Callable[[Sequence[RunSlot]], list[str | None]] | None" = None,
                extra: "dict[str, object] | None" = None) -> Iterator[str]:
    """``{"runs": [...]}`` as ``GET /runs`` answers it, the runs of ``slots`` (in start order), a run
    (or a slice of its events) at a time, ``READ_BACK`` runs read at once. A run only stored is sent
    as ``stored`` gives its entry (the store's text, not read back) or, with ``events`` or without such
    a text, read back as a copy for this answer alone: listing a workspace holds none of its runs.
    ``extra``'s members follow ``runs`` in the answer (a page's ``total``, ``from``, counts)."""
    from ..cloud.book import READ_BACK

    yield '{"runs": ['
    for start in range(0, len(slots), READ_BACK):
        chunk = slots[start:start + READ_BACK]
        waiting = [slot for slot in chunk if slot.run is None]
        texts = dict(zip(map(id, waiting), stored(waiting), strict=True)) if waiting and stored and not events else {}
        copied = iter(cloud.state.runs.copies([slot for slot in waiting if texts.get(id(slot)) is None]))
        for index, slot in enumerate(chunk):
            if start or index:
                yield ", "
            text = texts.get(id(slot))
            if text is not None:
                yield _sendable(text)
            else:
                yield from _run(slot.run if slot.run is not None else next(copied), events)
    yield "]" + "".join(f", {json.dumps(key)}: {json.dumps(value)}" for key, value in (extra or {}).items()) + "}"


def _sendable(text: str) -> str:
    """A stored entry as an answer carries it: text an older server stored that no answer could carry
    (a lone surrogate, NUL) repaired, as a run read back is."""
    if not json_text_suspect(text):
        return text
    return json.dumps(repair_value(json.loads(text))[0])


def run_answer(run: "FakeRun", *, events: bool) -> Iterator[str]:
    """One run as ``GET /runs/{id}`` answers it, its events a slice at a time."""
    yield from _run(run, events)


def state_answer(cloud: "FakeCloud") -> Iterator[str]:
    """``export_state(cloud)`` as JSON, a run (or a slice of its events) at a time; everything but
    the runs is read at the start."""
    from ..cloud.state import each_run, run_record, state_document

    runs = each_run(cloud)
    document = state_document(cloud, [])
    yield "{"
    for index, (key, value) in enumerate(document.items()):
        yield (", " if index else "") + json.dumps(key) + ": "
        if key != "runs":
            yield json.dumps(value)
            continue
        yield "["
        for number, run in enumerate(runs):
            if number:
                yield ", "
            yield from _with_events(run_record(run), list(run.events))
        yield "]"
    yield "}"


def chunks(pieces: Iterable[str], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """``pieces`` joined into byte chunks of at least ``size`` (the last one shorter)."""
    held: list[str] = []
    count = 0
    for piece in pieces:
        held.append(piece)
        count += len(piece)
        if count >= size:
            yield "".join(held).encode()
            held, count = [], 0
    if held:
        yield "".join(held).encode()
