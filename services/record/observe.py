"""What a step left behind, as a recording keeps it, and how two such observations differ.

A replay reads an observation through the control API (``GET /runs?events=1``, ``GET /people``); a
recorder reads the same from its desk (``BookObserver``: the book and the mirror an embedded and an
attached window share, only what changed since the last step), plus the workspace's insight reviews:

``{"runs": [{"id", "user", "status", "deleted", "events": [type, ...]}, ...],
"grants": {person: state}, "insights": [[title, status], ...],
"judgments": [{"agent", "inputs": ["note:<name>" | "record:<run id>", ...], "state"}, ...]}``

(the OKF judgments when the workspace has them: each named by what it judged, not by its random id).

Runs are listed in start order; the built-in judge's runs are left out (the harvest starts them on
its own schedule, not as a step of the session). ``compare`` lines a replay's observation up with the
recorded one run by run (a run started during the session has another id on replay: the recorded id
is mapped to the new one by position) and says the first difference.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..changes import Change, ChangeFeed, RunEvents
from ..desk import JUDGE_USER, ControlClient, RunBook, RunMirror, seq_of
from .format import Observation, ObservedJudgment, ObservedRun, fields

if TYPE_CHECKING:
    from ..knowledge.insights.reviews import InsightReview
    from ..knowledge.okf.models import JudgmentDetail, JudgmentItem

__all__ = ["observe", "BookObserver", "insight_states", "judgment_states", "judgment_inputs", "compare",
           "compare_judgments", "changes_between", "InsightSource", "JudgmentSource"]


class InsightSource(Protocol):
    """Where the insight reviews are read (``InsightReviews``)."""

    async def list(self, status: str | None = None) -> Sequence["InsightReview"]: ...

    async def get(self, review_id: str) -> "InsightReview": ...


class JudgmentSource(Protocol):
    """Where the OKF harvest judgments are read and decided (``Harvest``)."""

    async def queue(self, states: Sequence[str] | None = None) -> list["JudgmentItem"]: ...

    async def detail(self, judgment_id: str) -> "JudgmentDetail": ...

    async def approve(self, judgment_id: str, outcomes: Sequence[str] | None = None) -> "JudgmentItem": ...

    async def reject(self, judgment_id: str, reason: str) -> "JudgmentItem": ...


async def observe(control: ControlClient, insights: InsightSource | None = None,
                  okf: JudgmentSource | None = None) -> Observation:
    """The cloud's runs and grants, the insight reviews and the OKF judgments (when ``okf`` is given),
    now, read through the control API."""
    answer = await control.call("GET", "/runs", params={"events": "1"})
    people = await control.call("GET", "/people")
    runs = [(dto, dto.get("events") or []) for dto in answer.get("runs", [])]
    observed = _observation(runs, people.get("people", []), await insight_states(insights))
    if okf is not None:
        observed["judgments"] = await judgment_states(okf)
    return observed


def judgment_inputs(detail: "JudgmentDetail") -> list[str]:
    """A judgment's inputs as a recording names them (``note:<name>``, ``record:<run id>``), sorted."""
    return sorted({f"{o.input_kind}:{o.input_name}" for o in detail.outcomes if o.input_kind in ("note", "record")})


async def judgment_states(okf: JudgmentSource) -> list[ObservedJudgment]:
    """Every OKF judgment with outcomes, named by its agent and inputs, with its state; sorted."""
    seen: list[ObservedJudgment] = []
    for item in await okf.queue():
        inputs = judgment_inputs(await okf.detail(item.id))
        if inputs:  # a judgment with no readable outcome (judging, invalid) names nothing to decide
            seen.append({"agent": item.agent, "inputs": inputs, "state": item.state})
    return sorted(seen, key=lambda j: (j["agent"], j["inputs"], j["state"]))


RUN_CHANGES = frozenset({"run.event", "run.started", "run.deleted"})
"""The cloud's changes that name the one run they change."""
QUIET_CHANGES = frozenset({"grant.changed", "failure.armed"})
"""The cloud's changes that change no run."""


class BookObserver:
    """The same, read from a desk (its ``RunBook`` and its ``RunMirror``: the one protocol an embedded
    and an attached window share), each step reading only what changed. The desk's change feed names
    the runs that changed (``run.event``, ``run.started``, ``run.deleted``; an action names the run it
    touched, ``touched``): only those are read again, a run that grew reads only its new events
    (``RunMirror.since``, after the sequence number last read), and a run that is new, cut at its start
    or whose log went back is read whole (and named in ``rebuilt``). A change it cannot place (a reload,
    a kind it does not know, ``touched(None)``) makes the next read go over every run once. A run
    unchanged is the very object the last observation held, so what changed is told by identity."""

    def __init__(self, book: RunBook, mirror: RunMirror, changes: ChangeFeed | None = None,
                 read: Callable[[str, int], Awaitable[list[dict[str, Any]]]] | None = None) -> None:
        self.book = book
        self.mirror = mirror
        self.read = read
        """Where a run's events after a sequence number are read when the mirror does not hold them
        (``Desk.read_events``: a window attached to a server holds only the newest of each run)."""
        self.rebuilt: set[str] = set()
        """The runs read whole since the caller last cleared this (their events did not only grow)."""
        self._runs: dict[str, ObservedRun] = {}
        self._order: list[str] = []
        """The runs observed, in start order (the built-in judge's left out)."""
        self._marks: dict[str, tuple[int, object]] = {}
        """Run id -> the sequence number read up to, and the run's ``first_seq`` then."""
        self._lock = threading.Lock()  # changes may be published from any thread
        self._dirty: set[str] = set()
        self._whole = True
        """The next read goes over every run (nothing read yet, or a change that names no one run)."""
        self._unsubscribe = changes.subscribe(self._changed, many=self._changed_many) if changes is not None else None
        self._always = changes is None
        """Without a feed to name the runs that changed, every read goes over every run."""

    def close(self) -> None:
        """Stop following the desk's changes."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def touched(self, run_id: str | None) -> None:
        """An action touched this run (``""``: no run; None: it may have touched any): read it again next time."""
        with self._lock:
            if run_id is None:
                self._whole = True
            elif run_id:
                self._dirty.add(run_id)

    def _changed(self, change: Change) -> None:
        if change.source == "cloud" and change.kind in RUN_CHANGES:
            with self._lock:
                self._dirty.add(change.id)
        elif change.source == "cloud" and change.kind not in QUIET_CHANGES or change.kind == "attach.reloaded":
            self._whole = True

    def _changed_many(self, changes: Sequence[Change]) -> None:
        if isinstance(changes, RunEvents):
            if changes.source == "cloud":
                with self._lock:
                    self._dirty.add(changes.run_id)
            return
        for change in changes:
            self._changed(change)

    async def observe(self, reviews: list[list[str]]) -> Observation:
        """What the desk shows now; ``reviews`` are the insight reviews' ``[title, status]``."""
        return _observation_of(await self._current(), self.book.people(), reviews)

    async def _current(self) -> list[ObservedRun]:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            whole, self._whole = self._whole or self._always, False
        runs = self._runs
        if not whole:
            for run_id in dirty:
                dto = self.book.run_dto(run_id)
                if dto is None or run_id not in runs:
                    whole = dto is None or dto.get("user_id") != JUDGE_USER  # gone, or a new run: placed in order
                    if whole:
                        break
                    continue
                await self._read(run_id, dto)
        if whole:
            order: list[str] = []
            for dto in self.book.run_dtos():
                if dto.get("user_id") == JUDGE_USER:
                    continue
                run_id = str(dto["id"])
                await self._read(run_id, dto)
                order.append(run_id)
            self._order = order
        return [runs[run_id] for run_id in self._order]

    async def _events(self, run_id: str, after: int) -> Sequence[Mapping[str, object]]:
        """The run's events after ``after``: from the mirror when it holds them all, else read."""
        if self.read is None or self.mirror.covers(run_id, max(after, 0)):
            return self.mirror.since(run_id, after) if after >= 0 else self.mirror.events(run_id)
        return await self.read(run_id, max(after, 0))

    async def _read(self, run_id: str, dto: Mapping[str, object]) -> None:
        """One run as its DTO and the mirror show it now, reading only the events after those read."""
        runs, marks = self._runs, self._marks
        user, status, deleted = str(dto.get("user_id")), str(dto.get("status")), bool(dto.get("deleted"))
        seq, first = dto.get("seq"), dto.get("first_seq")
        old, (read, kept) = runs.get(run_id), marks.get(run_id, (-1, None))
        known = old is not None and isinstance(seq, int) and read >= 0 and first == kept
        if old is not None and known and seq == read:  # no new event (its status may have changed)
            if old["status"] != status or old["deleted"] != deleted or old["user"] != user:
                runs[run_id] = {**old, "user": user, "status": status, "deleted": deleted}
            return
        if old is not None and known and isinstance(seq, int) and seq > read:  # grew: only the new events are read
            new = await self._events(run_id, read)
            events = old["events"] + [str(e.get("type")) for e in new]
            top = seq_of(new[-1]) if new else read
        else:
            log = await self._events(run_id, -1)
            events = [str(e.get("type")) for e in log]
            top = seq_of(log[-1]) if log else 0
            self.rebuilt.add(run_id)
        runs[run_id] = {"id": run_id, "user": user, "status": status, "deleted": deleted, "events": events}
        marks[run_id] = (top, first)


async def insight_states(insights: InsightSource | None) -> list[list[str]]:
    """Every insight review's ``[title, status]``, sorted."""
    if insights is None:
        return []
    return sorted([r.proposal.title, r.status] for r in await insights.list())


def _observation(runs: Iterable[tuple[Mapping[str, object], Iterable[Mapping[str, object]]]],
                 people: Iterable[Mapping[str, object]], reviews: list[list[str]]) -> Observation:
    seen: list[ObservedRun] = []
    for dto, events in runs:
        if dto.get("user_id") == JUDGE_USER:
            continue
        seen.append({"id": str(dto["id"]), "user": str(dto.get("user_id")), "status": str(dto.get("status")),
                     "deleted": bool(dto.get("deleted")), "events": [str(e.get("type")) for e in events]})
    return _observation_of(seen, people, reviews)


def _observation_of(seen: list[ObservedRun], people: Iterable[Mapping[str, object]],
                    reviews: list[list[str]]) -> Observation:
    grants: dict[str, str | None] = {}
    for person in people:
        if person.get("id") == JUDGE_USER:
            continue
        grant = fields(person.get("grant"))
        grants[str(person["id"])] = str(grant.get("state")) if grant else None
    return {"runs": seen, "grants": grants, "insights": reviews}


def _aliases(expected: list[ObservedRun], seen: list[ObservedRun],
             aliases: dict[str, str]) -> None:
    for want, got in zip(expected, seen, strict=False):
        if want["id"] != got["id"]:
            aliases.setdefault(str(want["id"]), str(got["id"]))


def compare(expected: Observation, seen: Observation, aliases: dict[str, str]) -> str | None:
    """The first way ``seen`` differs from ``expected`` (a recorded observation), in words, or None.

    ``aliases`` (recorded run id -> replayed run id) grows with the runs lined up here."""
    want_runs, got_runs = list(expected.get("runs", [])), list(seen.get("runs", []))
    _aliases(want_runs, got_runs, aliases)
    for index, want in enumerate(want_runs):
        if index >= len(got_runs):
            return f"run {want['id']} ({want['user']}) was expected, and no such run was started"
        got = got_runs[index]
        name = want["id"]
        if want["user"] != got["user"]:
            return f"run {name}: expected a run of {want['user']}, seen one of {got['user']}"
        if want["status"] != got["status"]:
            return f"run {name}: status expected {want['status']}, seen {got['status']}"
        if bool(want.get("deleted")) != bool(got.get("deleted")):
            return f"run {name}: expected {'deleted' if want.get('deleted') else 'not deleted'}"
        want_events, got_events = list(want.get("events", [])), list(got.get("events", []))
        if want_events != got_events:
            at = next((i for i, (a, b) in enumerate(zip(want_events, got_events)) if a != b),
                      min(len(want_events), len(got_events)))
            expected_here = want_events[at] if at < len(want_events) else "no more events"
            seen_here = got_events[at] if at < len(got_events) else "no more events"
            return f"run {name}: event {at + 1} expected {expected_here}, seen {seen_here}"
    if len(got_runs) > len(want_runs):
        extra = got_runs[len(want_runs)]
        return f"run {extra['id']} ({extra['user']}) was started, and none was expected"
    want_grants, got_grants = dict(expected.get("grants", {})), dict(seen.get("grants", {}))
    for user in sorted(set(want_grants) | set(got_grants)):
        if want_grants.get(user) != got_grants.get(user):
            return f"grant of {user}: expected {want_grants.get(user)}, seen {got_grants.get(user)}"
    want_reviews, got_reviews = expected.get("insights"), seen.get("insights")
    if want_reviews is not None and got_reviews is not None and list(want_reviews) != list(got_reviews):
        for want_review, got_review in zip(want_reviews, got_reviews, strict=False):
            if list(want_review) != list(got_review):
                return f"insight review {want_review[0]!r}: expected {want_review[1]}, seen {got_review[1]}"
        return f"insight reviews: expected {len(want_reviews)}, seen {len(got_reviews)}"
    return compare_judgments(expected, seen, aliases)


def _live(inputs: Iterable[str], aliases: Mapping[str, str]) -> list[str]:
    """Recorded inputs in a replay's ids (a run record's run id mapped to the run it is here)."""
    return sorted(f"record:{aliases.get(i[7:], i[7:])}" if i.startswith("record:") else i for i in inputs)


def compare_judgments(expected: Observation, seen: Observation, aliases: Mapping[str, str]) -> str | None:
    """The first recorded judgment that ``seen`` does not show in the same state, in words, or None.

    Only judgments the recording observed are compared (the harvest judges on its own schedule: one
    seen earlier than it was recorded is not a difference); a recording without them compares none."""
    want, got = expected.get("judgments"), seen.get("judgments")
    if want is None or got is None:
        return None
    for judgment in want:
        inputs = _live(judgment["inputs"], aliases)
        states = [j["state"] for j in got if j["agent"] == judgment["agent"] and sorted(j["inputs"]) == inputs]
        if judgment["state"] not in states:
            return (f"judgment of {judgment['agent']} on {', '.join(judgment['inputs'])}: expected "
                    f"{judgment['state']}, seen {', '.join(states) or 'no such judgment'}")
    return None


def changes_between(before: Observation | None, after: Observation) -> Observation:
    """What ``after`` shows that ``before`` did not: the runs whose status or events changed (and
    new ones), the grants whose state changed and the insight reviews decided."""
    old_runs = {r["id"]: r for r in (before.get("runs", []) if before else [])}
    runs = [r for r in after.get("runs", []) if old_runs.get(r["id"]) != r]
    old_grants = before.get("grants", {}) if before else {}
    grants = {u: s for u, s in after.get("grants", {}).items() if old_grants.get(u, "?") != s}
    old_reviews = {tuple(r) for r in (before.get("insights", []) if before else [])}
    reviews = [r for r in after.get("insights", []) if tuple(r) not in old_reviews]
    changed: Observation = {"runs": runs, "grants": grants, "insights": reviews}
    if "judgments" in after:
        old_judgments = before.get("judgments", []) if before else []
        changed["judgments"] = [j for j in after["judgments"] if j not in old_judgments]
    return changed
