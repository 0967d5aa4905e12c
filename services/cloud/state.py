"""The fake cloud's durable state as plain JSON records: one shape for the disk store and export.

What a cloud keeps across a restart: its signing key (so tokens issued before still verify), the
token serial, the client key the directory pinned, people (grant, refusal, token cut-off, refresh
token family, memory documents), runs with their events (questions are read back from the
``node.question.opened`` events), idempotency keys and the refresh tokens it issued. Responders,
providers' handlers, intercepts and gates are code: they are set up again by whoever runs the
cloud; call records are not state.

``export_state(cloud)`` is the whole state as one document (``FORMAT``, ``VERSION``);
``import_state(cloud, doc)`` replaces a cloud's state with one, refusing (``CloudStateError``)
anything that is not such a document, and changing nothing then. The record functions below are
what ``persist.CloudStore`` writes row by row, so the two never disagree. All of them read and
write the cloud's shared ``CloudState`` (``cloud.state``).
"""

from __future__ import annotations

import copy
import itertools
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from ..errors import ServiceError
from ..text import json_clean, repair_value
from .keys import SigningKey
from .host import CloudHost
from .book import READ_BACK, RunSlot
from .runs import FakeRun, advance_entry_ids
from .shared import Keyed, KeyWindow
from .users import FakeUser

__all__ = [
    "CloudStateError",
    "FORMAT",
    "VERSION",
    "export_state",
    "state_document",
    "import_state",
    "run_log",
    "each_run",
    "user_record",
    "run_record",
    "key_record",
    "meta_record",
    "state_problem",
    "STATE_SCHEMA",
    "run_history",
    "note_history",
    "run_from_record",
    "run_ids",
    "id_serial",
]

FORMAT = "workbench-cloud-state"
VERSION = 1

_RUN_FIELDS = (
    "id", "user_id", "params", "idempotency_key", "name", "messages", "status", "activity", "outcome",
    "result", "last_turn_error", "deleted", "question", "created_at", "updated_at", "turns", "seq", "first_seq",
)
_SERIAL = re.compile(r"_(\d+)[0-9a-f]{6}$")
_ENTRY = re.compile(r"^e(\d+)$")


class CloudStateError(ServiceError):
    """A cloud state document (an import file, a stored row) that cannot be read as one."""


def run_log(cloud: CloudHost) -> list[FakeRun]:
    """Every run in start order, deleted ones kept (a served cloud's stored ones read back and held)."""
    return list(cloud.state.run_log)


def each_run(cloud: CloudHost) -> Iterator[FakeRun]:
    """Every run in start order for one read (an export): a stored one read back as a copy nobody
    holds, ``READ_BACK`` at a time, so reading them all holds no more of them than that."""
    slots = list(cloud.state.run_log.slots)
    for start in range(0, len(slots), READ_BACK):
        yield from cloud.state.runs.copies(slots[start:start + READ_BACK])


def meta_record(cloud: CloudHost) -> dict[str, object]:
    state = cloud.state
    return {
        "client_id": cloud.client_id,
        "signing_key": {"pem": state.key.private_pem(), "kid": state.key.kid},
        "token_serial": state.token_serial,
        "client_jwk": copy.deepcopy(state.client_jwk),
    }


def user_record(user: FakeUser) -> dict[str, object]:
    return {
        "id": user.id,
        "grant": user.grant.state,
        "refusal": user.refusal,
        "tokens_valid_from": user.tokens_valid_from,
        "refresh_token": user.refresh_token,
        "superseded": sorted(user.superseded),
        "family_revoked": user.family_revoked,
        "memory": [copy.deepcopy(doc) for doc in user.memory.documents.values()],
    }


def run_record(run: FakeRun) -> dict[str, object]:
    """A run without its events."""
    return {name: copy.deepcopy(getattr(run, name)) for name in _RUN_FIELDS}


def key_record(owner: tuple[str, str], keyed: Keyed) -> dict[str, object]:
    return {
        "user_id": owner[0],
        "key": owner[1],
        "op": keyed.op,
        "fingerprint": keyed.fingerprint,
        "run_id": keyed.run_id,
        "status": keyed.status,
        "body": keyed.body,
    }


def export_state(cloud: CloudHost) -> dict[str, Any]:
    """The whole state of ``cloud`` as one JSON document."""
    runs = []
    for run in each_run(cloud):
        record = run_record(run)
        record["events"] = copy.deepcopy(list(run.events))
        runs.append(record)
    return state_document(cloud, runs)


def state_document(cloud: CloudHost, runs: list[dict[str, object]]) -> dict[str, Any]:
    """The whole state of ``cloud`` as one JSON document, its ``runs`` given (each ``run_record`` with
    its ``events``; ``served.chunked`` passes an empty list and writes the runs one by one)."""
    state = cloud.state
    return {
        "format": FORMAT,
        "version": VERSION,
        "meta": meta_record(cloud),
        "users": [user_record(state.users[uid]) for uid in sorted(state.users)],
        "runs": runs,
        # oldest first, as the window trims them: a state read back trims the same keys
        "idempotency": [key_record(owner, keyed) for owner, keyed in state.idempotency.items()],
        "refresh_tokens": dict(state.refresh_tokens),
    }


def import_state(cloud: CloudHost, doc: object, *,
                 histories: "list[tuple[list[str], int]] | None" = None, owned: bool = False,
                 clean: bool = False, stored: "list[RunSlot | None] | None" = None,
                 stored_top: tuple[int, int] = (0, 0)) -> None:
    """Replace the state of ``cloud`` with ``doc`` (open streams end; nothing changes on a bad doc).

    ``histories``: for a document whose runs come without their events (a store that reads them
    back on demand), each run's ``run_history`` in the document's order. ``owned``: the caller made
    ``doc`` for this call alone and keeps no part of it (a store's read), so the cloud takes its
    values as they are instead of copies. ``clean``: the caller found no text in ``doc`` for
    ``repair_value`` to change (a store that checked its rows' text as it read them). ``stored``:
    every run in start order, where a ``RunSlot`` is a run left in the store (read back when asked
    for) and None takes the document's next run; ``stored_top`` is then the highest id serial and
    turn entry number of the runs left there."""
    key, serial, jwk, users, runs, keys, refresh = _build(cloud, doc, owned=owned, clean=clean)
    if histories is None:
        histories = [run_history(run.events) for run in runs]
    elif len(histories) != len(runs):
        raise CloudStateError(f"the cloud state is malformed: {len(histories)} run histories for {len(runs)} runs")
    slots: list[RunSlot]
    if stored is None:
        slots = [RunSlot(run.id, run.user_id, run=run) for run in runs]
    else:
        built = iter(runs)
        try:
            slots = [RunSlot((run := next(built)).id, run.user_id, run=run) if slot is None else slot
                     for slot in stored]
        except StopIteration:
            raise CloudStateError("the cloud state is malformed: fewer runs than their places") from None
        if next(built, None) is not None:
            raise CloudStateError("the cloud state is malformed: more runs than their places")
    state = cloud.state
    for run in list(state.runs.held()):
        for stream in list(run.streams):
            stream.close()
    # responders are code: they stay with the person (and go with one the document does not hold)
    state.user_responders = {uid: fn for uid, fn in state.user_responders.items() if uid in users}
    state.key = key
    state.token_serial = serial
    state.client_jwk = jwk
    state.users = users
    state.runs.restore(slots)
    state.questions.clear()
    for run, (question_ids, _) in zip(runs, histories, strict=True):
        for question_id in question_ids:
            state.questions[question_id] = run
        if run.question and isinstance(run.question.get("id"), str):
            state.questions.setdefault(run.question["id"], run)
    state.idempotency = keys
    state.refresh_tokens = refresh
    state.ids = itertools.count(1)
    note_history(cloud, runs, [q for ids, _ in histories for q in ids],
                 max([stored_top[1], *(e for _, e in histories)]), serial=stored_top[0])


# The shape of a state document, checked whole before anything is replaced: a type name (or a
# tuple of them), a dict of required ("name") and optional ("name?") fields, or a one-item list
# ([item schema]) for a list. "any" accepts anything.
_NUM = ("integer", "number")
Schema = str | tuple["Schema", ...] | list["Schema"] | dict[str, "Schema"]
"""A JSON shape: a type name (``"string"``, ``"any"`` ...), a tuple of alternatives, ``[item
shape]`` for a list, or ``{field: shape}`` for an object (a field ending in ``?`` is optional)."""

_RUN_SCHEMA: dict[str, Schema] = {
    "id": "string", "user_id": "string", "params": "object", "idempotency_key?": ("string", "null"),
    "name?": ("string", "null"), "messages?": [{"id": "string", "text": "string", "delivered": "boolean"}],
    "status?": "string", "activity?": ("string", "null"), "outcome?": ("object", "null"),
    "result?": ("string", "null"), "last_turn_error?": ("object", "null"), "deleted?": "boolean",
    "question?": ("object", "null"), "created_at?": _NUM, "updated_at?": _NUM, "turns?": "integer",
    "seq?": "integer", "first_seq?": "integer", "events?": [{"seq": "integer", "type": "string"}],
}
STATE_SCHEMA: dict[str, Schema] = {
    "format": "string",
    "version": "integer",
    "meta": {"signing_key": {"pem": "string", "kid": "string"}, "token_serial?": "integer",
             "client_jwk?": ("object", "null"), "client_id?": "string"},
    "users?": [{
        "id": "string", "grant?": ("null", {"version": "integer", "rev": "integer", "state": "string"}),
        "refusal?": ("string", "null"), "tokens_valid_from?": "integer", "refresh_token?": ("string", "null"),
        "superseded?": ["string"], "family_revoked?": "boolean",
        "memory?": [{"name": "string", "body?": "string"}],
    }],
    "runs?": [_RUN_SCHEMA],
    "idempotency?": [{"user_id": "string", "key": "string", "op": "string", "fingerprint": "string",
                      "run_id?": ("string", "null"), "status": "integer", "body": "any"}],
    "refresh_tokens?": "object",
}
"""What ``import_state`` accepts (``state_problem`` names the first field that does not fit)."""

_JSON_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                               "object": dict, "array": list, "null": type(None)}


def state_problem(doc: object) -> str | None:
    """The first field of ``doc`` that does not fit ``STATE_SCHEMA`` and why, or None."""
    if _fits(STATE_SCHEMA, doc):  # checked without naming anything; a misfit is then walked for its name
        return None
    return _misfit(STATE_SCHEMA, doc, "") or "the document does not fit"


Check = Callable[[object], bool]
_CHECKS: dict[int, tuple[Schema, Check]] = {}
"""Each schema (kept, so its id is never another's) and the check ``_fits`` made of it: made once."""


def _fits(schema: Schema, value: object) -> bool:
    """Whether ``value`` fits ``schema`` (``_misfit`` finds no problem), without building any message."""
    return _check_of(schema)(value)


def _check_of(schema: Schema) -> Check:
    """The check of ``schema``: a function made once that walks a value with nothing left to decide
    about the schema (a field of a plain type is one ``isinstance``)."""
    held = _CHECKS.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    check = _made_check(schema)
    _CHECKS[id(schema)] = (schema, check)
    return check


def _plain(schema: Schema) -> tuple[tuple[type, ...], bool] | None:
    """For a type name or alternatives of type names: the Python types that fit, and whether a bool
    must be refused (JSON's numbers are not its booleans, though Python's bool is an int); else None."""
    names = schema if isinstance(schema, tuple) else (schema,)
    if not all(isinstance(name, str) for name in names):
        return None
    if "any" in names:
        return (object,), False
    types: list[type] = []
    for name in names:
        found = _JSON_TYPES[name]  # type: ignore[index]
        types.extend(found if isinstance(found, tuple) else (found,))
    return tuple(types), any(name in _NUM for name in names) and "boolean" not in names


def _made_check(schema: Schema) -> Check:
    plain = _plain(schema)
    if plain is not None:
        types, no_bool = plain
        if types == (object,):
            return lambda value: True
        if no_bool:
            return lambda value: isinstance(value, types) and not isinstance(value, bool)
        return lambda value: isinstance(value, types)
    if isinstance(schema, tuple):
        options = [_check_of(option) for option in schema]
        return lambda value: any(option(value) for option in options)
    if isinstance(schema, list):
        item = _check_of(schema[0])
        return lambda value: isinstance(value, list) and all(map(item, value))
    assert isinstance(schema, dict)
    fields = []
    for key, inner in schema.items():
        shape = _plain(inner)
        fields.append((key.rstrip("?"), not key.endswith("?"), shape[0] if shape else None,
                       shape[1] if shape else False, None if shape else _check_of(inner)))

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return False
        for name, required, types, no_bool, inner in fields:
            if name in value:
                item = value[name]
                if inner is None:
                    if not isinstance(item, types) or (no_bool and isinstance(item, bool)):  # type: ignore[arg-type]
                        return False
                elif not inner(item):
                    return False
            elif required:
                return False
        return True
    return check


def _misfit(schema: Schema, value: object, where: str) -> str | None:
    place = where or "the document"
    if isinstance(schema, tuple):
        problems = [_misfit(option, value, where) for option in schema]
        if all(problems):
            shapes = " or ".join(o if isinstance(o, str) else "an object" for o in schema)
            nested = next((p for p, o in zip(problems, schema, strict=True) if not isinstance(o, str)
                           and isinstance(value, dict)), None)
            return nested or f"{place} must be {shapes}"
        return None
    if isinstance(schema, str):
        if schema == "any":
            return None
        wanted = _JSON_TYPES[schema]
        if isinstance(value, bool) and schema in ("integer", "number") or not isinstance(value, wanted):
            return f"{place} must be {'an' if schema[0] in 'aeiou' else 'a'} {schema}, not {_shown(value)}"
        return None
    if isinstance(schema, list):
        if not isinstance(value, list):
            return f"{place} must be a list, not {_shown(value)}"
        for index, item in enumerate(value):
            problem = _misfit(schema[0], item, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if not isinstance(value, dict):
        return f"{place} must be an object, not {_shown(value)}"
    for key, inner in schema.items():
        name = key.rstrip("?")
        child = f"{where}.{name}" if where else name
        if name not in value:
            if not key.endswith("?"):
                return f"{child} is missing"
            continue
        problem = _misfit(inner, value[name], child)
        if problem:
            return problem
    return None


def _shown(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return "a list" if isinstance(value, list) else "an object"


def _build(cloud: CloudHost, document: object, *, owned: bool = False, clean: bool = False) -> tuple[Any, ...]:
    doc = document
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CloudStateError(f"not a workbench cloud state (its format must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise CloudStateError(f"cloud state version {doc.get('version')!r} is not {VERSION}")
    problem = state_problem(doc)
    if problem is not None:
        raise CloudStateError(f"the cloud state is malformed: {problem}")
    # text written by an older server: repaired, as captured turns are (clean text checked in one scan)
    doc, repaired = (document, False) if clean or json_clean(document) else repair_value(document)
    copied = _as_is if owned else copy.deepcopy
    if repaired:
        logging.getLogger(__name__).warning("the cloud state held text that is not valid Unicode: repaired (U+FFFD)")
    try:
        meta = doc["meta"]
        signing = meta["signing_key"]
        key = SigningKey(str(signing["pem"]), str(signing["kid"]))
        serial = int(meta.get("token_serial", 0))
        jwk = meta.get("client_jwk")
        if jwk is not None and not isinstance(jwk, dict):
            raise TypeError("client_jwk must be an object")
        users: dict[str, FakeUser] = {}
        for item in doc.get("users", []):
            user = FakeUser(cloud, str(item["id"]))
            grant = item.get("grant")
            if grant is not None and not isinstance(grant, dict):
                raise TypeError(f"the grant of {user.id} must be an object")
            user.grant.load(grant)
            user.refusal = item.get("refusal")
            user.tokens_valid_from = int(item.get("tokens_valid_from", 0))
            user.refresh_token = item.get("refresh_token")
            user.superseded = {str(t) for t in item.get("superseded", [])}
            user.family_revoked = bool(item.get("family_revoked", False))
            user.memory.documents = {str(d["name"]): copied(d) for d in item.get("memory", [])}
            users[user.id] = user
        runs = [_run_of(cloud, item, copied) for item in doc.get("runs", [])]
        keys = KeyWindow()
        for item in doc.get("idempotency", []):
            owner = (str(item["user_id"]), str(item["key"]))
            keys[owner] = Keyed(str(item["op"]), str(item["fingerprint"]), item.get("run_id"),
                                 int(item["status"]), item["body"])
        refresh = {str(k): str(v) for k, v in dict(doc.get("refresh_tokens", {})).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CloudStateError(f"the cloud state is malformed: {type(exc).__name__}: {exc}") from None
    return key, serial, jwk, users, runs, keys, refresh


def _run_of(cloud: CloudHost, item: dict[str, Any], copied: Callable[[Any], Any]) -> FakeRun:
    fields = {name: copied(item[name]) for name in _RUN_FIELDS if name in item}
    run = FakeRun(cloud, **fields)  # type: ignore[arg-type]
    events = item.get("events", [])
    if not isinstance(events, list) or not all(isinstance(e, dict) and isinstance(e.get("seq"), int)
                                               for e in events):
        raise TypeError(f"the events of run {run.id} must be objects with a seq")
    run.events = copied(events)
    if not isinstance(run.id, str) or not isinstance(run.user_id, str) or not isinstance(run.params, dict):
        raise TypeError("a run needs a string id and user_id and an object of params")
    return run


def run_from_record(cloud: CloudHost, record: object) -> FakeRun:
    """The run a stored record (``run_record``, without events) holds, taken as it is (the caller
    made it for this call); ``CloudStateError`` naming the first field that does not fit."""
    if not _fits(_RUN_SCHEMA, record):
        raise CloudStateError(f"the stored run is malformed: {_misfit(_RUN_SCHEMA, record, 'run') or 'not a run'}")
    assert isinstance(record, dict)
    if not json_clean(record):
        record = repair_value(record)[0]
    try:
        return _run_of(cloud, record, _as_is)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CloudStateError(f"the stored run is malformed: {type(exc).__name__}: {exc}") from None


T = TypeVar("T")


def run_ids(run: FakeRun) -> Iterable[str]:
    """The ids a run made: its own and its messages'."""
    return itertools.chain((run.id,), (str(m.get("id", "")) for m in run.messages))


def id_serial(*ids: Iterable[str]) -> int:
    """The highest serial among ``ids`` (``<prefix>_<serial><6 hex>``), 0 when none has one."""
    top = 0
    for value in itertools.chain(*ids):
        found = _SERIAL.search(str(value))
        if found:
            top = max(top, int(found.group(1)))
    return top


def _as_is(value: T) -> T:
    """A value taken as it is (an owned document's: nobody else holds it)."""
    return value


def run_history(events: Iterable[dict[str, Any]]) -> tuple[list[str], int]:
    """What a run's events tell a loaded cloud beyond the run's own record: the ids of the
    questions it opened, in order, and the number of its highest turn entry (``e<n>``)."""
    questions: list[str] = []
    entry = 0
    for event in events:
        if event.get("type") == "node.question.opened":
            question = event.get("question")
            if isinstance(question, dict) and isinstance(question.get("id"), str):
                questions.append(question["id"])
        found = _ENTRY.match(str(event.get("entry_id", "")))
        if found:
            entry = max(entry, int(found.group(1)))
    return questions, entry


def note_history(cloud: CloudHost, runs: list[FakeRun], question_ids: Iterable[str], top_entry: int, *,
                 serial: int = 0) -> None:
    """New ids continue after the highest of ``runs``' ids, their messages' and ``question_ids``
    (and ``serial``: that of runs not read); new turn entries after ``e<top_entry>`` (a cloud loaded
    without its runs' events is told them)."""
    top = max(serial, id_serial(itertools.chain.from_iterable(run_ids(run) for run in runs), question_ids))
    current = next(cloud.state.ids)
    cloud.state.ids = itertools.count(max(current, top + 1))
    advance_entry_ids(top_entry)
