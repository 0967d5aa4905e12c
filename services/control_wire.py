"""The control API of a served cloud, declared as data beside ``services/wire.py``.

What only a fake can do (script a run, revoke a grant, replace the state) is served under
``CONTROL_PREFIX`` with the bearer token of ``serve.json``. ``CONTROL_ROUTES`` lists every call:
its name, method, path template (``{name}`` segments, ``{name:path}`` for the rest of the path),
the JSON body fields it reads and what it answers. The server routes by this table
(``services/cloud/control.py``: one handler per name, missing or mistyped fields refused with 400
naming the field), and ``services/openapi.py`` publishes it; a client can be generated from it.
This module imports nothing of the server.

Answers are JSON objects; a refusal is ``{"error": {"code", "message", ...}}`` with a 4xx status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import TypedDict
from urllib.parse import unquote

__all__ = [
    "CONTROL_PREFIX",
    "ConnectionJSON",
    "Field",
    "ControlRoute",
    "CONTROL_ROUTES",
    "CHANGE_FIELDS",
    "MAX_CHANGES",
    "MAX_RUNS_READ",
    "RUNS_PAGE",
    "MAX_RUNS_PAGE",
    "object_schema",
    "RUN_ACTIONS",
    "GRANT_ACTIONS",
    "match_control",
    "body_problem",
]

CONTROL_PREFIX = "/_workbench/v1"
"""Where the control API lives on a served cloud's origin."""


class ConnectionJSON(TypedDict):
    """``POST /people/{user}/connect``'s answer: what an app stores (a ``Connection`` plus where to refresh it)."""

    issuer: str
    client_id: str
    user_id: str
    access_token: str
    refresh_token: str
    expires_at: float
    scope: list[str]
    runtime_url: str
    runtime_id: str

RUN_ACTIONS = ("reply", "fail_turn", "set_activity", "settle", "idle", "ask", "delete", "emit", "close_idle",
               "expire_events")
"""``POST /runs/{run_id}/{action}``: the ``FakeRun`` method called with the body as keyword arguments."""
GRANT_ACTIONS = ("revoke", "restore", "set", "setup", "sync")
"""``POST /people/{user}/grant/{action}``: the ``FakeGrant`` method called with the body."""

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a control call's JSON body (``type``: a JSON Schema type name, or ``any``)."""

    name: str
    type: str = "any"
    required: bool = False
    description: str = ""
    nullable: bool = False
    items: tuple["Field", ...] = ()
    """For an array of objects: the fields of each item (checked as a body's are)."""
    max_items: int | None = None
    """For an array: how many items it may hold."""

    def schema(self) -> dict[str, object]:
        """The field's JSON Schema."""
        base: dict[str, object] = {} if self.type == "any" else {"type": self.type}
        if self.type == "array":
            base["items"] = object_schema(self.items) if self.items else {}
            if self.max_items is not None:
                base["maxItems"] = self.max_items
        if self.nullable and self.type != "any":
            base = {"type": [self.type, "null"]} | {k: v for k, v in base.items() if k != "type"}
        if self.description:
            base["description"] = self.description
        return base


@dataclass(frozen=True, slots=True)
class ControlRoute:
    """One control call."""

    name: str
    method: str
    template: str
    summary: str
    body: tuple[Field, ...] = ()
    answer: Mapping[str, object] = field(default_factory=lambda: {"type": "object"})
    """The JSON Schema of a 200 answer."""
    open_body: bool = False
    """True when the body may carry keyword arguments beyond ``body`` (run and grant actions)."""
    stream: bool = False
    """True for a server-sent-event answer."""
    params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Path parameters limited to a list of values."""
    alternative: tuple[Field, ...] = ()
    """A second form of the body, read instead of ``body`` when the body holds one of these fields
    (``POST /changes``: one change, or ``{changes: [...]}``)."""

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.template)


def _compiled(template: str) -> re.Pattern[str]:
    found = _PATTERNS.get(template)
    if found is None:
        regex = re.sub(r"\{(\w+)(:path)?\}",
                       lambda m: f"(?P<{m.group(1)}>{'.+' if m.group(2) else '[^/]+'})", template)
        found = _PATTERNS[template] = re.compile(f"^{regex}$")
    return found


def object_schema(fields: tuple[Field, ...]) -> dict[str, object]:
    """The JSON Schema of an object holding ``fields`` and nothing else."""
    schema: dict[str, object] = {"type": "object", "properties": {f.name: f.schema() for f in fields}}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


_PATTERNS: dict[str, re.Pattern[str]] = {}
CHANGE_FIELDS = (Field("source", "string", required=True), Field("kind", "string", required=True),
                 Field("id", "string", nullable=True), Field("data", "object", nullable=True))
"""A change a window publishes (``POST /changes``): one body, or each item of a batch."""
MAX_CHANGES = 1000
"""How many changes one ``POST /changes`` batch may hold."""
EVENTS_PAGE = 1000
"""How many of a run's events ``GET /runs/{id}/events`` answers when ``limit`` is not given."""
MAX_EVENTS_PAGE = 10_000
"""The most events one ``GET /runs/{id}/events`` answers."""
MAX_EXCLUDED = 32
"""How many event types one ``GET /runs/{id}/events`` (or ``POST /runs/events``) may leave out (``exclude``)."""
MAX_RUNS_READ = 256
"""How many runs one ``POST /runs/events`` reads the events of."""
RUNS_PAGE = 1000
"""How many runs a page of ``GET /runs`` (``?limit=``) holds when ``limit`` is empty."""
MAX_RUNS_PAGE = 10_000
"""The most runs one page of ``GET /runs`` holds."""
_OBJ = {"type": "object"}
_ID = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
_PERSON = {"type": "object", "required": ["id", "grant"], "properties": {"id": {"type": "string"}}}
_RUN = {"type": "object", "required": ["id", "status"],
        "properties": {"id": {"type": "string"}, "status": {"type": "string"}}}

CONTROL_ROUTES: tuple[ControlRoute, ...] = (
    ControlRoute("people.list", "GET", "/people", "Every person the cloud knows",
                 answer={"type": "object", "required": ["people"], "properties": {"people": {"type": "array"}}}),
    ControlRoute("people.get", "GET", "/people/{user}", "One person: grant, refusal, memory", answer=_PERSON),
    ControlRoute("people.connect", "POST", "/people/{user}/connect",
                 "Connect a person; answers the connection an app stores",
                 body=(Field("scopes", "array", description="scopes to grant (strings)"),
                       Field("dependencies", "array")),
                 answer={"type": "object", "required": ["access_token", "refresh_token", "user_id"]}),
    ControlRoute("people.grant", "POST", "/people/{user}/grant/{action}",
                 "Change a person's grant (the FakeGrant method named by action)",
                 open_body=True, params={"action": GRANT_ACTIONS},
                 answer={"type": "object", "required": ["grant"]}),
    ControlRoute("people.refuse", "POST", "/people/{user}/refuse", "Refuse the person's next refresh",
                 body=(Field("code", "string", description="a refusal code"),), answer=_PERSON),
    ControlRoute("people.expire_tokens", "POST", "/people/{user}/expire_tokens",
                 "Invalidate the person's access tokens", answer=_PERSON),
    ControlRoute("people.memory.put", "POST", "/people/{user}/memory", "Store a memory document",
                 body=(Field("name", "string", required=True), Field("body", "string", required=True),
                       Field("kind", "string"), Field("owner", "string"), Field("privacy", "string"),
                       Field("summary", "string", nullable=True), Field("rules", "array", nullable=True))),
    ControlRoute("people.memory.remove", "DELETE", "/people/{user}/memory/{name:path}", "Remove a memory document",
                 answer={"type": "object", "required": ["name", "removed"]}),
    ControlRoute("people.start_run", "POST", "/people/{user}/runs", "Start a run as the app (through the SDK)",
                 body=(Field("prompt", "string", required=True), Field("name", "string", nullable=True),
                       Field("forked_from", "string", nullable=True, description="the run this one forks"),
                       Field("forked_at_turn", "integer", nullable=True,
                             description="the turn of forked_from it forks at (from 1)"),
                       Field("history", "array", nullable=True,
                             description="the messages the run carries: {role, text} objects")),
                 open_body=True, answer=_OBJ),
    ControlRoute("people.reconnect", "POST", "/people/{user}/reconnect",
                 "Sign the person in again for the app's side", open_body=True),
    ControlRoute("runs.list", "GET", "/runs",
                 "Every run in start order (?user=, ?events=1); or a page of them (?limit=, at most 10000): "
                 "the newest limit runs before the position before (to the newest when not given), with "
                 "total (how many runs there are) and from (the position of the page's first run); counts=1 "
                 "adds counts_before: the runs before the page that are not deleted, counted by person "
                 "(people) and by status (statuses)",
                 answer={"type": "object", "required": ["runs"], "properties": {"runs": {"type": "array"}}}),
    ControlRoute("runs.get", "GET", "/runs/{run_id}", "One run with its events (?events=0 without)", answer=_RUN),
    ControlRoute("runs.events", "GET", "/runs/{run_id}/events",
                 "A page of a run's events: after < seq <= upto, oldest first, at most limit, none of the "
                 "types exclude names (?after=0, ?upto=, ?limit=1000, at most 10000, ?exclude=type,type)",
                 answer={"type": "object", "required": ["run_id", "events", "seq", "first_seq", "more"],
                         "properties": {"events": {"type": "array"}, "more": {"type": "boolean"}}}),
    ControlRoute("runs.events_many", "POST", "/runs/events",
                 "Pages of several runs' events in one read, in the order asked: each run's after < seq <= "
                 "upto, oldest first, none of the types exclude names, at most limit events in all "
                 "(1000 when not given, at most 10000); a run past the limit answers an empty page with "
                 "more, a run the cloud does not know is named in missing",
                 body=(Field("runs", "array", required=True, max_items=MAX_RUNS_READ,
                             items=(Field("run_id", "string", required=True),
                                    Field("after", "integer", description="the events after this seq (0)"),
                                    Field("upto", "integer", nullable=True,
                                          description="the events up to this seq (to the newest)")),
                             description="the runs, each with where to read from"),
                       Field("exclude", "array", max_items=MAX_EXCLUDED, description="event types left out"),
                       Field("limit", "integer", description="the most events the answer holds, in all")),
                 answer={"type": "object", "required": ["runs", "missing"],
                         "properties": {"runs": {"type": "array"}, "missing": {"type": "array"}}}),
    ControlRoute("runs.message", "POST", "/runs/{run_id}/message", "Send a message as the app (through the SDK)",
                 body=(Field("text", "string", required=True), Field("start_turn", "boolean")), answer=_OBJ),
    ControlRoute("runs.cancel", "POST", "/runs/{run_id}/cancel", "Cancel a run as the app (through the SDK)",
                 answer=_OBJ),
    ControlRoute("runs.action", "POST", "/runs/{run_id}/{action}",
                 "Script a run (the FakeRun method named by action; emit also takes events: [...])",
                 open_body=True, params={"action": RUN_ACTIONS},
                 answer={"type": "object", "required": ["run"], "properties": {"run": _RUN}}),
    ControlRoute("failures.fail_next", "POST", "/fail_next", "Script the next answers of an operation",
                 body=(Field("op", "string", required=True), Field("answer", "any", required=True),
                       Field("user", "string", nullable=True), Field("times", "integer", nullable=True)),
                 answer=_ID),
    ControlRoute("failures.gate", "POST", "/gates", "Hold every matching request until released",
                 body=(Field("op", "string", required=True), Field("user", "string", nullable=True)), answer=_ID),
    ControlRoute("failures.release", "POST", "/gates/{gate}/release", "Release a gate",
                 answer={"type": "object", "required": ["id", "released"]}),
    ControlRoute("failures.remove", "DELETE", "/failures/{failure}", "Remove a scripted failure",
                 answer={"type": "object", "required": ["id", "removed"]}),
    ControlRoute("state.reset", "POST", "/reset", "Clear runs, calls and scripts (grants stay)",
                 answer={"type": "object", "required": ["reset"]}),
    ControlRoute("state.export", "GET", "/state", "The whole state as one document",
                 answer={"type": "object", "required": ["format", "version"]}),
    ControlRoute("state.import", "PUT", "/state", "Replace the whole state (refused whole when malformed)",
                 open_body=True, answer={"type": "object", "required": ["imported"]}),
    ControlRoute("changes.follow", "GET", "/changes", "The change feed as server-sent events", stream=True),
    ControlRoute("changes.publish", "POST", "/changes",
                 "Publish a window's own change, or a batch of them in order ({changes: [...]}, all or none)",
                 body=CHANGE_FIELDS,
                 alternative=(Field("changes", "array", required=True, items=CHANGE_FIELDS,
                                    max_items=MAX_CHANGES, description="changes, oldest first"),),
                 answer={"type": "object", "required": ["published"]}),
)
"""Every control call (``GET /changes`` is answered by the server's stream, not a handler)."""


def match_control(method: str, path: str) -> tuple[ControlRoute, dict[str, str]] | None:
    """The control call ``method path`` (below ``CONTROL_PREFIX``) addresses, with its path
    parameters; the first declared route wins (``/runs/{id}/message`` before ``/runs/{id}/{action}``)."""
    for route in CONTROL_ROUTES:
        if route.method != method:
            continue
        found = route.pattern.match(path)
        if found:
            return route, {k: unquote(v) for k, v in found.groupdict().items()}
    return None


def body_problem(route: ControlRoute, body: dict[str, object]) -> tuple[str, str] | None:
    """``(field, problem)`` when ``body`` lacks a required field or holds a mistyped one (in its
    ``alternative`` form when it holds one of that form's fields, which then goes with no other of
    ``body``'s); an item of an array of objects is checked the same way (``changes[3].kind``)."""
    form = route.body
    if route.alternative and any(spec.name in body for spec in route.alternative):
        form = route.alternative
        names = {spec.name for spec in form}
        extra = next((spec.name for spec in route.body if spec.name in body and spec.name not in names), None)
        if extra is not None:
            return extra, f"{extra} does not go with {', '.join(sorted(names))}"
    return _fields_problem(form, body, "")


def _fields_problem(fields: tuple[Field, ...], body: Mapping[str, object], prefix: str) -> tuple[str, str] | None:
    for spec in fields:
        name = prefix + spec.name
        if spec.name not in body:
            if spec.required:
                return name, f"{name} is required"
            continue
        value = body[spec.name]
        if spec.type == "any" or (value is None and (spec.nullable or not spec.required)):
            continue
        wanted = _TYPES[spec.type]
        if isinstance(value, bool) and spec.type in ("integer", "number") or not isinstance(value, wanted):
            return name, f"{name} must be {'an' if spec.type[0] in 'aeiou' else 'a'} {spec.type}"
        if isinstance(value, list):
            if spec.max_items is not None and len(value) > spec.max_items:
                return name, f"{name} holds {len(value)} items; at most {spec.max_items} go in one request"
            if spec.items:
                for index, item in enumerate(value):
                    where = f"{name}[{index}]"
                    if not isinstance(item, dict):
                        return where, f"{where} must be an object"
                    problem = _fields_problem(spec.items, item, where + ".")
                    if problem is not None:
                        return problem
    return None
