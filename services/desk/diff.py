"""Two runs side by side: messages aligned as a text diff, events by type and order, time per turn,
refusals and outcomes. Textual-free: ``diff_runs`` answers rows the diff screen draws as they are.

Long stretches that are alike fold into one row (``… 120 alike``), so two runs of 10,000 events give a
few hundred rows. Alignment is ``difflib``'s, on what is left once the common start and end are cut;
past ``ALIGN_MAX`` differing items a side, the rest is paired by position (difflib's matcher grows with
the square of repetitive sequences, and event types repeat).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .models import RefusalRecord, RunDetail

__all__ = ["DiffRow", "diff_runs", "message_texts", "ALIGN_MAX", "CONTEXT"]

ALIGN_MAX = 2_000
"""The most differing items a side that difflib aligns (past it, by position)."""
CONTEXT = 2
"""Rows kept either side of a folded stretch of alike rows."""


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One row of a comparison: its section, the two sides' text, and whether they differ."""

    section: str
    """``outcome``, ``messages``, ``events``, ``turns`` or ``refusals``."""
    left: str
    right: str
    differs: bool


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _obj(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def message_texts(events: Sequence[Mapping[str, object]]) -> list[str]:
    """The conversation of a run as lines without times: turns' inputs, the model's text, the app's
    messages, questions, answers, failed turns and the settlement."""
    lines: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "node.turn.started":
            lines.append(f"» turn: {_text(_obj(event.get('input')).get('text') or '')}")
        elif kind == "node.output_text.done":
            lines.append(f"model: {_text(event.get('text'))}")
        elif kind == "node.message.received":
            lines.append(f"app → message: {_text(_obj(event.get('message')).get('text'))}")
        elif kind == "node.question.opened":
            lines.append(f"? question: {_text(_obj(event.get('question')).get('title'))}")
        elif kind == "node.question.answered":
            lines.append(f"! answered: {_text(event.get('answers'))}")
        elif kind == "node.turn.completed" and event.get("stop_reason") == "error":
            error = _obj(event.get("error"))
            lines.append(f"✗ turn failed: {_text(error.get('code'))}: {_text(error.get('message'))}")
        elif kind == "node.settled":
            lines.append(f"■ settled {_text(event.get('outcome'))}")
    return lines


def _turn_times(events: Sequence[Mapping[str, object]]) -> list[float | None]:
    """Seconds each turn took (start to completion), in order; None for a turn not completed."""
    times: list[float | None] = []
    started: float | None = None
    for event in events:
        kind, at = event.get("type"), event.get("at")
        if kind == "node.turn.started" and isinstance(at, (int, float)):
            started = float(at)
            times.append(None)
        elif kind == "node.turn.completed" and started is not None and isinstance(at, (int, float)) and times:
            times[-1] = float(at) - started
            started = None
    return times


def _aligned(section: str, left: Sequence[str], right: Sequence[str]) -> list[DiffRow]:
    """``left`` and ``right`` aligned (difflib on the middle once the common start and end are cut)."""
    start = 0
    limit = min(len(left), len(right))
    while start < limit and left[start] == right[start]:
        start += 1
    end = 0
    while end < limit - start and left[len(left) - 1 - end] == right[len(right) - 1 - end]:
        end += 1
    rows = [DiffRow(section, line, line, False) for line in left[:start]]
    mid_l, mid_r = left[start:len(left) - end], right[start:len(right) - end]
    if len(mid_l) <= ALIGN_MAX and len(mid_r) <= ALIGN_MAX:
        matcher = difflib.SequenceMatcher(None, mid_l, mid_r, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                rows.extend(DiffRow(section, line, line, False) for line in mid_l[i1:i2])
                continue
            a, b = mid_l[i1:i2], mid_r[j1:j2]
            for k in range(max(len(a), len(b))):
                rows.append(DiffRow(section, a[k] if k < len(a) else "", b[k] if k < len(b) else "", True))
    else:
        for k in range(max(len(mid_l), len(mid_r))):
            a = mid_l[k] if k < len(mid_l) else ""
            b = mid_r[k] if k < len(mid_r) else ""
            rows.append(DiffRow(section, a, b, a != b))
    rows.extend(DiffRow(section, line, line, False) for line in left[len(left) - end:] if end)
    return _folded(rows)


def _folded(rows: list[DiffRow]) -> list[DiffRow]:
    """Stretches of alike rows longer than twice ``CONTEXT`` + 1 fold into one ``… N alike`` row."""
    out: list[DiffRow] = []
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and not rows[j].differs:
            j += 1
        if j - i > 2 * CONTEXT + 1:
            out.extend(rows[i:i + CONTEXT])
            folded = f"… {j - i - 2 * CONTEXT} alike"
            out.append(DiffRow(rows[i].section, folded, folded, False))
            out.extend(rows[j - CONTEXT:j])
        else:
            out.extend(rows[i:j])
        if j < len(rows):
            out.append(rows[j])
        i = j + 1
    return out


def _side(a: object, b: object, section: str) -> DiffRow:
    left, right = _text(a), _text(b)
    return DiffRow(section, left, right, left != right)


def diff_runs(a: RunDetail, b: RunDetail, refusals_a: Sequence[RefusalRecord] = (),
              refusals_b: Sequence[RefusalRecord] = ()) -> list[DiffRow]:
    """The comparison of run ``a`` (left) with run ``b`` (right), section by section."""
    rows = [
        _side(f"status {a.status}", f"status {b.status}", "outcome"),
        _side(f"outcome {_obj(a.outcome).get('outcome') or '—'}", f"outcome {_obj(b.outcome).get('outcome') or '—'}",
              "outcome"),
        _side(f"{len(a.events)} events", f"{len(b.events)} events", "outcome"),
    ]
    rows += _aligned("messages", message_texts(a.events), message_texts(b.events))
    rows += _aligned("events", [str(e.get("type")) for e in a.events], [str(e.get("type")) for e in b.events])
    times_a, times_b = _turn_times(a.events), _turn_times(b.events)
    for k in range(max(len(times_a), len(times_b))):
        ta = times_a[k] if k < len(times_a) else None
        tb = times_b[k] if k < len(times_b) else None
        left = "—" if k >= len(times_a) else f"turn {k + 1}: " + ("not completed" if ta is None else f"{ta:.3f}s")
        right = "—" if k >= len(times_b) else f"turn {k + 1}: " + ("not completed" if tb is None else f"{tb:.3f}s")
        rows.append(DiffRow("turns", left, right, left != right))
    codes_a = [f"{r.code}: {r.message}" for r in refusals_a]
    codes_b = [f"{r.code}: {r.message}" for r in refusals_b]
    rows.append(_side(f"{len(codes_a)} refusals", f"{len(codes_b)} refusals", "refusals"))
    rows += _aligned("refusals", codes_a, codes_b)
    return rows
