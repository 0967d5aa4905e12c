"""Capture: notes and run records become content-addressed inputs in the state dir.

- A note's ``contentHash`` is the sha256 of ``{name, text}``; a note whose hash was captured
  before is not captured again, and live notes are never changed. The input is
  ``{version: 1, kind: "note", name, contentHash, text}``.
- A run record is given as a plain dict ``{"thread": <run id>, "turns": [{"id", "ts"?, "role"?,
  "text": str | [{"role", "text"}]}]}``; the turns after the thread's last captured turn are
  cut into windows of at most ~96 KB and stored as ``{version: 1, kind: "record", thread, after,
  until, turns: [{id, ts, thread, kind: "session", source, text: [{role, text}]}]}``.
- Records fail closed: a malformed record, a turn over 1 MiB, or text that cannot be stored (a
  lone surrogate or NUL in any field) fails the whole capture (``CaptureError``, ``E_CAPTURE``)
  with nothing recorded; ``status.lastCapture`` records the failed attempt.
- Notes are refused one by one, never repaired: a note that is a link, not a regular file,
  unreadable, over 1 MiB, not UTF-8 or holding NUL is skipped with its reason, the other notes are
  captured, ``status.lastCapture`` is ``partial`` and ``status.skippedNotes`` lists
  ``{name, reason}`` until the next note capture (shown in the judgments pane). The skipped note stays in the home untouched and is read again at the next
  capture, so fixing it (saving it as UTF-8) is all it takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...clock import iso
from ...text import repair_text, value_problem
from .errors import CaptureError
from .home import InstanceHome
from .limits import MAX_DEPTH, json_depth
from .shapes import InputPayload, Status, Turn, TurnText
from .state import StateDir
from .tree import canonical_json, sha256_hex

__all__ = ["CaptureReport", "capture_notes", "capture_record", "note_content_hash",
           "TURN_LIMIT_BYTES", "WINDOW_SOFT_BYTES"]

TURN_LIMIT_BYTES = 1024 * 1024
"""A single turn over this many bytes fails the capture closed."""
WINDOW_SOFT_BYTES = 96 * 1000
"""Record windows are cut at about this many bytes."""


@dataclass(frozen=True)
class CaptureReport:
    """What one capture did: the new input ids, how many notes were unchanged, and when."""

    source_id: str
    captured: tuple[str, ...]
    unchanged: int
    at: str
    skipped: tuple[tuple[str, str], ...] = ()
    """``(note name, reason)`` for each note that was refused."""


def note_content_hash(name: str, text: str) -> str:
    """The note's content hash: sha256 of the JSON ``{name, text}``."""
    return sha256_hex(canonical_json({"name": name, "text": text}))


def _record_failure(state: StateDir, source_id: str, error: Exception, at: float) -> None:
    def change(status: Status) -> None:
        status["lastCapture"] = {"status": "failed", "complete": False, "ignored": 0, "at": iso(at), "error": str(error)}

    state.update_status(source_id, change)


def capture_notes(state: StateDir, source_id: str, home: InstanceHome, *, at: float) -> CaptureReport:
    """Capture every new or changed note of ``home`` into ``source_id``'s inputs."""
    with state.capture_lock(source_id):
        try:
            notes, skipped = home.scan_notes()
        except CaptureError as exc:
            _record_failure(state, source_id, exc, at)
            raise
        known = set(state.status(source_id)["captured"]["notes"])
        fresh: list[tuple[str, str]] = []
        unchanged = 0
        for note in notes:
            content_hash = note_content_hash(note.name, note.text)
            if content_hash in known:
                unchanged += 1
                continue
            payload: InputPayload = {"version": 1, "kind": "note", "name": note.name, "contentHash": content_hash, "text": note.text}
            fresh.append((content_hash, state.write_input(source_id, payload)))
            known.add(content_hash)

        def change(status: Status) -> None:
            captured = status["captured"]
            for content_hash, input_id in fresh:
                if content_hash not in captured["notes"]:
                    captured["notes"].append(content_hash)
                if input_id not in captured["inputs"]:
                    captured["inputs"].append(input_id)
            status["skippedNotes"] = [{"name": name, "reason": reason} for name, reason in skipped]
            status["lastCapture"] = {"status": "partial" if skipped else "ok", "complete": not skipped,
                                     "ignored": unchanged, "at": iso(at), "skipped": status["skippedNotes"]}

        state.update_status(source_id, change)
    return CaptureReport(source_id, tuple(i for _, i in fresh), unchanged, iso(at), tuple(skipped))


def _turn_text(turn: dict[str, object], where: str) -> list[TurnText]:
    text = turn.get("text")
    if isinstance(text, str):
        role = turn.get("role", "assistant")
        if not isinstance(role, str):
            raise CaptureError(f"{where}: role must be a string")
        return [{"role": role, "text": text}]
    if isinstance(text, list) and all(isinstance(p, dict) and isinstance(p.get("role"), str)
                                      and isinstance(p.get("text"), str) for p in text):
        return [{"role": p["role"], "text": p["text"]} for p in text]
    raise CaptureError(f"{where}: text must be a string or a list of {{role, text}}")


def capture_record(state: StateDir, source_id: str, record: object, *, at: float) -> CaptureReport:
    """Capture the new turns of one run record; fails closed on any malformed or oversized turn."""
    with state.capture_lock(source_id):
        try:
            windows, thread, until = _plan_windows(state, source_id, record)
        except CaptureError as exc:
            _record_failure(state, source_id, exc, at)
            raise
        ids = [state.write_input(source_id, w) for w in windows]

        def change(status: Status) -> None:
            captured = status["captured"]
            for input_id in ids:
                if input_id not in captured["inputs"]:
                    captured["inputs"].append(input_id)
            if until is not None:
                captured["threads"][thread] = until
            status["lastCapture"] = {"status": "ok", "complete": True, "ignored": 0, "at": iso(at)}

        state.update_status(source_id, change)
    return CaptureReport(source_id, tuple(ids), 0, iso(at))


def _plan_windows(state: StateDir, source_id: str, record: object) -> tuple[list[InputPayload], str, str | None]:
    if not isinstance(record, dict):
        raise CaptureError("a run record must be a JSON object")
    if json_depth(record) > MAX_DEPTH:
        raise CaptureError(f"a run record may nest at most {MAX_DEPTH} levels; nothing was captured")
    problem = value_problem(record, "run record")
    if problem:
        thread_name = repair_text(record["thread"])[0] if isinstance(record.get("thread"), str) else "?"
        raise CaptureError(f"run record {thread_name}: {problem}; nothing was captured")
    thread = record.get("thread")
    turns = record.get("turns")
    if not isinstance(thread, str) or not thread:
        raise CaptureError("run record: thread must be a non-empty string")
    if not isinstance(turns, list):
        raise CaptureError(f"run record {thread}: turns must be a list")
    after = state.status(source_id)["captured"]["threads"].get(thread)
    normal: list[tuple[Turn, int]] = []
    seen: set[str] = set()
    for index, turn in enumerate(turns):
        where = f"run record {thread} turn {index}"
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str) or not turn["id"]:
            raise CaptureError(f"{where}: each turn needs a string id")
        turn_id: str = turn["id"]
        if turn["id"] in seen:
            raise CaptureError(f"{where}: duplicate turn id {turn['id']}")
        seen.add(turn["id"])
        parts = _turn_text(turn, where)
        size = sum(len(p["text"].encode("utf-8")) for p in parts)
        if size > TURN_LIMIT_BYTES:
            raise CaptureError(f"{where} ({turn['id']}) is {size} bytes, over the 1 MiB turn limit; "
                               "nothing was captured and nothing is truncated")
        normal.append(({"id": turn_id, "ts": str(turn.get("ts", "")), "thread": thread, "kind": "session",
                        "source": str(turn.get("source", "crouter")), "text": parts}, size))
    if after is not None:
        ids = [t["id"] for t, _ in normal]
        if after in ids:
            normal = normal[ids.index(after) + 1:]
    windows: list[InputPayload] = []
    current: list[Turn] = []
    size = 0
    previous = after
    for turn, turn_size in normal:
        if current and size + turn_size > WINDOW_SOFT_BYTES:
            windows.append(_window(thread, previous, current))
            previous, current, size = current[-1]["id"], [], 0
        current.append(turn)
        size += turn_size
    if current:
        windows.append(_window(thread, previous, current))
    until = normal[-1][0]["id"] if normal else after
    return windows, thread, until


def _window(thread: str, after: str | None, turns: list[Turn]) -> InputPayload:
    return {"version": 1, "kind": "record", "thread": thread, "after": after, "until": turns[-1]["id"], "turns": turns}
