"""The control API of a served cloud: what only a fake can do, under ``CONTROL_PREFIX``.

Every call needs ``Authorization: Bearer <token>`` (the token in ``serve.json``), compared in
constant time; a missing or wrong token gets 401 ``unauthorized`` (the wire's envelope, nothing more). Bodies and answers are JSON;
a refused call answers ``{"error": {"code", "message"}}`` with 400 (bad input), 404 (unknown
person, run or gate) or the cloud's own status (e.g. 404 ``run_not_found`` for a deleted run).

Routes (all under ``/_workbench/v1``):

- ``GET /people``; ``GET /people/{user}``; ``POST /people/{user}/connect`` ``{scopes?,
  dependencies?}`` answers the connection an app stores (plus ``issuer`` and ``client_id``);
  ``POST /people/{user}/grant/{revoke|restore|set|setup|sync}`` (``{code}``, ``{patch}``, the
  keyword arguments of ``FakeGrant.set`` / ``setup``); ``POST /people/{user}/refuse`` ``{code}``;
  ``POST /people/{user}/expire_tokens``; ``POST /people/{user}/memory`` (``FakeMemory.put``'s
  arguments); ``DELETE /people/{user}/memory/{name}``
- ``GET /runs`` (``?user=``, ``?events=1`` to include each run's events); ``GET /runs/{run_id}``
  (with its events; ``?events=0`` without); ``POST /runs/{run_id}/{action}`` where the
  action is one of ``RUN_ACTIONS`` and the body its keyword arguments (``emit`` also takes
  ``events: [{type, fields, node_id}]`` to append many in one call)
- app actions, made as the app through the SDK (``app_actions.py``): ``POST /people/{user}/runs``,
  ``POST /runs/{run_id}/message``, ``POST /runs/{run_id}/cancel``, ``POST /people/{user}/reconnect``
- ``POST /fail_next`` ``{op, answer, user?, times?}`` (``answer``: a status, ``"unreachable"``
  or ``{status, code, message, ...}``) answers ``{id}``; ``POST /gates`` ``{op, user?}`` answers
  ``{id}``; ``POST /gates/{id}/release``; ``DELETE /failures/{id}`` removes a scripted failure
- ``POST /reset``; ``GET /state`` (the whole state, ``state.export_state``); ``PUT /state``
  (replace it); ``GET /changes``: the cloud's change feed as server-sent events
  (``id: <epoch>-<n>``, ``event: <kind>``, ``data: {source, kind, id, data}``; a ``Last-Event-ID``
  header resumes after that change, or answers ``event: reset``: ``change_log.py``);
  ``POST /changes`` ``{source, kind, id, data}`` publishes a window's own change there (any
  source but ``cloud``), and ``{changes: [{source, kind, id, data}, ...]}`` a batch of them in
  order (at most ``MAX_CHANGES``; one malformed change refuses the whole batch, naming it)

``GET /runs``, ``GET /runs/{run_id}`` and ``GET /state`` may be large (a window attaching reads every
run with every event): they are written a run, or a slice of a run's events, at a time, the loop
running between two chunks, so that no other client waits for one of them (``chunked.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import itertools
import json
import json.encoder
import operator
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from ..control_wire import GRANT_ACTIONS, RUN_ACTIONS, ConnectionJSON, body_problem, match_control
from .app_actions import AppActions
from .asgi import CONTROL_PREFIX, Receive, Scope, Send, read_body, send_envelope, storage_full, until_disconnect
from .change_log import ChangeLog
from ..changes import Change
from .chunked import chunks, run_answer, runs_answer, state_answer
from ..cloud.errors import CloudError, envelope
from ..cloud.state import CloudStateError, export_state, import_state
from .dtos import person_dto, run_dto
from .errors import ControlError

if TYPE_CHECKING:
    from .asgi import CloudApp
    from ..cloud.cloud import FakeCloud
    from ..cloud.failures import Gate
    from ..cloud.runs import FakeRun
    from ..cloud.users import FakeUser
    from .persist import CloudStore

__all__ = ["ControlApp", "RUN_ACTIONS", "GRANT_ACTIONS", "connection_json"]



Answer = dict[str, object]
"""A control call's JSON answer (an object; ``json.dumps`` takes any of its values)."""
Handler = Callable[..., Awaitable[Answer]]


class ControlApp:
    """The ASGI app behind ``CONTROL_PREFIX`` for one cloud."""

    def __init__(self, cloud: "FakeCloud", token: str, *, store: "CloudStore | None" = None,
                 change_log: bool = True) -> None:
        self.cloud = cloud
        self._token = token.encode()
        self.store = store
        self.app: "CloudApp | None" = None
        """The serving app (for its streaming); set by whoever serves."""
        self._removers: dict[str, Callable[[], None]] = {}
        self._gates: dict[str, Gate] = {}
        self._ids = itertools.count(1)
        self.app_actions = AppActions(cloud)
        """Start, message and cancel as the app (``app_actions.py``)."""
        self.change_log = ChangeLog(cloud.changes) if change_log else None
        """Recent changes by id, for a change stream resumed with ``Last-Event-ID`` (None in a process
        that answers control calls only for itself: its desk in an embedded window)."""
        self._handlers: dict[str, Handler] = {
            "people.list": self._people,
            "people.get": self._person,
            "people.connect": self._connect,
            "people.grant": self._grant,
            "people.refuse": self._refuse,
            "people.expire_tokens": self._expire,
            "people.memory.put": self._memory_put,
            "people.memory.remove": self._memory_remove,
            "people.start_run": self.app_actions.start_run,
            "people.reconnect": self.app_actions.reconnect,
            "runs.list": self._runs,
            "runs.get": self._run,
            "runs.events": self._run_events,
            "runs.events_many": self._runs_events,
            "runs.message": self.app_actions.message,
            "runs.cancel": self.app_actions.cancel,
            "runs.action": self._run_action,
            "failures.fail_next": self._fail_next,
            "failures.gate": self._gate,
            "failures.release": self._release,
            "failures.remove": self._remove_failure,
            "state.reset": self._reset,
            "state.export": self._export,
            "state.import": self._import,
            "changes.publish": self._publish,
        }
        """One handler per declared control call (``services.control_wire.CONTROL_ROUTES``)."""

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._authorized(scope):
            await send_envelope(send, envelope(401, "unauthorized", "the control API needs the token in serve.json"))
            return
        method = scope["method"]
        path = scope.get("path", "")[len(CONTROL_PREFIX):] or "/"
        if method == "GET" and path == "/changes":
            await self._changes(scope, receive, send)
            return
        raw = await read_body(receive)
        query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
        pieces = self._large_read(path, query) if method == "GET" and not raw else None
        if pieces is not None:
            await self._stream(pieces, receive, send)
            return
        try:
            if method != "GET" and self.store is not None and self.store.broken:
                await self.store.flush()  # refuse a change before making it while nothing can be written
        except OSError as exc:
            await send_envelope(send, storage_full(exc))
            return
        marked = _ENCODED.set(True)  # this answer goes out as JSON text: stored events need no parse
        try:
            status, answer = await self.dispatch(method, path, raw, query)
        finally:
            _ENCODED.reset(marked)
        if self.store is not None:
            try:
                await self.store.flush()
            except OSError as exc:
                if method != "GET":  # a read promises nothing new: it is answered from memory
                    await send_envelope(send, storage_full(exc))
                    return
        await _send(send, status, _encode(answer).encode())

    def _large_read(self, path: str, query: dict[str, str]) -> Iterator[str] | None:
        """The answer to a read that may be large (``GET /runs``, ``GET /runs/{id}``, ``GET /state``)
        as pieces of JSON encoded as they are asked for (``chunked.py``); None for any other call, and
        for one ``dispatch`` refuses (an unknown run), which it answers as usual."""
        matched = match_control("GET", path)
        if matched is None:
            return None
        route, params = matched
        if route.name == "runs.list":
            try:
                return self._runs_answer(query)
            except ControlError:  # a page asked wrongly: answered (refused) as usual
                return None
        if route.name == "runs.get":
            run = self.cloud.state.runs.peek(params["run_id"])
            return None if run is None else run_answer(run, events=query.get("events") not in ("0", "false"))
        if route.name == "state.export":
            return state_answer(self.cloud)
        return None

    async def _stream(self, pieces: Iterator[str], receive: Receive, send: Send) -> None:
        """Send a large answer a chunk at a time, letting the loop run between two chunks (every other
        client is answered meanwhile); stop when the client goes away."""
        if self.store is not None:
            with contextlib.suppress(OSError):  # a read promises nothing new: it is answered from memory
                await self.store.flush()
        gone = asyncio.ensure_future(until_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            for chunk in chunks(pieces):
                if gone.done():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()

    def _authorized(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer":
            token = b""
        return hmac.compare_digest(token.strip(), self._token) and bool(self._token)

    async def dispatch(self, method: str, path: str, raw: bytes, query: dict[str, str]) -> tuple[int, Any]:  # Any: services/desk/embedded.py reads the error envelope from it untyped
        """Answer one control call: ``(status, JSON answer)``."""
        try:
            try:
                body, text_bound = _parse_body(raw) if raw else ({}, None)
            except (ValueError, RecursionError):
                raise ControlError(400, "invalid_request", "the body is not JSON") from None
            if not isinstance(body, dict):
                raise ControlError(400, "invalid_request", "the body must be a JSON object")
            matched = match_control(method, path)
            if matched is None or matched[0].stream:
                raise ControlError(404, "not_found", f"no control route {method} {path}")
            route, params = matched
            for name, allowed in route.params.items():
                if params[name] not in allowed:
                    raise ControlError(404, "not_found", f"no {name} {params[name]}; one of {', '.join(allowed)}")
            problem = body_problem(route, body)
            if problem is not None:
                raise ControlError(400, "invalid_request", problem[1], param=problem[0])
            if params.get("action") == "emit" and route.name == "runs.action":
                body = _Body(body, text_bound)
            return 200, await self._handlers[route.name](body, query, **params)
        except ControlError as refusal:
            return refusal.status, _error(refusal.code, refusal.message, refusal.param)
        except CloudError as exc:
            return exc.status, _error(exc.code, exc.message or exc.code, exc.param)
        except CloudStateError as exc:
            return 400, _error("invalid_state", str(exc))
        except (ValueError, TypeError, LookupError, AttributeError) as exc:
            # a keyword the scripted method does not take, a field of the wrong shape deeper down
            return 400, _error("invalid_request", f"{type(exc).__name__}: {exc}")

    # -- people ------------------------------------------------------------------------------

    def _user(self, user_id: str) -> "FakeUser":
        user = self.cloud.state.users.get(user_id)
        if user is None:
            raise ControlError(404, "person_not_found", f"no person {user_id}")
        return user

    async def _people(self, body: dict[str, object], query: dict[str, str]) -> Answer:
        return {"people": [person_dto(u) for u in self.cloud.state.users.values()]}

    async def _person(self, body: dict[str, object], query: dict[str, str], user: str) -> Answer:
        return person_dto(self._user(user))

    async def _connect(self, body: dict[str, Any], query: dict[str, str], user: str) -> Answer:
        return dict(await connection_json(self.cloud, user, body.get("scopes"), body.get("dependencies")))

    async def _grant(self, body: dict[str, object], query: dict[str, str], user: str, action: str) -> Answer:
        grant = self._user(user).grant
        getattr(grant, action)(**body)
        return {"grant": grant.state}

    async def _refuse(self, body: dict[str, object], query: dict[str, str], user: str) -> Answer:
        person = self._user(user)
        person.refuse(str(body.get("code", "grant_removed")))
        return person_dto(person)

    async def _expire(self, body: dict[str, object], query: dict[str, str], user: str) -> Answer:
        person = self._user(user)
        person.expire_tokens()
        return person_dto(person)

    async def _memory_put(self, body: dict[str, Any], query: dict[str, str], user: str) -> Answer:
        return self._user(user).memory.put(**body)

    async def _memory_remove(self, body: dict[str, object], query: dict[str, str], user: str, name: str) -> Answer:
        self._user(user).memory.remove(name)
        return {"name": name, "removed": True}

    # -- runs --------------------------------------------------------------------------------

    def _runs_answer(self, query: dict[str, str]) -> Iterator[str]:
        """``GET /runs`` in pieces (``chunked.runs_answer``): a stored run's entry as the store keeps
        it. A page (``limit``, ``before``, ``counts``): the newest ``limit`` runs before the position
        ``before`` (to the newest when not given), in start order, with ``total`` and ``from`` (the
        page's first position); ``counts=1`` adds what the runs before the page count
        (``counts_before``: by person and by status, the runs not deleted), what a window counts by
        before it has read them. ``ControlError`` (at once, not as the pieces are asked for) for a
        page asked wrongly."""
        from ..control_wire import MAX_RUNS_PAGE, RUNS_PAGE

        user = query.get("user")
        stored = self.store.stored_dtos if self.store is not None else None
        events = query.get("events") in ("1", "true")
        slots = self.cloud.state.run_log.slots
        if user is not None:
            slots = [slot for slot in slots if slot.user_id == user]
        if not _paged(query):
            return runs_answer(self.cloud, list(slots), events=events, stored=stored)
        limit = _whole(query, "limit", RUNS_PAGE)
        if limit < 1 or limit > MAX_RUNS_PAGE:
            raise ControlError(400, "invalid_request", f"limit is from 1 to {MAX_RUNS_PAGE}, not {limit}",
                               param="limit")
        total = len(slots)
        high = min(_whole(query, "before", total), total)
        low = max(0, high - limit)
        extra: dict[str, object] = {"total": total, "from": low}
        if query.get("counts") in ("1", "true"):
            people: dict[str, int] = {}
            statuses: dict[str, int] = {}
            for slot in slots[:low]:
                if not slot.is_deleted:
                    people[slot.user_id] = people.get(slot.user_id, 0) + 1
                    status = slot.run_status
                    statuses[status] = statuses.get(status, 0) + 1
            extra["counts_before"] = {"people": people, "statuses": statuses}
        return runs_answer(self.cloud, slots[low:high], events=events, stored=stored, extra=extra)

    async def _runs(self, body: dict[str, object], query: dict[str, str]) -> Answer:
        answer: Answer = json.loads("".join(self._runs_answer(query)))
        return answer

    def _fake_run(self, run_id: str, *, hold: bool = True) -> "FakeRun":
        """The run of ``run_id``; without ``hold``, a run only stored is read back as a copy for one
        read (a read of a run holds nothing)."""
        runs = self.cloud.state.runs
        run = runs.get(run_id) if hold else runs.peek(run_id)
        if run is None:
            raise ControlError(404, "run_not_found", f"no run {run_id}")
        return run

    async def _run(self, body: dict[str, object], query: dict[str, str], run_id: str) -> Answer:
        return run_dto(self._fake_run(run_id, hold=False), events=query.get("events") not in ("0", "false"))

    async def _run_events(self, body: dict[str, object], query: dict[str, str], run_id: str) -> Answer:
        """A page of the run's events (``after < seq <= upto``, oldest first, at most ``limit``; none of
        the types ``exclude`` names), read from memory or the store as far as it reaches: what a
        window reads of a run it shows, never the whole log at once. ``more`` says whether events
        after the page's last one remain."""
        from ..control_wire import EVENTS_PAGE

        limit = _limit(_whole(query, "limit", EVENTS_PAGE))
        found = [(self._fake_run(run_id, hold=False), _whole(query, "after", 0), _whole(query, "upto", None))]
        return _pages(found, limit, _types(query, "exclude"))[0]

    async def _runs_events(self, body: dict[str, Any], query: dict[str, str]) -> Answer:
        """Pages of several runs' events in one read (``POST /runs/events``), in the order asked: each
        run's page as ``GET /runs/{id}/events`` answers it, with at most ``limit`` events in all. A
        run the limit leaves nothing for answers an empty page whose ``more`` says whether it has events
        in its range; a run the cloud does not know is named in ``missing``. What a reader of many
        runs (a catch-up) asks in one round trip instead of one a run."""
        from ..control_wire import EVENTS_PAGE

        asked = body["runs"]
        asked_limit = body.get("limit")
        limit = _limit(EVENTS_PAGE if asked_limit is None else int(asked_limit))
        exclude = body.get("exclude") or []
        if any(not isinstance(kind, str) or not kind or len(kind) > 200 for kind in exclude):
            raise ControlError(400, "invalid_request", "exclude holds event types: strings, none empty",
                               param="exclude")
        for index, item in enumerate(asked):
            for name in ("after", "upto"):
                value = item.get(name)
                if value is not None and (value < 0 or value >= 10 ** 18):
                    raise ControlError(400, "invalid_request", f"runs[{index}].{name} is a whole number of zero "
                                       f"or more, not {value}", param=f"runs[{index}].{name}")
        kinds = frozenset(exclude)
        found: list[tuple[FakeRun, int, int | None]] = []
        missing: list[str] = []
        runs = self.cloud.state.runs
        slots = [runs.slot(item["run_id"]) for item in asked]
        read = iter(runs.copies([slot for slot in slots if slot is not None]))  # read, never held
        for item, slot in zip(asked, slots, strict=True):
            if slot is None:
                missing.append(item["run_id"])
            else:
                found.append((next(read), item.get("after") or 0, item.get("upto")))
        pages = _pages(found, limit, kinds)
        return _Spliced({"runs": pages, "missing": missing})  # its pages may carry stored text (``_encode``)

    async def _run_action(self, body: dict[str, Any], query: dict[str, str], run_id: str, action: str) -> Answer:
        run = self._fake_run(run_id)
        if action == "settle" and run.settled:  # checked and done in one call: two windows cannot both settle
            raise ControlError(409, "run_settled", f"run {run_id} is already settled")
        answer: Answer = {}
        self._check_sizes(action, body)
        if action == "emit" and "events" in body:
            events = body["events"]
            if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
                raise ControlError(400, "invalid_request", "events must be a list of objects", param="events")
            answer["seqs"] = _emit_batch(run, events)
        elif action == "emit":
            answer["event"] = run.emit(body["type"], body.get("fields"), node_id=body.get("node_id"))
        elif action == "ask":
            answer["question_id"] = run.ask(**body)
        else:
            getattr(run, action)(**body)
        if action == "expire_events" and self.store is not None:
            self.store.touch_run(run.id)
        if self.cloud.state.responder is not None or self.cloud.state.tasks:
            await asyncio.sleep(0)
        answer["run"] = run_dto(run, events=False)
        return answer

    def _check_sizes(self, action: str, body: dict[str, Any]) -> None:
        """A scripted reply's text and each emitted event stay within the cloud's limits."""
        limits = self.cloud.limits
        if action == "reply" and isinstance(body.get("text"), str) and len(body["text"]) > limits.message_chars:
            raise ControlError(413, "payload_too_large",
                                 f"text is longer than the limit of {limits.message_chars} characters", param="text")
        if action == "emit":
            size_limit = limits.event_bytes
            if isinstance(body, _Body) and body.text_bound is not None and body.text_bound <= size_limit:
                return  # the whole body encodes within the limit: so does each event in it
            events = body["events"] if isinstance(body.get("events"), list) else [body]
            for index, event in enumerate(events):
                if _text_bound(event) > size_limit and _json_size(event) > size_limit:
                    raise ControlError(413, "payload_too_large",
                                         f"event {index} is larger than the limit of {limits.event_bytes} bytes",
                                         param=f"events[{index}]" if "events" in body else "fields")

    # -- failures and gates ------------------------------------------------------------------

    async def _fail_next(self, body: dict[str, Any], query: dict[str, str]) -> Answer:
        answer: Any = body.get("answer")
        status = answer.get("status") if isinstance(answer, dict) else answer
        if answer != "unreachable" and (isinstance(status, bool) or not isinstance(status, int)
                                        or not 400 <= status <= 599):
            raise ControlError(400, "invalid_request",
                                 "answer must be a status 400-599, \"unreachable\" or {status, code, message}",
                                 param="answer")
        times = body.get("times", 1)
        if times is not None and times < 1:
            raise ControlError(400, "invalid_request", "times must be at least 1 (or null: always)", param="times")
        if isinstance(answer, dict):
            answer = CloudError(int(answer["status"]), str(answer.get("code") or "error"), answer.get("message"),
                                origin=str(answer.get("origin", "runtime")), retryable=answer.get("retryable"),
                                details=answer.get("details"), param=answer.get("param"),
                                retry_after_s=answer.get("retry_after_s"))
        times = body.get("times", 1)
        remover = self.cloud.fail_next(str(body["op"]), answer, user=body.get("user"),
                                       times=float("inf") if times is None else times)
        failure_id = f"f{next(self._ids)}"
        self._removers[failure_id] = remover
        return {"id": failure_id}

    async def _gate(self, body: dict[str, Any], query: dict[str, str]) -> Answer:
        gate = self.cloud.gate(str(body["op"]), user=body.get("user"))
        gate_id = f"g{next(self._ids)}"
        self._gates[gate_id] = gate
        return {"id": gate_id}

    async def _release(self, body: dict[str, object], query: dict[str, str], gate: str) -> Answer:
        found = self._gates.pop(gate, None)
        if found is None:
            raise ControlError(404, "gate_not_found", f"no gate {gate}")
        held = found.held
        found.release()
        return {"id": gate, "released": True, "held": held}

    async def _remove_failure(self, body: dict[str, object], query: dict[str, str], failure: str) -> Answer:
        remover = self._removers.pop(failure, None)
        if remover is None:
            raise ControlError(404, "failure_not_found", f"no scripted failure {failure}")
        remover()
        return {"id": failure, "removed": True}

    # -- whole state -------------------------------------------------------------------------

    async def _reset(self, body: dict[str, object], query: dict[str, str]) -> Answer:
        self.cloud.reset()
        self._removers.clear()
        self._gates.clear()
        if self.store is not None:
            await self.store.replace(self.cloud, export_state(self.cloud))
        if self.change_log is not None:
            self.change_log.announce_reset("the cloud was reset")
        return {"reset": True}

    async def _export(self, body: dict[str, object], query: dict[str, str]) -> Answer:
        return export_state(self.cloud)

    async def _import(self, body: dict[str, Any], query: dict[str, str]) -> Answer:
        if self.store is not None:
            await self.store.replace(self.cloud, body)
        else:
            import_state(self.cloud, body)
        if self.change_log is not None:
            self.change_log.announce_reset("the cloud's state was replaced")
        return {"imported": True, "runs": len(body.get("runs", [])), "people": len(body.get("users", []))}

    # -- change stream -----------------------------------------------------------------------

    async def _publish(self, body: dict[str, object], query: dict[str, str]) -> Answer:
        """A window's own change (an insight approved, a canvas write) for every other window; or
        ``{changes: [...]}``, a batch of them, published in order, and only when every one of them
        is well formed (a refused batch publishes nothing)."""
        items = body.get("changes")
        if isinstance(items, list):
            batch = [_change_of(item, f"changes[{index}].") for index, item in enumerate(items)]
            self.cloud.changes.publish_many(batch)
            return {"published": True, "count": len(batch)}
        self.cloud.changes.publish(_change_of(body, ""))
        return {"published": True}

    async def _changes(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The change feed as server-sent events; ``Last-Event-ID`` resumes after that change (or
        answers one ``reset`` event when the log no longer holds it: ``change_log.py``)."""
        last_id = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"last-event-id"), None)
        origin = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("origin", [""])[-1][:64]
        assert self.change_log is not None, "a served control app keeps its change log"
        listener = self.change_log.follow(last_id, origin)

        async def frames() -> AsyncIterator[bytes]:
            yield b": changes\n\n"
            while True:
                parts = [await listener.get()]
                while not listener.queue.empty() and len(parts) < 512:
                    parts.append(listener.queue.get_nowait())
                yield b"".join(parts)

        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            assert self.app is not None, "the control app streams through its serving app"
            await self.app.stream_body(frames(), receive, send)
        finally:
            listener.close()


def _change_of(body: dict[str, Any], where: str) -> Change:
    """The change a window publishes, from its JSON (``ControlError`` naming ``where`` the field
    that is wrong; the fields' types are checked before: ``control_wire.body_problem``)."""
    source, kind = body.get("source"), body.get("kind")
    if not isinstance(source, str) or not isinstance(kind, str) or not source or not kind:
        raise ControlError(400, "invalid_request", f"a change needs a source and a kind ({where or 'body'})",
                           param=(where + "source") if not source else (where + "kind"))
    if source == "cloud":
        raise ControlError(400, "invalid_request", "only the cloud publishes cloud changes", param=where + "source")
    data = body.get("data") or {}
    if not isinstance(data, dict):
        raise ControlError(400, "invalid_request", "a change's data must be an object", param=where + "data")
    return Change(source, kind, str(body.get("id") or ""), data)


async def connection_json(cloud: "FakeCloud", user_id: str, scopes: object,
                          dependencies: "list[dict[str, object]] | None") -> ConnectionJSON:
    """Connect a person and answer what an app stores: the connection plus ``issuer`` and ``client_id``."""
    from ..sdk import MemoryConnectionStore

    if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes)):
        raise ControlError(400, "invalid_request", "scopes must be a list of strings")
    if not isinstance(user_id, str) or not user_id.strip():
        raise ControlError(400, "invalid_request", "a person id is required")
    store = MemoryConnectionStore()
    conn = await cloud.connect(store, user_id, scopes=scopes, dependencies=dependencies)
    return {
        "issuer": cloud.issuer,
        "client_id": cloud.client_id,
        "user_id": conn.user_id,
        "access_token": conn.access_token,
        "refresh_token": conn.refresh_token,
        "expires_at": conn.expires_at,
        "scope": list(conn.scope),
        "runtime_url": conn.runtime_url,
        "runtime_id": conn.runtime_id,
    }


def _emit_batch(run: "FakeRun", events: list[dict[str, Any]]) -> list[int]:
    """Append ``events`` (``{type, fields, node_id}``) in order as ``run.emit`` of each would: each
    stretch of one node's events goes in one ``emit_many`` (one clock read, one wake-up of the open
    streams, one publication). A refused event ends the batch: the events before it stay appended,
    streamed and published, and the refusal is raised."""
    seqs: list[int] = []
    for node_id, stretch in itertools.groupby(events, key=_node_of):
        seqs.extend(event["seq"] for event in run.emit_many(((e["type"], e.get("fields")) for e in stretch),
                                                            node_id=node_id))
    return seqs


_node_of = operator.methodcaller("get", "node_id")
"""An event's ``node_id`` (None without one), passed on as ``emit`` takes it."""


_size_chunks = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
)
"""The C encoder ``json.dumps`` builds on every call (its defaults: ASCII escapes, ``", "`` and
``": "``), built once: an event parsed from a request body is plain JSON data (no cycles, no object
the encoder needs a ``default`` for)."""


class _Body(dict[str, Any]):
    """A control call's parsed JSON object, with a bound on how long any value in it encodes."""

    __slots__ = ("text_bound",)

    def __init__(self, value: dict[str, Any], text_bound: int | None) -> None:
        super().__init__(value)
        self.text_bound = text_bound
        """At least ``len(json.dumps(v))`` for every value ``v`` in the body, the body included (None:
        not counted)."""


def _parse_body(raw: bytes) -> tuple[Any, int | None]:  # Any: any JSON value (dispatch refuses all but an object)
    """``json.loads(raw)``, and a bound on how long any value in it encodes (None: not counted).

    For an ASCII text every string encodes at most as long as it is written (an escape is written
    back as it is, or shorter: ``\\u0041`` is ``A``); ``json.dumps`` adds a space after each ``,``
    and ``:`` and writes a float's shortest form, at most 24 characters for a token of at least 3
    (21 more), and escapes DEL (6 characters for 1); whitespace and ``-0`` only shrink, and every
    other token is written as it was read. So no value in the text encodes longer than the text, plus
    one a ``,`` or ``:``, five a DEL, 21 a float (each counted as it is parsed)."""
    if not raw.isascii():
        return json.loads(raw), None
    floats = 0

    def count_float(text: str) -> float:
        nonlocal floats
        floats += 1
        return float(text)

    value = json.loads(raw, parse_float=count_float)
    return value, len(raw) + raw.count(b",") + raw.count(b":") + 5 * raw.count(b"\x7f") + 21 * floats


def _text_bound(event: dict[str, Any]) -> int:
    """At least ``len(json.dumps(event))``, counted without encoding for an event whose values are
    texts or objects of texts (the usual ``{type, fields, node_id}``); a huge number for any other
    shape, so that it is encoded. A text of n characters encodes to at most 12n + 2 (an astral
    character's escaped pair is 12); ``", "`` and ``": "`` add 4 a member, the braces 2, a ``null`` 4."""
    size = 2
    for key, value in event.items():
        kind = type(value)
        if kind is str:
            size += 12 * (len(key) + len(value)) + 8
        elif kind is dict:
            size += 12 * len(key) + 8
            for inner_key, inner in value.items():
                if type(inner) is not str:
                    return _UNBOUNDED
                size += 12 * (len(inner_key) + len(inner)) + 8
        elif value is None:
            size += 12 * len(key) + 10
        else:
            return _UNBOUNDED
    return size


_UNBOUNDED = 1 << 62
"""``_text_bound`` of an event it does not count."""


def _json_size(value: dict[str, Any]) -> int:
    """``len(json.dumps(value))``, counted from the encoder's pieces without joining them."""
    return sum(map(len, _size_chunks(value, 0)))


def _error(code: str, message: str, param: str | None = None) -> Answer:
    return {"error": {"code": code, "message": message, "param": param}}


async def _send(send: Send, status: int, body: bytes, *, content_type: bytes | None = b"application/json") -> None:
    headers = [(b"content-length", str(len(body)).encode())]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _limit(limit: int) -> int:
    """A page's ``limit`` as asked (from 1 to ``MAX_EVENTS_PAGE``), or a 400 naming it."""
    from ..control_wire import MAX_EVENTS_PAGE

    if limit < 1 or limit > MAX_EVENTS_PAGE:
        raise ControlError(400, "invalid_request", f"limit is from 1 to {MAX_EVENTS_PAGE}, not {limit}",
                           param="limit")
    return limit


_ENCODED: contextvars.ContextVar[bool] = contextvars.ContextVar("control_encoded_events", default=False)
"""Set while the control API answers over HTTP: a page's stored events may be carried as the JSON
text the store holds (``EncodedEvent``), never parsed; an in-process caller gets them parsed."""


class _Spliced(dict):  # type: ignore[type-arg]
    """An answer, or a page of one, holding events carried as their stored JSON text (``_encode``)."""


class _Events(list):  # type: ignore[type-arg]
    """A page's events, some as their stored JSON text (``EncodedEvent``), the rest as dicts."""


def _encode(value: object) -> str:
    """``json.dumps(value)``, each ``EncodedEvent`` of a spliced answer carried as its text."""
    from .persist import EncodedEvent

    if isinstance(value, _Events):
        return "[" + ", ".join(e.text if isinstance(e, EncodedEvent) else json.dumps(e) for e in value) + "]"
    if isinstance(value, _Spliced):
        return "{" + ", ".join(json.dumps(key) + ": " + _encode(item) for key, item in value.items()) + "}"
    if isinstance(value, list) and any(isinstance(item, _Spliced) for item in value):
        return "[" + ", ".join(_encode(item) for item in value) + "]"
    return json.dumps(value)


def _pages(found: "list[tuple[FakeRun, int, int | None]]", limit: int, kinds: frozenset[str]) -> list[Answer]:
    """Each of ``found``'s pages (its run, and its range ``after < seq <= upto``) as ``_events_page``
    answers it, with at most ``limit`` events in all, in order: the parts of the ranges a store holds
    are read in one statement (and, over HTTP, carried as the stored text), then each joined to what
    its run holds in memory (no await in between: the logs are those the parts were asked of)."""
    from .persist import read_stored_many, stored_source

    encoded = _ENCODED.get()
    parts: list[tuple[Any, int, int | None]] = []
    reading: list[int] = []
    for index, (run, after, upto) in enumerate(found):
        source = stored_source(run.events)
        part = run.events.stored_part(after, upto) if source is not None else None  # type: ignore[attr-defined]
        if part is not None:
            reading.append(index)
            parts.append((source, part[0], part[1]))
    stored = dict(zip(reading, read_stored_many(parts, limit, exclude=kinds, encoded=encoded), strict=True))
    pages: list[Answer] = []
    left = limit
    for index, (run, after, upto) in enumerate(found):
        events = None
        if index in stored:
            events = run.events.joined(stored[index][:left], after, upto, left, exclude=kinds) if left else []  # type: ignore[attr-defined]
        page = _events_page(run, after, upto, left, kinds, events)  # left 0: empty, more if the range holds any
        held = page["events"]
        left -= len(held) if isinstance(held, list) else 0
        if encoded and index in stored:
            page = _Spliced(page, events=_Events(held if isinstance(held, list) else []))
        pages.append(page)
    return pages


def _events_page(run: "FakeRun", after: int, upto: int | None, limit: int, exclude: frozenset[str],
                 events: list[dict[str, Any]] | None = None) -> Answer:
    """A page of ``run``'s events: ``after < seq <= upto``, oldest first, at most ``limit`` (0: none,
    ``more`` then says whether the range holds any), none of the types in ``exclude``; ``more`` says
    whether events after the page's last one remain (``events``: the page's events, read already)."""
    from ..cloud.event_log import events_between

    if events is None:
        events = events_between(run.events, after, upto, limit, exclude=exclude) if limit else []
    last = _seq(events[-1]) if events else (after if upto is None else max(after, upto))
    end = run.seq if upto is None else min(upto, run.seq)
    more = (len(events) >= limit and last < end) if limit else after < end
    return {"run_id": run.id, "events": events, "seq": run.seq, "first_seq": run.first_seq, "more": more}


def _seq(event: Any) -> int:
    """An event's seq, whether parsed or carried as its stored text (``EncodedEvent``)."""
    return int(event[0] if isinstance(event, tuple) else event["seq"])


def _types(query: dict[str, str], name: str) -> frozenset[str]:
    """A query parameter naming event types, comma-separated (none when absent), or a 400 naming it."""
    from ..control_wire import MAX_EXCLUDED

    raw = query.get(name) or ""
    kinds = [kind.strip() for kind in raw.split(",")] if raw else []
    if len(kinds) > MAX_EXCLUDED or any(not kind or len(kind) > 200 for kind in kinds):
        raise ControlError(400, "invalid_request",
                           f"{name} names at most {MAX_EXCLUDED} event types, comma-separated, none empty",
                           param=name)
    return frozenset(kinds)


def _paged(query: dict[str, str]) -> bool:
    """Whether a ``GET /runs`` asks for a page (``limit``, ``before`` or ``counts``), not every run."""
    return "limit" in query or "before" in query or "counts" in query


def _whole(query: dict[str, str], name: str, default: int | None) -> Any:
    """A query parameter that is a whole number of zero or more (``default`` when absent), or a 400 naming it."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or len(raw) > 18:
        raise ControlError(400, "invalid_request", f"{name} is a whole number of zero or more, not {raw[:40]!r}",
                           param=name)
    return int(raw)
