"""The operator's desk: every action a person at the workbench takes on runs and grants, written once.

A ``Desk`` stands on two things that differ between an embedded window and one attached to a server:

- a ``ControlClient``: the control API (``services.served.control``), answered in this process
  (``InProcessControl``) or by the workspace's server over HTTP (``RemoteCloud``). Every action is
  one control call; what the cloud refuses comes back as the control API's error, in its own words.
- a ``RunBook``: where the desk reads runs and people as the control API's DTOs; an embedded cloud's
  own objects (``CloudBook``), or what an attached window has read from the server and keeps current
  from its change stream (``services.attached.desk.StreamBook``);
- a ``RunMirror``: the runs' events as read models, converted once, over the embedded cloud's own logs
  or fed the logs an attached window reads (its only copy of them).

Operator actions (reply as the model, fail a turn, settle, ask, go idle, emit, delete) drive the
run as the runtime would; app actions (start a run, send a message, cancel, fork) are made as the
app through the SDK with the person's connection; grant actions change the person's grant. Each is
logged per run, attributed to the operator or the app, and published as a ``workspace`` change.
Reads answer frozen read models (``models.py``), built by ``views.py`` from the DTOs.
"""

from __future__ import annotations

import uuid
from collections import deque
from operator import attrgetter
from contextvars import ContextVar
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

from ..changes import ChangeFeed
from ..clock import Clock
from ..errors import ServiceError
from ..text import value_problem
from ..wire import OUTCOMES, REFUSAL_CODES
from .models import GrantView, OperatorAction, OperatorError, RefusalRecord, RunDetail, RunView
from .book import RunBook
from .mirror import RunMirror, converted_all, seq_of
from .forks import Turn, fork_history, fork_name, turns_of
from .views import grant_view, live_runs_by_person, run_detail, run_view

__all__ = ["Desk", "ControlClient", "RunBook", "SETTLE_CHOICES", "OPERATOR", "event_fields", "sendable", "PAGE_EVENTS"]

PAGE_EVENTS = 5000
"""How many events one read of runs' logs from the cloud asks for (``GET /runs/{id}/events``, ``POST
/runs/events``)."""

_CREATED = attrgetter("created_at")
"""A run view's start time (the runs list's order, newest first)."""
RUN_PAGE = 2000
"""How many runs one page of ``Desk.run_pages`` holds."""
SETTLE_CHOICES = OUTCOMES
"""How the operator may settle a run: every ``services.wire.Outcome``."""
OPERATOR = "operator"
_STARTING = object()
"""``_ACTING`` while an app action makes a new run (a start or a fork): a refusal then concerns no run."""
_ACTING: ContextVar[object] = ContextVar("desk_acting_on", default=None)
"""The run id an app action is for while it runs, so a refusal met on the way is recorded against it."""


def coded(code: str, message: str) -> str:
    """An error as ``code: message``, or the message alone when it already names the code (``refresh
    refused: grant_revoked``, not ``grant_revoked: refresh refused: grant_revoked``)."""
    return message if code in message else f"{code}: {message}"
"""Who an operator action is attributed to (the app's are attributed to ``app``)."""


class ControlClient(Protocol):
    """The control API, in this process or over HTTP: one call, or ``ControlError`` (status, code, message)."""

    async def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any: ...


def event_fields(type: str, fields_json: str) -> tuple[str, dict[str, Any]]:
    """An operator's event as typed: its type (stripped) and its fields (a JSON object), or ``OperatorError``."""
    import json

    if not type.strip():
        raise OperatorError("an event needs a type")
    try:
        fields = json.loads(fields_json or "{}")
    except json.JSONDecodeError as exc:
        raise OperatorError(f"event fields are not valid JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise OperatorError("event fields must be a JSON object")
    return type.strip(), fields


def sendable(body: Mapping[str, Any]) -> None:
    """Refuse text no store can keep (a lone surrogate, NUL) before it is sent anywhere."""
    problem = value_problem(dict(body))
    if problem is not None:
        raise OperatorError(f"this cannot be sent: {problem}")


def _q(value: str) -> str:
    return quote(value, safe="")


class Desk:
    """Operator, app and grant actions over one cloud, and the read models the panes draw."""

    def __init__(self, control: ControlClient, book: RunBook, changes: ChangeFeed, *, clock: Clock,
                 mirror: RunMirror, refusals_recorded: bool = False) -> None:
        self.control = control
        """The control API this desk acts through."""
        self.book = book
        """Where this desk reads runs and people."""
        self.changes = changes
        self.clock = clock
        self.refusals_recorded = refusals_recorded
        """True when the app's SDK connection reports its own refusals (``record_refusal``), so an app
        action's refusal is not recorded twice."""
        self.actions: dict[str, list[OperatorAction]] = {}
        """What was done to each run, oldest first."""
        self.refusals: deque[RefusalRecord] = deque(maxlen=500)
        """The refusals the app met, oldest first."""
        self.origin = uuid.uuid4().hex[:12]
        """This window's tag (on idempotency keys, and on the changes an attached window relays)."""
        self.mirror = mirror
        """This window's runs' events as read models, converted once (the panes and the follower read them)."""
        self._views: dict[str, tuple[Mapping[str, Any], RunView]] = {}
        """Each run's list view, with the DTO it was made of: made again only when the book holds a
        new DTO for the run (a book that makes its DTOs afresh on each read is never answered from it)."""

    # -- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Begin following the cloud (a desk over an in-process cloud reads it live: nothing to do)."""

    async def stop(self) -> None:
        """Stop following the cloud."""
        self.mirror.close()

    async def caught_up(self) -> bool:
        """Wait until the book and the mirror show everything the cloud did before this call; True
        once they do (a desk over an in-process cloud reads it live: at once). A reader that must
        see what an action left behind (a recording's observation) calls it first."""
        return True

    def unread_runs(self) -> int:
        """How many runs the window does not hold (a window attached to a server over many runs holds
        the newest and reads an older one when something shows it); 0 when it holds every run."""
        return 0

    async def read_older_runs(self, count: int | None = None) -> int:
        """Read and hold the next older runs not held (``count``, or a page): the runs list scrolled
        past its end. How many were taken in (0: none remain)."""
        return 0

    def has_run(self, run_id: str) -> bool:
        """Whether the window holds the run (``view`` and ``detail`` answer it)."""
        return self.book.run_dto(run_id) is not None

    async def hold_run(self, run_id: str) -> bool:
        """Hold the run, reading it when the window does not (a jump to a run not listed yet); False
        when the cloud does not know it."""
        return self.has_run(run_id)

    def hold_runs(self, dtos: Sequence[Mapping[str, Any]], *, lent: bool = False) -> list[str]:
        """Hold the runs of ``dtos`` (a page of ``run_pages``) that something is about to show or carry;
        the ids of those taken in. ``lent``: for a reader that lets them go when done (``let_go``)."""
        return []

    def let_go(self, run_ids: Sequence[str]) -> None:
        """Let go of runs ``hold_runs(lent=True)`` took in, unless read for anything else since."""

    def release_runs(self, run_ids: Sequence[str]) -> None:
        """Let go of older runs ``hold_runs`` took in for a search that is over (a filter changed),
        unless a page of the runs list holds them."""

    async def run_pages(self, *, held: bool = True) -> AsyncGenerator[list[Mapping[str, Any]], None]:
        """Every run's DTO, a page at a time (deleted ones included; ``held=False``: only those the
        window does not hold): what a reader of every run (the follower's catch-up, the history's
        baseline, a filter over the runs not held) walks, the loop free between two pages, without
        the window holding them all."""
        if not held:
            return
        dtos = list(self.book.run_dtos())
        for start in range(0, len(dtos), RUN_PAGE):
            yield dtos[start:start + RUN_PAGE]

    # -- views -----------------------------------------------------------------------------

    def run_ids(self) -> list[str]:
        """The id of every run the window holds, deleted ones included, in the order the runs started
        (a window attached to a server over many runs holds the newest and what it showed since)."""
        return [str(dto["id"]) for dto in self.book.run_dtos()]

    def runs(self, *, include_deleted: bool = False) -> list[RunView]:
        """Every run the window holds (``run_ids``), newest first."""
        dtos = list(self.book.run_dtos())
        if not getattr(self.book, "keeps_dtos", False):
            views = [run_view(d) for d in dtos if include_deleted or not d.get("deleted")]
        else:  # ``_view_of`` inlined: a window over many runs lists each of them on every redraw
            cache = self._views
            views = []
            append = views.append
            for dto in dtos:
                if not include_deleted and dto.get("deleted"):
                    continue
                held = cache.get(dto["id"])
                if held is None or held[0] is not dto:
                    held = cache[dto["id"]] = (dto, run_view(dto))
                append(held[1])
            if len(cache) > len(dtos) + 64:  # runs the book no longer holds (a whole read again)
                kept = {d["id"] for d in dtos}
                self._views = {run_id: pair for run_id, pair in cache.items() if run_id in kept}
        views.sort(key=_CREATED, reverse=True)
        return views

    def _view_of(self, dto: Mapping[str, Any]) -> RunView:
        """``run_view(dto)``, kept while the book holds the same DTO object (it replaces a run's DTO
        when the run changes, never edits it in place)."""
        if not getattr(self.book, "keeps_dtos", False):
            return run_view(dto)
        run_id = dto["id"]
        held = self._views.get(run_id)
        if held is not None and held[0] is dto:
            return held[1]
        view = run_view(dto)
        self._views[run_id] = (dto, view)
        return view

    def detail(self, run_id: str, *, events: bool = True) -> RunDetail:
        """The run and its event log, as a frozen snapshot (``events=False``: without its log, for a
        caller that reads new events with ``events_since``). A window attached to a server answers the
        events its mirror holds (``holds`` says whether that is the whole log; ``read_detail`` reads it)."""
        return run_detail(self._dto(run_id), self.mirror.events(run_id) if events else ())

    async def read_events(self, run_id: str, after: int = 0, upto: int | None = None, *,
                          exclude: Collection[str] = ()) -> list[dict[str, Any]]:
        """The run's events with ``after < seq <= upto`` (``upto`` None: to the newest), as read models,
        oldest first, none of the types in ``exclude`` (a reader that needs no text deltas reads none):
        whatever a reader needs of a run, the whole log included. What the mirror holds is answered from
        it; the rest is read from the cloud a page at a time and not kept (a window holds only the
        newest events of the runs it shows; the server leaves out the excluded types as it reads).
        ``OperatorError`` for a run the cloud does not know."""
        from ..served.errors import ControlError

        mirror = self.mirror
        lo = mirror.held_from(run_id)
        if mirror.source is not None or (lo is not None and lo <= after):
            self._dto(run_id)
            events = mirror.since(run_id, after, exclude=exclude)
            return events if upto is None else [e for e in events if seq_of(e) <= upto]
        end = upto if lo is None or (upto is not None and upto <= lo) else lo  # the rest is held
        out: list[dict[str, Any]] = []
        while end is None or after < end:
            params: dict[str, Any] = {"after": after, "limit": PAGE_EVENTS}
            if end is not None:
                params["upto"] = end
            if exclude:
                params["exclude"] = ",".join(sorted(exclude))
            try:
                page = await self.control.call("GET", f"/runs/{_q(run_id)}/events", params=params)
            except ControlError as exc:
                raise OperatorError(exc.message or f"no run {run_id}") from None
            events = page.get("events") or []
            out.extend(converted_all(events))
            if not events or not page.get("more"):
                break
            after = seq_of(events[-1])
        if end is not None and end != upto:  # the newest part from the mirror (what the stream added too)
            top = max(seq_of(out[-1]) if out else after, end)
            out.extend(e for e in mirror.since(run_id, top, exclude=exclude) if upto is None or seq_of(e) <= upto)
        return out

    async def read_events_many(self, wanted: Mapping[str, int], *, exclude: Collection[str] = (),
                               clean: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Each wanted run's events after its sequence number (``read_events`` of each, to the newest,
        none of the types in ``exclude``), by run id; a run the cloud does not know is left out. What
        the mirror holds is answered from it; a window attached to a server reads the rest of every
        run together, several runs a request (``POST /runs/events``), not one round trip a run: a
        reader of many runs (a catch-up) waits on a few requests, not on one for each. ``clean``, when
        given, gets the runs whose events all came in answers whose text holds no escaped NUL or
        surrogate (``RemoteCloud.call(checked=True)``): every string of them is storable as it is."""
        from ..control_wire import MAX_RUNS_READ
        from ..served.errors import ControlError

        mirror = self.mirror
        found: dict[str, list[dict[str, Any]]] = {}
        if mirror.source is not None:  # a live log in this process: each run read from it, no round trip
            for run_id, after in wanted.items():
                try:
                    found[run_id] = await self.read_events(run_id, after, exclude=exclude)
                except OperatorError:
                    continue
            return found
        ends: dict[str, int] = {}
        """A run read from the cloud up to the oldest event its mirror holds: the rest is held."""
        asked: dict[str, dict[str, Any]] = {}
        for run_id, after in wanted.items():
            if self.book.run_dto(run_id) is None:
                continue
            lo = mirror.held_from(run_id)
            if lo is not None and lo <= after:
                found[run_id] = mirror.since(run_id, after, exclude=exclude)
                continue
            found[run_id] = []
            asked[run_id] = {"run_id": run_id, "after": after}
            if lo is not None:
                ends[run_id] = asked[run_id]["upto"] = lo
        kinds = sorted(exclude)
        checks = bool(getattr(self.control, "checks_text", False))  # a server's client: it tells a spotless answer
        spotless = set(asked) - ends.keys()  # read from the cloud alone, in answers with no suspect escape
        while asked:
            batch = list(asked.values())[:MAX_RUNS_READ]
            body = {"runs": batch, "exclude": kinds, "limit": PAGE_EVENTS}
            try:
                if checks:
                    answer, checked_clean = await self.control.call("POST", "/runs/events", body, checked=True)  # type: ignore[call-arg]
                else:
                    answer, checked_clean = await self.control.call("POST", "/runs/events", body), False
            except ControlError as exc:
                raise OperatorError(exc.message or "the runs' events could not be read") from None
            if not checked_clean:
                spotless.difference_update(str(item["run_id"]) for item in batch)
            moved = False
            for run_id in answer.get("missing") or ():
                found.pop(str(run_id), None)
                moved = asked.pop(str(run_id), None) is not None or moved
            for page in answer.get("runs") or ():
                run_id = str(page.get("run_id"))
                if run_id not in asked:
                    continue
                events = page.get("events") or []
                found[run_id].extend(converted_all(events))
                moved = moved or bool(events) or not page.get("more")
                if page.get("more"):
                    if events:
                        asked[run_id]["after"] = seq_of(events[-1])
                    continue
                del asked[run_id]
            if not moved:  # a server that answers neither events nor an end would be asked forever
                raise OperatorError("the cloud answered no events and no end for the runs asked")
        for run_id, end in ends.items():  # the newest part from the mirror (what the stream added too)
            if run_id in found:
                found[run_id].extend(mirror.since(run_id, end, exclude=exclude))
        if clean is not None:
            clean.update(run_id for run_id in spotless if run_id in found)
        return found

    async def read_detail(self, run_id: str) -> RunDetail:
        """The run and its whole event log (``read_events``): for a reader that needs all of it (a run's
        record, a turn's messages, a fork, a diff, a copy)."""
        events = await self.read_events(run_id)
        return run_detail(self._dto(run_id), tuple(events))

    async def hold_tail(self, run_id: str, count: int | None = None) -> None:
        """Have the mirror hold the run's newest ``count`` events (at most its ``tail``) so that
        ``detail`` and ``events_since`` answer them at once: a pane showing a run calls it first. A
        window over an in-process cloud reads the live log: nothing to read."""
        mirror = self.mirror
        if mirror.source is not None:
            return
        dto = self._dto(run_id)
        count = min(count or mirror.tail, mirror.tail)
        top = int(dto.get("seq") or 0)
        after = max(self.log_floor(run_id), top - count)
        lo = mirror.held_from(run_id)
        if lo is not None and lo <= after:
            return
        events = await self.read_events(run_id, after)
        mirror.hold(run_id, events, lo=after)

    def log_floor(self, run_id: str) -> int:
        """The run's events start after this sequence number (its first kept event's, less one)."""
        dto = self.book.run_dto(run_id) or {}
        first = dto.get("first_seq")
        return max(0, int(first) - 1) if isinstance(first, int) else 0

    def holds(self, run_id: str, count: int | None = None) -> bool:
        """Whether ``detail`` answers the run's whole log, or at least its newest ``count`` events."""
        lo = self.mirror.held_from(run_id)
        if lo is None:
            return False
        dto = self.book.run_dto(run_id) or {}
        if lo <= self.log_floor(run_id):
            return True
        return count is not None and int(dto.get("seq") or 0) - lo >= count

    def view(self, run_id: str) -> RunView:
        """One run as the runs pane lists it (``OperatorError`` when unknown)."""
        return self._view_of(self._dto(run_id))

    def events_since(self, run_id: str, seq: int) -> list[dict[str, Any]]:
        """The run's events after ``seq``, as read models (only those are read: what a pane applies)."""
        return self.mirror.since(run_id, seq)

    def grants(self) -> list[GrantView]:
        """Every known person's grant, by person id."""
        counts = self.runs_by_person()
        views = (grant_view(p, counts.get(p["id"], 0)) for p in sorted(self.book.people(), key=lambda p: p["id"]))
        return [v for v in views if v is not None]

    def runs_by_person(self) -> dict[str, int]:
        """How many runs each person has that are not deleted (what a grant's line counts)."""
        return live_runs_by_person(self.book.run_dtos())

    def log(self, run_id: str) -> list[OperatorAction]:
        """The actions taken on a run, oldest first."""
        return list(self.actions.get(run_id, []))

    def refusals_since(self, seconds: float = 60.0) -> list[RefusalRecord]:
        """Refusals the app met in the last ``seconds``."""
        cutoff = self.clock.time() - seconds
        return [r for r in self.refusals if r.at >= cutoff]

    def waiting_on_user(self) -> int:
        """How many runs wait on their person (an open question)."""
        return sum(1 for d in self.book.run_dtos() if not d.get("deleted") and d["status"] == "waiting_on_user")

    # -- operator actions (as the model / the runtime) ---------------------------------------

    async def reply(self, run_id: str, text: str, *, chunks: int = 4) -> None:
        """Reply as the model: one root turn delivering every pending message."""
        await self._act(run_id, "reply", {"text": text, "chunks": chunks})
        self._note(run_id, "reply", text)

    async def fail_turn(self, run_id: str, code: str, message: str) -> None:
        """Fail a turn with ``model_error`` or ``content_refused``."""
        await self._act(run_id, "fail_turn", {"code": code, "message": message})
        self._note(run_id, "fail turn", f"{code}: {message}")

    async def settle(self, run_id: str, kind: str, value: str = "") -> None:
        """Settle: ``result``, ``declined``, ``canceled``, ``deadline_exceeded`` or ``runtime_error``."""
        self._live(run_id)
        if kind not in SETTLE_CHOICES:
            raise OperatorError(f"settle takes one of {', '.join(SETTLE_CHOICES)}, not {kind!r}")
        if self._dto(run_id)["status"] == "settled":
            raise OperatorError(f"run {run_id} is already settled")
        if kind == "result":
            body: dict[str, Any] = {"result": value}
        elif kind == "declined":
            body = {"declined": {"reason": value or "declined by the operator", "code": "declined", "retryable": False}}
        elif kind == "runtime_error":
            body = {"runtime_error": value or "runtime error injected by the operator"}
        else:
            body = {"failure": kind}
        await self._act(run_id, "settle", body)
        self._note(run_id, "settle", f"{kind}{': ' + value if value else ''}")

    async def ask(self, run_id: str, title: str) -> str:
        """Open a question to the run's person; returns its id."""
        self._live(run_id)
        if not title.strip():
            raise OperatorError("a question needs its text: type the question to ask")
        answer = await self._act(run_id, "ask", {"title": title})
        self._note(run_id, "ask", title)
        return str(answer["question_id"])

    async def go_idle(self, run_id: str) -> None:
        """Stop without submitting: the run goes idle."""
        await self._act(run_id, "idle", {})
        self._note(run_id, "idle", "")

    async def append_event(self, run_id: str, type: str, fields_json: str = "{}", node_id: str | None = None) -> None:
        """Append any event to a run; ``fields_json`` is a JSON object of its fields."""
        self._live(run_id)
        type, fields = event_fields(type, fields_json)
        await self._act(run_id, "emit", {"type": type, "fields": fields, "node_id": node_id or None})
        self._note(run_id, "emit", type + (f" on {node_id}" if node_id else ""))

    async def delete_run(self, run_id: str) -> None:
        """Delete as the runtime would: reads 404, streams close."""
        if self._dto(run_id).get("deleted"):
            raise OperatorError(f"run {run_id} is already deleted")
        await self._act(run_id, "delete", {})
        self._note(run_id, "delete", "")

    # -- app actions (as the app, through the SDK) ---------------------------------------------

    async def start_run(self, user_id: str, prompt: str) -> str:
        """Start a run as the app; returns its id."""
        answer = await self._app(user_id, f"/people/{_q(user_id)}/runs", {"prompt": prompt})
        self.book.absorb_run(answer["run"])
        self._note(answer["run_id"], "start", prompt, by="app")
        return str(answer["run_id"])

    async def send_message(self, run_id: str, text: str, *, start_turn: bool = True) -> None:
        """Send a message to a run as the app."""
        answer = await self._app(await self._owner(run_id), f"/runs/{_q(run_id)}/message",
                                 {"text": text, "start_turn": start_turn}, run_id=run_id)
        self.book.absorb_run(answer["run"])
        self._note(run_id, "message", text, by="app")

    async def cancel_run(self, run_id: str) -> None:
        """Cancel a run as the app."""
        answer = await self._app(await self._owner(run_id), f"/runs/{_q(run_id)}/cancel", {}, key=False, run_id=run_id)
        self.book.absorb_run(answer["run"])
        self._note(run_id, "cancel", "", by="app")

    async def fork(self, parent_id: str, messages: list[dict[str, Any]]) -> str:
        """A child run carrying ``messages`` (the parent's conversation up to the fork point), as the app
        (a memory conversation's fork: ``MemoryOutbox.fork``)."""
        parent = self._dto(parent_id)
        last_user = next((m.get("text", "") for m in reversed(messages) if m.get("role") == "user"), "")
        return await self._fork(parent_id, {"prompt": last_user, "name": f"fork of {parent.get('name') or parent_id}",
                                            "forked_from": parent_id, "history": messages}, f"from {parent_id}")

    def turns(self, run_id: str) -> list[Turn]:
        """The run's root turns, oldest first (what a fork may start from), from what the mirror holds
        (``read_turns``: from the whole log, wherever it is)."""
        return turns_of(run_id, self.mirror.events(run_id))

    async def read_turns(self, run_id: str) -> list[Turn]:
        """The run's root turns, oldest first, read from its whole log (``read_events``)."""
        return turns_of(run_id, await self.read_events(run_id))

    async def fork_at(self, parent_id: str, turn: int, text: str | None = None) -> str:
        """Fork the run at ``turn``, as the app: a new run whose messages are the parent's up to that
        turn, the last one ``text`` when given (the operator's edit), which is also its prompt. The
        new run is named for its parent and turn and carries ``forked_from`` and ``forked_at_turn``."""
        parent = self._live(parent_id)
        history = fork_history(parent_id, await self.read_events(parent_id), turn, text)
        name = fork_name(parent.get("name"), (parent.get("params") or {}).get("prompt"), parent_id, turn)
        body = {"prompt": history[-1]["text"], "name": name, "forked_from": parent_id, "forked_at_turn": turn,
                "history": history}
        child = await self._fork(parent_id, body, f"from {parent_id} at turn {turn}")
        self._note(parent_id, "forked", f"{child} at turn {turn}", by="app")
        return child

    async def _fork(self, parent_id: str, body: dict[str, Any], detail: str) -> str:
        """Start the fork ``body`` describes as the parent's person, through the app's start call."""
        user_id = await self._owner(parent_id)
        answer = await self._app(user_id, f"/people/{_q(user_id)}/runs", body)
        self.book.absorb_run(answer["run"])
        self._note(answer["run_id"], "fork", detail, by="app")
        return str(answer["run_id"])

    # -- grant actions ---------------------------------------------------------------------

    async def revoke(self, user_id: str, code: str = "grant_revoked") -> None:
        """Revoke the person's grant with a refusal code."""
        await self._person(user_id, "grant/revoke", {"code": code})
        self._note_user(user_id, "revoke", code)

    async def restore(self, user_id: str) -> None:
        """Reactivate the grant, clear any refusal and reconnect the app (a new sign-in)."""
        state = (self.book.person(user_id) or {}).get("grant") or {}
        await self._person(user_id, "reconnect", {"scopes": list(state.get("resolved_scopes") or []),
                                                  "dependencies": list(state.get("dependencies") or [])})
        self._note_user(user_id, "restore", "")

    async def refuse(self, user_id: str, code: str) -> None:
        """Refuse the person's next refreshes with ``code``."""
        await self._person(user_id, "refuse", {"code": code})
        self._note_user(user_id, "refuse", code)

    async def expire_tokens(self, user_id: str) -> None:
        """Expire every access token the person holds."""
        await self._person(user_id, "expire_tokens", {})
        self._note_user(user_id, "expire tokens", "")

    async def set_scopes(self, user_id: str, scopes: list[str]) -> None:
        """Set the grant's resolved scopes (each ``<provider>:<group>``)."""
        cleaned = [s.strip() for s in scopes if s.strip()]
        bad = [s for s in cleaned if ":" not in s or " " in s]
        if bad:
            raise OperatorError(f"scopes look like <provider>:<group>; not {', '.join(bad)}")
        await self._person(user_id, "grant/set", {"resolved_scopes": cleaned})
        self._note_user(user_id, "set scopes", " ".join(cleaned))

    # -- refusals --------------------------------------------------------------------------

    def record_refusal(self, user_id: str, code: str, message: str) -> None:
        """Remember a refusal the app met, with the grant revision that caused it."""
        grant = (self.book.person(user_id) or {}).get("grant") or {}
        acting = _ACTING.get()
        record = RefusalRecord(user_id, code, message, grant.get("rev"), self.clock.time(),
                               run_id=acting if isinstance(acting, str) else None, start=acting is _STARTING)
        self.refusals.append(record)
        self.changes.announce("workspace", "refusal", record.user_id, code=record.code)

    # -- internals -------------------------------------------------------------------------

    def _dto(self, run_id: str) -> Mapping[str, Any]:
        dto = self.book.run_dto(run_id)
        if dto is None:
            raise OperatorError(f"no run {run_id}")
        return dto

    def _live(self, run_id: str) -> Mapping[str, Any]:
        dto = self._dto(run_id)
        if dto.get("deleted"):
            raise OperatorError(f"run {run_id} was deleted")
        return dto

    async def _owner(self, run_id: str) -> str:
        """The run's person (a run another window started a moment ago is read from the cloud)."""
        dto = self.book.run_dto(run_id)
        if dto is None:
            try:
                found = await self.control.call("GET", f"/runs/{_q(run_id)}", params={"events": "0"})
            except ServiceError as exc:
                raise OperatorError(getattr(exc, "message", "") or f"no run {run_id}") from None
            self.book.absorb_run(found)
            return str(found["user_id"])
        return str(dto["user_id"])

    def unavailable(self) -> str | None:
        """Why the cloud cannot be reached now (None while it can: always, in this process)."""
        return None

    def _reachable(self) -> None:
        reason = self.unavailable()
        if reason is not None:
            raise OperatorError(reason)

    async def _call(self, method: str, path: str, body: dict[str, Any]) -> Any:
        from ..served.errors import ControlError

        self._reachable()
        sendable(body)
        try:
            return await self.control.call(method, path, body)
        except ControlError as exc:
            raise OperatorError(exc.message or f"{exc.status} {exc.code}") from None

    async def _act(self, run_id: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        dto = self._dto(run_id)
        if dto.get("deleted") and action != "delete":
            raise OperatorError(f"run {run_id} was deleted")
        answer: dict[str, Any] = await self._call("POST", f"/runs/{_q(run_id)}/{action}", body)
        self.book.absorb_run(answer["run"])
        return answer

    async def _person(self, user_id: str, path: str, body: dict[str, Any]) -> None:
        if (self.book.person(user_id) or {}).get("grant") is None:
            raise OperatorError(f"{user_id} has no grant")
        await self._call("POST", f"/people/{_q(user_id)}/{path}", body)
        await self.book.refresh_people()

    async def _app(self, user_id: str, path: str, body: dict[str, Any], *, key: bool = True,
                   run_id: str | None = None) -> dict[str, Any]:
        """One app action on ``run_id`` (None: a start or a fork, which makes a run). A call that got no
        answer is sent once more with the same idempotency key, so the cloud does it at most once. A
        refusal met on the way is recorded against that run (``_ACTING``), never another of the person's."""
        token = _ACTING.set(run_id if run_id is not None else _STARTING)
        try:
            return await self._app_call(user_id, path, body, key=key)
        finally:
            _ACTING.reset(token)

    async def _app_call(self, user_id: str, path: str, body: dict[str, Any], *, key: bool) -> dict[str, Any]:
        from ..served.errors import ControlError

        self._reachable()
        sendable(body)
        if key:
            body = {**body, "idempotency_key": f"wb-{self.origin}-{uuid.uuid4().hex}"}
        for attempt in (1, 2):
            try:
                answer: dict[str, Any] = await self.control.call("POST", path, body)
                return answer
            except ControlError as exc:
                if exc.code == "unreachable" and key and attempt == 1:
                    continue
                if exc.code in REFUSAL_CODES and not self.refusals_recorded:
                    self.record_refusal(user_id, exc.code, exc.message)
                raise OperatorError(coded(exc.code, exc.message) if exc.message else f"{exc.status} {exc.code}") from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _note(self, run_id: str, action: str, detail: str, *, by: str = OPERATOR) -> None:
        entry = OperatorAction(run_id, action, detail, by, self.clock.time())
        self.actions.setdefault(run_id, []).append(entry)
        self.changes.announce("workspace", "operator.action", run_id, action=action, by=by)

    def _note_user(self, user_id: str, action: str, detail: str) -> None:
        for dto in list(self.book.run_dtos()):
            if dto["user_id"] == user_id and not dto.get("deleted"):
                self._note(dto["id"], f"grant {action}", f"{user_id} {detail}".strip())
        self.changes.announce("workspace", "grant.action", user_id, action=action)
