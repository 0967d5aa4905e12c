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
what ``persist.CloudStore`` writes row by row, so the two never disagree.
"""

from __future__ import annotations

import copy
import itertools
import re
from typing import TYPE_CHECKING, Any

from ..errors import ServiceError
from . import runs as runs_module
from .keys import SigningKey
from .runs import FakeRun
from .runtime import _Keyed
from .users import FakeUser

if TYPE_CHECKING:
    from .cloud import FakeCloud

__all__ = [
    "CloudStateError",
    "FORMAT",
    "VERSION",
    "export_state",
    "import_state",
    "run_log",
    "user_record",
    "run_record",
    "key_record",
    "meta_record",
    "run_generations",
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


def run_log(cloud: "FakeCloud") -> list[FakeRun]:
    """Every run in start order, deleted ones kept."""
    log = getattr(cloud, "_run_log", None)
    return list(log) if log is not None else list(cloud._runs.values())


def run_generations(runs: list[FakeRun]) -> list[int]:
    """For each run, how many earlier runs had the same id (a deleted run's id may start again)."""
    seen: dict[str, int] = {}
    out = []
    for run in runs:
        out.append(seen.get(run.id, 0))
        seen[run.id] = out[-1] + 1
    return out


def meta_record(cloud: "FakeCloud") -> dict[str, Any]:
    return {
        "client_id": cloud.client_id,
        "signing_key": {"pem": cloud._key.private_pem(), "kid": cloud._key.kid},
        "token_serial": cloud._token_serial,
        "client_jwk": copy.deepcopy(cloud._directory.client_jwk),
    }


def user_record(user: FakeUser) -> dict[str, Any]:
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


def run_record(run: FakeRun) -> dict[str, Any]:
    """A run without its events."""
    return {name: copy.deepcopy(getattr(run, name)) for name in _RUN_FIELDS}


def key_record(owner: tuple[str, str], keyed: Any) -> dict[str, Any]:
    return {
        "user_id": owner[0],
        "key": owner[1],
        "op": keyed.op,
        "fingerprint": keyed.fingerprint,
        "run_id": keyed.run_id,
        "status": keyed.status,
        "body": copy.deepcopy(keyed.body),
    }


def export_state(cloud: "FakeCloud") -> dict[str, Any]:
    """The whole state of ``cloud`` as one JSON document."""
    runs = []
    for run in run_log(cloud):
        record = run_record(run)
        record["events"] = copy.deepcopy(run.events)
        runs.append(record)
    return {
        "format": FORMAT,
        "version": VERSION,
        "meta": meta_record(cloud),
        "users": [user_record(cloud._users[uid]) for uid in sorted(cloud._users)],
        "runs": runs,
        "idempotency": [key_record(owner, cloud._ops.keys[owner]) for owner in sorted(cloud._ops.keys)],
        "refresh_tokens": dict(cloud._refresh_tokens),
    }


def import_state(cloud: "FakeCloud", doc: Any) -> None:
    """Replace the state of ``cloud`` with ``doc`` (open streams end; nothing changes on a bad doc)."""
    key, serial, jwk, users, runs, keys, refresh = _build(cloud, doc)
    for run in run_log(cloud):
        for stream in list(run.streams):
            stream.close()
    for user_id, user in users.items():
        old = cloud._users.get(user_id)
        if old is not None:
            user._responder = old._responder  # responders are code: they stay with the person
    cloud._key = key
    cloud._token_serial = serial
    cloud._directory.client_jwk = jwk
    cloud._users = users
    cloud._runs = {}
    if hasattr(cloud, "_run_log"):
        cloud._run_log = list(runs)
    for run in runs:
        cloud._runs[run.id] = run
    cloud._questions = {}
    for run in runs:
        for event in run.events:
            question = event.get("question") if event.get("type") == "node.question.opened" else None
            if isinstance(question, dict) and isinstance(question.get("id"), str):
                cloud._questions[question["id"]] = run
        if run.question and isinstance(run.question.get("id"), str):
            cloud._questions.setdefault(run.question["id"], run)
    cloud._ops.keys = keys
    cloud._refresh_tokens = refresh
    _advance_counters(cloud, runs)


def _build(cloud: "FakeCloud", doc: Any) -> tuple[Any, ...]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CloudStateError(f"not a workbench cloud state (its format must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise CloudStateError(f"cloud state version {doc.get('version')!r} is not {VERSION}")
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
            user.grant._dto = copy.deepcopy(grant)
            user.refusal = item.get("refusal")
            user.tokens_valid_from = int(item.get("tokens_valid_from", 0))
            user.refresh_token = item.get("refresh_token")
            user.superseded = {str(t) for t in item.get("superseded", [])}
            user.family_revoked = bool(item.get("family_revoked", False))
            user.memory.documents = {str(d["name"]): copy.deepcopy(d) for d in item.get("memory", [])}
            users[user.id] = user
        runs: list[FakeRun] = []
        for item in doc.get("runs", []):
            fields = {name: copy.deepcopy(item[name]) for name in _RUN_FIELDS if name in item}
            run = FakeRun(cloud, **fields)  # type: ignore[arg-type]
            events = item.get("events", [])
            if not isinstance(events, list) or not all(isinstance(e, dict) and isinstance(e.get("seq"), int)
                                                       for e in events):
                raise TypeError(f"the events of run {run.id} must be objects with a seq")
            run.events = copy.deepcopy(events)
            if not isinstance(run.id, str) or not isinstance(run.user_id, str) or not isinstance(run.params, dict):
                raise TypeError("a run needs a string id and user_id and an object of params")
            runs.append(run)
        keys = {}
        for item in doc.get("idempotency", []):
            owner = (str(item["user_id"]), str(item["key"]))
            keys[owner] = _Keyed(str(item["op"]), str(item["fingerprint"]), item.get("run_id"),
                                 int(item["status"]), copy.deepcopy(item["body"]))
        refresh = {str(k): str(v) for k, v in dict(doc.get("refresh_tokens", {})).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CloudStateError(f"the cloud state is malformed: {type(exc).__name__}: {exc}") from None
    return key, serial, jwk, users, runs, keys, refresh


def _advance_counters(cloud: "FakeCloud", runs: list[FakeRun]) -> None:
    """New ids and entry ids continue after the highest ones the state holds."""
    top = 0
    entry = 0
    for run in runs:
        ids = [run.id, *(m.get("id", "") for m in run.messages)]
        ids += [e["question"]["id"] for e in run.events
                if e.get("type") == "node.question.opened" and isinstance(e.get("question"), dict)]
        for value in ids:
            found = _SERIAL.search(str(value))
            if found:
                top = max(top, int(found.group(1)))
        for event in run.events:
            found = _ENTRY.match(str(event.get("entry_id", "")))
            if found:
                entry = max(entry, int(found.group(1)))
    cloud._ids = itertools.count(top + 1)
    current = next(runs_module._entry_ids)
    runs_module._entry_ids = itertools.count(max(current, entry + 1))
