"""Two things side by side, as one read model (``Comparison``: the two sides' names and the rows) that
the comparison screen draws as it is. Textual-free.

- Two runs (``compare_runs`` / ``diff_runs``): messages aligned as a text diff, events by type and
  order, time per turn, refusals and outcomes.
- A recording's expected observation after a step against what a replay saw (``diff_observations``):
  each run's status and event types by order (runs lined up by position, as a replay lines them up),
  grants, insight reviews and OKF judgments (only the judgments the recording observed are compared).

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

__all__ = ["Comparison", "DiffRow", "compare_runs", "diff_runs", "diff_observations", "message_texts", "ALIGN_MAX",
           "CONTEXT"]

ALIGN_MAX = 2_000
"""The most differing items a side that difflib aligns (past it, by position)."""
CONTEXT = 2
"""Rows kept either side of a folded stretch of alike rows."""


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One row of a comparison: its section, the two sides' text, and whether they differ."""

    section: str
    """``outcome``, ``messages``, ``events``, ``turns`` or ``refusals`` (two runs); ``step``, ``runs``,
    ``events``, ``grants``, ``insights`` or ``judgments`` (a recording's step against its replay)."""
    left: str
    right: str
    differs: bool


@dataclass(frozen=True, slots=True)
class Comparison:
    """What the comparison screen shows: side A's and side B's names, a line saying what is compared,
    and the rows (the first that differs is selected)."""

    left: str
    """Side A's name (plain text: the screen sanitises it)."""
    right: str
    """Side B's name."""
    rows: Sequence[DiffRow]
    note: str = ""
    """A line under the title (a replay's divergence in words), or nothing."""

    @property
    def differences(self) -> list[int]:
        """The indexes of the rows that differ, in order."""
        return [i for i, row in enumerate(self.rows) if row.differs]


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


def compare_runs(a: RunDetail, b: RunDetail, refusals: Sequence[RefusalRecord] = (), *,
                 left: str | None = None, right: str | None = None) -> Comparison:
    """Run ``a`` (side A) against run ``b``; ``refusals`` are the desk's, each side given those that
    concern it; ``left`` / ``right`` name the sides (default: the runs' ids)."""
    rows = diff_runs(a, b, [r for r in refusals if r.concerns(a.id, a.user_id, a.created_at)],
                     [r for r in refusals if r.concerns(b.id, b.user_id, b.created_at)])
    return Comparison(left or a.id, right or b.id, rows)


def _items(value: object) -> list[Mapping[str, object]]:
    return [_obj(item) for item in value] if isinstance(value, (list, tuple)) else []


def _run_line(run: Mapping[str, object]) -> str:
    deleted = " deleted" if run.get("deleted") else ""
    return f"{_text(run.get('id'))} of {_text(run.get('user'))}: {_text(run.get('status'))}{deleted}"


def _judgment_line(judgment: Mapping[str, object], inputs: Sequence[str]) -> str:
    return f"{_text(judgment.get('agent'))} on {', '.join(inputs)}: {_text(judgment.get('state'))}"


def _strs(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, (list, tuple)) else []


def _inputs(judgment: Mapping[str, object], aliases: Mapping[str, str] | None = None) -> list[str]:
    names = _strs(judgment.get("inputs"))
    if aliases:
        names = [f"record:{aliases.get(i[7:], i[7:])}" if i.startswith("record:") else i for i in names]
    return sorted(names)


def diff_observations(expected: Mapping[str, object], seen: Mapping[str, object],
                      aliases: Mapping[str, str] | None = None) -> list[DiffRow]:
    """A recorded observation (side A) against a replay's (side B), as ``observe.compare`` lines them
    up: runs by position (a run started on replay has another id: ``aliases`` maps recorded ids to
    replayed ones), each run's user, status and deletion, then its event types aligned; grants by
    person; insight reviews in order; each recorded judgment against the states the replay shows of
    the same agent and inputs (a judgment only the replay shows is listed, not a difference)."""
    rows: list[DiffRow] = []
    want_runs, got_runs = _items(expected.get("runs")), _items(seen.get("runs"))
    for k in range(max(len(want_runs), len(got_runs))):
        want = want_runs[k] if k < len(want_runs) else None
        got = got_runs[k] if k < len(got_runs) else None
        left = _run_line(want) if want is not None else "—"
        right = _run_line(got) if got is not None else "—"
        differs = want is None or got is None or any(
            (want.get(f) or False) != (got.get(f) or False) for f in ("user", "status", "deleted"))
        rows.append(DiffRow("runs", left, right, differs))
        rows += _aligned("events", _strs(want.get("events")) if want is not None else [],
                         _strs(got.get("events")) if got is not None else [])
    want_grants, got_grants = _obj(expected.get("grants")), _obj(seen.get("grants"))
    for user in sorted(set(want_grants) | set(got_grants)):
        a = f"{user}: {_text(want_grants.get(user)) if user in want_grants else '—'}"
        b = f"{user}: {_text(got_grants.get(user)) if user in got_grants else '—'}"
        rows.append(DiffRow("grants", a, b, want_grants.get(user) != got_grants.get(user)))
    rows += _aligned("insights", [": ".join(map(_text, r)) for r in _list(expected.get("insights"))],
                     [": ".join(map(_text, r)) for r in _list(seen.get("insights"))])
    want_judgments, got_judgments = expected.get("judgments"), seen.get("judgments")
    if want_judgments is not None or got_judgments is not None:
        rows += judgment_rows(_items(want_judgments), _items(got_judgments), aliases)
    return rows


def _list(value: object) -> list[list[object]]:
    return [list(item) for item in value if isinstance(item, (list, tuple))] if isinstance(value, (list, tuple)) else []


def judgment_rows(expected: Sequence[Mapping[str, object]], seen: Sequence[Mapping[str, object]],
                  aliases: Mapping[str, str] | None = None) -> list[DiffRow]:
    """Each expected judgment against the states ``seen`` shows of the same agent and inputs (it
    differs when its state is not among them); then the judgments only ``seen`` shows (not differences:
    the harvest judges on its own schedule)."""
    rows: list[DiffRow] = []
    matched: set[int] = set()
    for judgment in expected:
        live = _inputs(judgment, aliases)
        found = [k for k, j in enumerate(seen) if j.get("agent") == judgment.get("agent") and _inputs(j) == live]
        matched.update(found)
        states = [_text(seen[k].get("state")) for k in found]
        left = _judgment_line(judgment, _inputs(judgment))
        right = (f"{_text(judgment.get('agent'))} on {', '.join(live)}: {', '.join(states)}" if states
                 else "no such judgment")
        rows.append(DiffRow("judgments", left, right, _text(judgment.get("state")) not in states))
    rows += [DiffRow("judgments", "", _judgment_line(j, _inputs(j)), False)
             for k, j in enumerate(seen) if k not in matched]
    return rows
