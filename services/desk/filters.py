"""The filter language every list's ``/`` takes: words, quoted phrases, ``field:value``, ``-`` to negate.

``status:waiting person:ada since:5m "bee"`` keeps the rows whose status has ``waiting``, whose person
has ``ada``, changed within five minutes and that mention ``bee``; ``-status:settled`` drops the settled
ones; ``kind:harvest state:pending`` lists the harvest judgments still to judge. Written once here,
Textual-free: each pane names its fields (``PANE_FIELDS``: what each field reads from the desk's read
models), ``compile_filter`` turns a typed filter into a ``Query`` (or a ``FilterError`` that names the
pane's fields), and ``Query.matches`` decides a row.

Matching is case-insensitive, and ``_`` / ``-`` count as spaces (``status:waiting_on_user`` and
``status:"waiting on user"`` are the same). Words and fields all have to match, except that one
field given more than once matches when any of its values does (``status:idle status:running``).
``since:`` takes a duration (``30s``, ``5m``, ``2h``, ``1d``, ``1w``, or ``1h30m``) counted back from
the injected clock's now.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ServiceError

__all__ = [
    "FilterError",
    "FilterField",
    "Term",
    "Query",
    "PANE_FIELDS",
    "JudgmentRow",
    "parse_filter",
    "compile_filter",
    "parse_duration",
    "fields_help",
]

Row = Any
"""A read model one pane lists (``RunView``, ``GrantView``, ``InboxEntryView``, ``ObjectSummary``, ``JudgmentRow``)."""

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""The units ``since:`` takes, in seconds."""
_DURATION = re.compile(r"(\d+)([smhdw])")
_FIELD = re.compile(r"([a-z]+):")
_FOLD = str.maketrans("_-", "  ")


class FilterError(ServiceError):
    """A filter that cannot be read (an unknown field, an unclosed quote, a bad duration); its text says
    what to type instead, and names the pane's fields."""


@dataclass(frozen=True, slots=True)
class FilterField:
    """One field a pane's filter takes: its name, what it matches, and how a row's value is read."""

    name: str
    help: str
    """What the field matches, in a few words (the help and the error list it)."""
    read: Callable[[Row], object]
    """The row's value: text (matched as a substring), or a time in seconds when ``time`` is set."""
    time: bool = False
    """The value is a time: the field takes a duration and keeps rows at most that old."""


@dataclass(frozen=True, slots=True)
class JudgmentRow:
    """A row of the judgments queue as the filter reads it: its key, its item and what it judges."""

    key: str
    """``okf:<judgment id>`` or ``insight:<review id>``."""
    kind: str
    """``harvest`` (a harvest judgment) or ``insight`` (an insight review)."""
    state: str
    agent: str
    """The harvest source's agent, or the review's proposer."""
    what: str
    """The notes or records judged, or the proposal (as the list shows it)."""
    created_at: float


@dataclass(frozen=True, slots=True)
class Term:
    """One term of a filter: a field's value (``field`` set) or a word or phrase, maybe negated."""

    field: str | None
    value: str
    negated: bool = False


def _fold(text: object) -> str:
    return str(text or "").lower().translate(_FOLD)


def _status(text: str) -> str:
    return text.replace("_", " ")


def _grant_refusal(g: Any) -> str:
    return g.refusal or g.revoked_code or ""


PANE_FIELDS: dict[str, tuple[FilterField, ...]] = {
    "runs": (
        FilterField("status", "the run's status (idle, running, waiting_on_user, settled, deleted)", lambda r: r.status),
        FilterField("person", "the person the run is for (user:ada)", lambda r: r.user_id),
        FilterField("name", "the run's name", lambda r: r.name),
        FilterField("prompt", "the run's prompt", lambda r: r.prompt),
        FilterField("activity", "what the run is doing now", lambda r: r.activity or ""),
        FilterField("outcome", "how a settled run ended (result, canceled, ...)", lambda r: r.outcome or ""),
        FilterField("id", "the run's id", lambda r: r.id),
        FilterField("since", "changed within a duration (5m, 2h, 1d)", lambda r: r.updated_at, time=True),
    ),
    "grants": (
        FilterField("person", "the person the grant is for", lambda g: g.user_id),
        FilterField("state", "active or revoked", lambda g: g.state),
        FilterField("scope", "one of the grant's scopes", lambda g: " ".join(g.scopes)),
        FilterField("refusal", "the refusal the grant answers with", _grant_refusal),
        FilterField("dependency", "a dependency's provider and state", lambda g: " ".join(f"{p}:{s}" for p, s, _ in g.dependencies)),
    ),
    "inbox": (
        FilterField("event", "the event's type (run.settled, message, ...)", lambda e: e.event_type),
        FilterField("actor", "who did it", lambda e: e.actor_id or ""),
        FilterField("object", "the object it concerns", lambda e: e.object_name),
        FilterField("kind", "event or message", lambda e: e.kind),
        FilterField("level", "the delivery level (L1, L2, ...)", lambda e: f"L{e.level}"),
        FilterField("state", "read or unread", lambda e: "read" if e.read else "unread"),
        FilterField("since", "arrived within a duration (5m, 2h, 1d)", lambda e: e.at, time=True),
    ),
    "judgments": (
        FilterField("kind", "harvest (a harvest judgment) or insight (an insight review)", lambda j: j.kind),
        FilterField("state", "pending, approved, rejected, ...", lambda j: j.state),
        FilterField("agent", "the harvest's agent or the review's proposer", lambda j: j.agent),
        FilterField("what", "the notes, records or proposal judged", lambda j: j.what),
        FilterField("id", "the judgment's or review's id", lambda j: j.key),
        FilterField("since", "created within a duration (5m, 2h, 1d)", lambda j: j.created_at, time=True),
    ),
    "canvas": (
        FilterField("type", "the object's type (node, document, user, ...)", lambda o: o.type),
        FilterField("kind", "the object's kind", lambda o: o.kind),
        FilterField("owner", "the owner's id", lambda o: o.owner_id or ""),
        FilterField("status", "the object's status", lambda o: o.status),
        FilterField("privacy", "the object's privacy", lambda o: o.privacy),
        FilterField("id", "the object's id", lambda o: o.id),
        FilterField("since", "changed within a duration (5m, 2h, 1d)", lambda o: o.updated_at, time=True),
    ),
}
"""Each pane's filter fields, in the order the help and the errors list them."""

WORDS: dict[str, Callable[[Row], str]] = {
    "runs": lambda r: f"{r.name} {r.prompt} {r.user_id} {r.id}",
    "grants": lambda g: f"{g.user_id} {' '.join(g.scopes)} {g.state}",
    "inbox": lambda e: f"{e.event_type} {e.summary} {e.object_name} {e.actor_id}",
    "judgments": lambda j: f"{j.what} {j.key}",
    "canvas": lambda o: o.label,
}
"""What a plain word or phrase is looked for in, per pane (what each list shows of a row)."""


def fields_help(pane: str) -> str:
    """The pane's fields in one line: ``status, person, name, ... since``."""
    return ", ".join(f.name for f in PANE_FIELDS[pane])


def parse_duration(text: str) -> float:
    """``5m`` → 300.0; ``1h30m`` → 5400.0. Raises ``FilterError`` for anything else."""
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += int(match.group(1)) * UNITS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise FilterError(f"since takes a duration like 30s, 5m, 2h, 1d or 1w, not {text!r}")
    return total


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """The phrase in quotes starting at ``text[start]`` (a ``"``), and the index after its closing quote."""
    end = text.find('"', start + 1)
    if end < 0:
        raise FilterError(f"a quote is not closed: {text[start:]!r} (close it with \")")
    return text[start + 1:end], end + 1


def parse_filter(text: str, pane: str) -> tuple[Term, ...]:
    """The terms of ``text`` for ``pane`` (one of ``PANE_FIELDS``). Raises ``FilterError`` naming the
    pane's fields for an unknown field, and for an unclosed quote or an empty value."""
    known = {f.name: f for f in PANE_FIELDS[pane]}
    terms: list[Term] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negated = text[i] == "-" and i + 1 < n and not text[i + 1].isspace()
        if negated:
            i += 1
        if text[i] == '"':
            phrase, i = _read_quoted(text, i)
            if phrase.strip():
                terms.append(Term(None, phrase, negated))
            continue
        field_match = _FIELD.match(text, i)
        if field_match:
            name = field_match.group(1)
            if name not in known:
                word = text[i:].split()[0]
                raise FilterError(f"{pane} has no field {name!r}; its fields are {fields_help(pane)} "
                                  f"(put \"{word}\" in quotes to look for the text)")
            i = field_match.end()
            if i < n and text[i] == '"':
                value, i = _read_quoted(text, i)
            else:
                end = i
                while end < n and not text[end].isspace():
                    end += 1
                value, i = text[i:end], end
            if not value.strip():
                raise FilterError(f"{name}: needs a value (e.g. {name}:{_example(known[name])})")
            if known[name].time:
                parse_duration(value.strip())
            terms.append(Term(name, value.strip(), negated))
            continue
        end = i
        while end < n and not text[end].isspace():
            end += 1
        terms.append(Term(None, text[i:end], negated))
        i = end
    return tuple(terms)


def _example(field: FilterField) -> str:
    return "5m" if field.time else "…"


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed filter for one pane: ``matches(row)`` decides a row; ``needle`` is what to highlight."""

    pane: str
    terms: tuple[Term, ...]
    now: float
    """The clock's time when the filter was compiled (``since:`` counts back from it)."""

    @property
    def empty(self) -> bool:
        """No terms: every row matches."""
        return not self.terms

    @property
    def needle(self) -> str:
        """The first word or phrase that is looked for (the lists highlight it), or ``""``."""
        return next((t.value for t in self.terms if t.field is None and not t.negated), "")

    def values(self, field: str) -> list[str]:
        """The values given to ``field`` without a ``-``."""
        return [t.value for t in self.terms if t.field == field and not t.negated]

    def matcher(self) -> Callable[[Row], bool]:
        """A predicate for rows, with every term's lowercased value and reader worked out once."""
        fields = {f.name: f for f in PANE_FIELDS[self.pane]}
        words = WORDS[self.pane]
        any_of: dict[str, list[Callable[[Row], bool]]] = {}
        every: list[Callable[[Row], bool]] = []
        for term in self.terms:
            test = self._test(term, fields, words)
            if term.field is not None and not term.negated:
                any_of.setdefault(term.field, []).append(test)
            elif term.negated:
                every.append(_negated(test))
            else:
                every.append(test)
        for tests in any_of.values():
            if len(tests) == 1:
                every.append(tests[0])
            else:
                every.append(_either(tuple(tests)))
        if not every:
            return lambda row: True
        if len(every) == 1:
            return every[0]
        checks = tuple(every)

        def match(row: Row) -> bool:
            for check in checks:
                if not check(row):
                    return False
            return True
        return match

    def _test(self, term: Term, fields: dict[str, FilterField], words: Callable[[Row], str]) -> Callable[[Row], bool]:
        if term.field is None:
            needle = _fold(term.value)
            if " " in needle:
                return lambda row: needle in _fold(words(row))
            return lambda row: needle in words(row).lower()
        field = fields[term.field]
        read = field.read
        if field.time:
            since = self.now - parse_duration(term.value)
            return lambda row: float(read(row) or 0.0) >= since  # type: ignore[arg-type]
        value = _fold(term.value)
        if " " in value:
            return lambda row: value in _fold(read(row))
        return lambda row: value in str(read(row) or "").lower()  # no separator in it: folding changes nothing

    def filter(self, rows: Sequence[Row]) -> list[Row]:
        """The rows that match, in their order."""
        if self.empty:
            return list(rows)
        match = self.matcher()
        return [row for row in rows if match(row)]


def _negated(test: Callable[[Row], bool]) -> Callable[[Row], bool]:
    return lambda row: not test(row)


def _either(tests: tuple[Callable[[Row], bool], ...]) -> Callable[[Row], bool]:
    return lambda row: any(test(row) for test in tests)


def compile_filter(text: str, pane: str, now: float) -> Query:
    """``text`` parsed for ``pane`` with ``now`` for ``since:``. Raises ``FilterError``."""
    if pane not in PANE_FIELDS:
        raise FilterError(f"no filter fields for {pane!r} (panes: {', '.join(PANE_FIELDS)})")
    return Query(pane, parse_filter(text, pane), now)
