"""``CloudState``: the one state object every part of a fake cloud shares.

A ``FakeCloud`` owns one ``CloudState`` (``cloud.state``) and every part reaches the cloud's state
through it and only through it: the runtime operations (``runtime.RuntimeOps``), the directory,
the transport, run notices, event streams, runs (``FakeRun``), people (``FakeUser`` and their
grant), the durable store (``persist``) and the state document (``state.export_state`` /
``import_state``), and the control API. The cloud's options (``issuer``, ``client_id``,
``clock``, ``changes`` ...) stay public attributes of the ``FakeCloud`` itself.

The operations the parts ask of each other live here too, as public methods: ``new_id``,
``mint_access``, ``create_run``, ``forget_run_keys``, ``question_dto``, ``respond``,
``run_changed``, ``owe_notice``, ``grant_changed`` and ``grant_revoked``.

``import_state`` replaces the fields below in place, so a part that holds the ``CloudState``
always sees the current state; nothing should hold one of its dicts across an import.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..changes import Change, ChangeFeed, RunEvents
from ..clock import Clock
from ..wire import ACCESS_TOKEN_TYPE
from .book import QuestionBook, RunBook, RunLog
from .errors import CloudError
from .event_log import EventLog
from .failures import Failures
from .keys import SigningKey
from .notices import NoticeSender
from .records import UNSET
from .runs import FakeRun, Responder, ResponderContext
from .users import FakeUser

__all__ = ["CloudState", "Keyed", "ResponderError", "StateHost", "UNSET"]


@dataclass(frozen=True)
class ResponderError:
    """A responder that threw: recorded, and nothing else fails."""

    run_id: str
    kind: str
    error: BaseException


class Keyed:
    """What an ``Idempotency-Key`` answered: a replay with the same request gets the same answer.

    The answer's body is kept as its JSON text (a run's DTO as an object takes four times the memory,
    and a cloud keeps up to ``Limits.idempotency_keys`` of them); ``body`` reads a fresh copy."""

    __slots__ = ("op", "fingerprint", "run_id", "status", "_body")

    def __init__(self, op: str, fingerprint: str, run_id: str | None, status: int, body: dict[str, Any]) -> None:
        self.op = op
        self.fingerprint = fingerprint
        self.run_id = run_id
        self.status = status
        self._body = json.dumps(body, ensure_ascii=False, separators=(",", ":"))

    @property
    def body_text(self) -> str:
        """The answer's body as JSON text (as kept)."""
        return self._body

    @property
    def body(self) -> dict[str, Any]:
        """The answer's body, a new object on each read (the caller may change it)."""
        value: dict[str, Any] = json.loads(self._body)
        return value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Keyed):
            return NotImplemented
        return (self.op, self.fingerprint, self.run_id, self.status, self.body_text) == (
            other.op, other.fingerprint, other.run_id, other.status, other.body_text)

    __hash__ = None  # type: ignore[assignment]  # (as the dataclass it replaces: compared, not hashed)

    def __repr__(self) -> str:
        return f"Keyed(op={self.op!r}, run_id={self.run_id!r}, status={self.status})"


class KeyWindow(dict[tuple[str, str], Keyed]):
    """The idempotency keys (``CloudState.idempotency``), by ``(user id, Idempotency-Key)``, oldest
    first: a dict that notes every key set or dropped since its store last took them
    (``take_touched``), so the store writes what changed without comparing every key it holds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.touched: dict[tuple[str, str], None] = dict.fromkeys(self)
        """The keys set or dropped since the last ``take_touched``, the one touched last at the end."""

    def take_touched(self) -> list[tuple[str, str]]:
        """The keys set or dropped since the last call (each present or gone now), in the order they
        were last touched: the keys set are in the order the window holds them."""
        touched, self.touched = self.touched, {}
        return list(touched)

    def _touch(self, key: tuple[str, str]) -> None:
        self.touched.pop(key, None)
        self.touched[key] = None

    def __setitem__(self, key: tuple[str, str], value: Keyed) -> None:
        super().__setitem__(key, value)
        self._touch(key)

    def __delitem__(self, key: tuple[str, str]) -> None:
        super().__delitem__(key)
        self._touch(key)

    def pop(self, key: tuple[str, str], *default: Any) -> Any:
        self._touch(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[tuple[str, str], Keyed]:
        item = super().popitem()
        self._touch(item[0])
        return item

    def setdefault(self, key: tuple[str, str], default: Keyed) -> Keyed:
        if key not in self:
            self._touch(key)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> "KeyWindow":  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        for key in self:
            self._touch(key)
        super().clear()


class StateHost(Protocol):
    """The options the shared state reads of its cloud (``FakeCloud`` is one)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def changes(self) -> ChangeFeed: ...

    @property
    def issuer(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    @property
    def runtime_id(self) -> str: ...

    @property
    def access_token_ttl_s(self) -> int: ...

    @property
    def responder_errors(self) -> list["ResponderError"]: ...

    @property
    def state(self) -> "CloudState": ...


@dataclass(eq=False)
class CloudState:
    """Everything one fake cloud holds, shared by all of its parts (see the module docstring)."""

    cloud: StateHost
    """The owning cloud, for its options (``issuer``, ``client_id``, ``clock``, ``changes`` ...)."""
    key: SigningKey = field(default_factory=SigningKey)
    """Signs access and notice tokens; stored, so tokens issued before a restart still verify."""
    token_serial: int = 0
    """The serial (``n`` claim) of the last access token minted; a cut-off compares against it."""
    client_jwk: dict[str, Any] | None = None
    """The client's public key, pinned from its first valid assertion."""
    users: dict[str, FakeUser] = field(default_factory=dict)
    """Every person, by id, in the order the cloud met them."""
    runs: RunBook = field(default_factory=RunBook)
    """The current run of each id (a deleted one until its id is started again); a served cloud's
    store holds only some of them and reads the others back when asked for (``book.RunBook``)."""
    questions: QuestionBook = field(default_factory=QuestionBook)
    """The run that opened each question, by question id."""
    refresh_tokens: dict[str, str] = field(default_factory=dict)
    """Every refresh token issued, to the id of its person."""
    idempotency: KeyWindow = field(default_factory=KeyWindow)
    """The answer of each ``(user id, Idempotency-Key)``."""
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    """The serial of the next id ``new_id`` makes."""
    id_salt: str | None = None
    """While set (``FakeCloud.replayable_ids``), ids are derived from it and their serial instead of
    drawn at random, so replaying one script on a fresh cloud makes the same ids."""
    responder: Responder | None = None
    """The cloud-wide responder (``cloud.runs.respond``)."""
    user_responders: dict[str, Responder | None] = field(default_factory=dict)
    """Per-person responders (``cloud.user(id).runs.respond``); ``None`` turns one person's off."""
    tasks: set["asyncio.Task[None]"] = field(default_factory=set)
    """Responder calls in flight."""
    failures: Failures = field(default_factory=Failures)
    """Scripted intercepts, failures and gates."""
    notices: NoticeSender | None = None
    """The run-notice sender, when the cloud was given ``run_notice``."""
    event_log: Callable[[], EventLog] | None = None
    """Makes each new run's event log; None: a plain list holding every event (an embedded cloud).
    A served cloud's store sets it: its logs keep a bounded tail in memory and read the rest back."""

    @property
    def run_log(self) -> RunLog:
        """Every run in start order, deleted ones kept (``runs.all``); ``run_log.slots`` without
        reading any back."""
        return self.runs.log

    # -- ids and tokens ------------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        """A fresh id: ``<prefix>_<serial><6 hex>`` (the hex derived from ``id_salt`` while it is set)."""
        serial = next(self.ids)
        if self.id_salt is None:
            return f"{prefix}_{serial:04d}{secrets.token_hex(3)}"
        digest = hashlib.sha256(f"{self.id_salt}\0{prefix}\0{serial}".encode()).hexdigest()
        return f"{prefix}_{serial:04d}{digest[:6]}"

    def mint_access(self, user: FakeUser, *, expired: bool = False) -> tuple[str, int]:
        """A signed access token for ``user`` and its lifetime in seconds (already expired on request)."""
        cloud = self.cloud
        self.token_serial += 1
        now = int(cloud.clock.time())
        ttl = cloud.access_token_ttl_s
        claims = {
            "iss": cloud.issuer,
            "sub": user.id,
            "aud": cloud.runtime_id,
            "client_id": cloud.client_id,
            "scope": " ".join(user.grant.scopes),
            "iat": now,
            "exp": now - 1 if expired else now + ttl,
            "jti": secrets.token_hex(8),
            "n": self.token_serial,
        }
        return self.key.sign(claims, typ=ACCESS_TOKEN_TYPE), ttl

    # -- runs ----------------------------------------------------------------------------------

    def create_run(
        self, run_id: str, user_id: str, params: dict[str, Any], key: str | None, name: str | None
    ) -> FakeRun:
        """A new run. A client-chosen id of a deleted run starts a new run under that id (as the
        deleted run's start key does); the deleted run stays in ``runs.all`` with ``deleted`` set."""
        cloud = self.cloud
        now = cloud.clock.time()
        old = self.runs.get(run_id)
        if old is not None and not old.deleted:
            raise CloudError(409, "run_exists", f"run {run_id} already exists", param="id")
        run = FakeRun(cloud, run_id, user_id, params, key, name, created_at=now, updated_at=now)
        if self.event_log is not None:
            run.events = self.event_log()
        self.runs.add(run)
        cloud.changes.announce("cloud", "run.started", run_id, user_id=user_id)
        return run

    def forget_run_keys(self, run: FakeRun) -> None:
        """Drop every idempotency key that addressed ``run`` (its start key creates a new run after)."""
        for owner in [k for k, v in self.idempotency.items() if v.run_id == run.id]:
            del self.idempotency[owner]

    def question_dto(self, run: FakeRun, question_id: str) -> dict[str, Any]:
        """A question of ``run`` as ``question.get`` answers it (``question_not_found`` when unknown)."""
        current = run.question
        if current and current.get("id") == question_id and current.get("status") == "open":
            return dict(current)  # still open: nothing answered it (read without the run's whole log)
        opened = answered = None
        for event in run.events:
            if event["type"] == "node.question.opened" and event.get("question", {}).get("id") == question_id:
                opened = event["question"]
            elif event["type"] == "node.question.answered" and event.get("question_id") == question_id:
                answered = event
        if opened is None:
            if run.question and run.question.get("id") == question_id:
                opened = run.question
            else:
                raise CloudError(404, "question_not_found", f"no question {question_id}")
        dto = dict(opened)
        if answered is not None:
            dto["status"], dto["answers"] = "answered", answered.get("answers")
        return dto

    def respond(self, run: FakeRun, kind: str, messages: list[dict[str, Any]]) -> None:
        """Call the run's responder (its person's, else the cloud's) soon after the answer is sent."""
        own = self.user_responders.get(run.user_id, UNSET)
        fn = self.responder if own is UNSET else own
        if fn is None:
            return
        ctx = ResponderContext(run, kind, messages)
        errors = self.cloud.responder_errors

        async def call() -> None:
            await asyncio.sleep(0)  # after the fake has answered
            try:
                result = fn(ctx)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                errors.append(ResponderError(run.id, kind, exc))

        task = asyncio.get_running_loop().create_task(call())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- changes -------------------------------------------------------------------------------

    def run_changed(self, run: FakeRun, event: dict[str, Any] | None) -> None:
        """Publish a run's new event (``None``: the run was deleted); owe a notice when nobody streams it."""
        changes = self.cloud.changes
        if event is None:
            changes.announce("cloud", "run.deleted", run.id, user_id=run.user_id)
            return
        changes.publish(Change("cloud", "run.event", run.id, {"event": event, "user_id": run.user_id}))
        if not run.streams:
            self.owe_notice(run)

    def runs_changed(self, run: FakeRun, events: list[dict[str, Any]]) -> None:
        """Publish a burst of a run's new events at once (``run_changed`` of each, in one publication)."""
        self.cloud.changes.publish_many(RunEvents("cloud", run.id, events, {"user_id": run.user_id}))
        if not run.streams:
            self.owe_notice(run)

    def owe_notice(self, run: FakeRun) -> None:
        """Record that ``run`` has events nobody is streaming (a no-op without ``run_notice``)."""
        if self.notices is not None:
            self.notices.owe(run)

    def grant_changed(self, user: FakeUser) -> None:
        """Publish that a person's grant changed."""
        self.cloud.changes.announce("cloud", "grant.changed", user.id)

    def grant_revoked(self, user: FakeUser, code: str) -> None:
        """End every open stream of the person's runs with a ``grant_revoked`` error frame."""
        envelope = CloudError(401, "grant_revoked", f"the grant was revoked ({code})").to_dict()
        for run in self.runs.held():  # (a run only stored has no stream open)
            if run.user_id != user.id:
                continue
            for stream in list(run.streams):
                stream.push("stream_error", envelope)
                stream.close()
