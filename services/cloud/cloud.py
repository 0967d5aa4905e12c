"""``FakeCloud``: a fake crouter cloud (directory and runtime) behind an httpx transport.

Options follow the seed in snake_case: ``FakeCloud(client_id, issuer='https://directory.test',
runtime_url='https://runtime.test' (or a callable of the user id), runtime_id='runtime:test',
runtime_client_id='runtime-client', runtime_version=..., stream_idle_ms=60000,
account_app_uri_template='<issuer>/account/apps/{client_id}' (None omits it), run_notice=None,
isolated_runs='available')``, plus ``clock`` (a ``services.clock.Clock``) and ``changes`` (a
``ChangeFeed`` that receives a ``Change`` for every run, event and grant change).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..changes import ChangeFeed
from ..clock import Clock
from ..wire import ACCESS_TOKEN_TYPE
from .directory import Directory, DirectoryCall
from .errors import Answer, CloudError
from .failures import Failures, Gate, InterceptContext
from .keys import SigningKey
from .notices import NoticeAttempt, NoticeSender, RunNoticeConfig
from .providers import Providers
from .runs import FakeRun, Responder, ResponderContext
from .runtime import RuntimeOps
from .transport import CallRecord, CloudTransport
from .users import UNSET, FakeUser, RunsView

__all__ = ["FakeCloud", "ResponderError"]

DEFAULT_SCOPES = ("crtr:llm", "crtr:act")


@dataclass(frozen=True)
class ResponderError:
    """A responder that threw: recorded, and nothing else fails."""

    run_id: str
    kind: str
    error: BaseException


class FakeCloud:
    """The seed's FakeCloud in Python; see the module docstring for its options."""

    def __init__(
        self,
        client_id: str,
        *,
        issuer: str = "https://directory.test",
        runtime_url: str | Callable[[str], str] = "https://runtime.test",
        runtime_id: str = "runtime:test",
        runtime_client_id: str = "runtime-client",
        runtime_version: str = "1.4.0",
        stream_idle_ms: int = 60_000,
        account_app_uri_template: str | None = UNSET,
        run_notice: RunNoticeConfig | dict[str, Any] | None = None,
        isolated_runs: str = "available",
        access_token_ttl_s: int = 3600,
        clock: Clock | None = None,
        changes: ChangeFeed | None = None,
    ) -> None:
        if isolated_runs not in ("available", "unavailable"):
            raise ValueError("isolated_runs must be 'available' or 'unavailable'")
        self.client_id = client_id
        self.issuer = issuer.rstrip("/")
        self.runtime_url = runtime_url
        self.runtime_id = runtime_id
        self.runtime_client_id = runtime_client_id
        self.runtime_version = runtime_version
        self.stream_idle_ms = stream_idle_ms
        self.account_app_uri_template = (
            f"{self.issuer}/account/apps/{{client_id}}" if account_app_uri_template is UNSET else account_app_uri_template
        )
        self.isolated_runs = isolated_runs
        self.access_token_ttl_s = access_token_ttl_s
        self.clock = clock or Clock()
        self.changes = changes or ChangeFeed()
        self.profiles: list[dict[str, Any]] = [
            {"name": "default", "description": "The runtime's default profile"},
        ]
        self.calls: list[CallRecord] = []
        self.directory_calls: list[DirectoryCall] = []
        self.refreshes: list[DirectoryCall] = []
        self.responder_errors: list[ResponderError] = []
        self.providers = Providers()
        self.runs = RunsView(self, None)
        self.transport = CloudTransport(self)
        self._key = SigningKey()
        self._directory = Directory(self)
        self._ops = RuntimeOps(self)
        self._failures = Failures()
        self._users: dict[str, FakeUser] = {}
        self._runs: dict[str, FakeRun] = {}
        """The current run of each id (a deleted one until its id is started again)."""
        self._run_log: list[FakeRun] = []
        """Every run in start order, deleted ones kept (``runs.all``)."""
        self._questions: dict[str, FakeRun] = {}
        self._refresh_tokens: dict[str, str] = {}
        self._responder: Responder | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self._token_serial = 0
        if isinstance(run_notice, dict):
            run_notice = RunNoticeConfig(**run_notice)
        self._notices = NoticeSender(self, run_notice) if run_notice is not None else None

    # -- the seed's surface ------------------------------------------------------------------

    @staticmethod
    def error(
        status: int,
        code: str,
        message: str | None = None,
        *,
        origin: str = "runtime",
        retryable: bool | None = None,
        details: Any = None,
        param: str | None = None,
        retry_after_s: float | None = None,
    ) -> CloudError:
        """An error envelope to raise from a provider handler or to script as an answer."""
        return CloudError(status, code, message, origin, retryable, details, param, retry_after_s)

    def user(self, user_id: str) -> FakeUser:
        """The person with this id (created on first use, without a grant)."""
        user = self._users.get(user_id)
        if user is None:
            user = self._users[user_id] = FakeUser(self, user_id)
        return user

    async def connect(
        self,
        store: Any,
        user_id: str,
        *,
        scopes: list[str] | None = None,
        dependencies: list[dict[str, Any]] | None = None,
    ) -> Any:
        """Make the person's grant active and save a ``Connection`` whose access token has expired."""
        from ..sdk import Connection

        user = self.user(user_id)
        resolved = list(scopes) if scopes is not None else list(DEFAULT_SCOPES)
        if user.grant.state is None:
            user.grant._create(resolved, dependencies)
        else:
            user.grant.restore({"resolved_scopes": resolved, "dependencies": [
                {"provider": d["provider"], "state": d.get("state", "ready"), "message": d.get("message")}
                for d in (dependencies or [])
            ]})
        refresh = "rt_" + secrets.token_urlsafe(24)
        user.refresh_token, user.superseded, user.family_revoked = refresh, set(), False
        self._refresh_tokens[refresh] = user.id
        access, _ = self._mint_access(user, expired=True)
        connection = Connection(
            user_id=user.id,
            access_token=access,
            refresh_token=refresh,
            expires_at=self.clock.time() - 1,
            scope=resolved,
            runtime_url=self.runtime_url_for(user.id),
            runtime_id=self.runtime_id,
        )
        await store.save(connection)
        return connection

    def crouter(self, user_id: str, **options: Any) -> Any:
        """A real ``Crouter`` on this person's runtime with a fresh token and no refresh."""
        from ..sdk import Crouter

        access, _ = self._mint_access(self.user(user_id))
        return Crouter(runtime_url=self.runtime_url_for(user_id), token=access, transport=self.transport, **options)

    def intercept(
        self, op: str, fn: Callable[[InterceptContext], Any], *, user: str | None = None, times: float = math.inf
    ) -> Callable[[], None]:
        """Run ``fn`` before matching operations; it may await, act, or return an answer. Returns a remover."""
        return self._failures.intercept(op, fn, user=user, times=times)

    def fail_next(self, op: str, answer: Answer, *, user: str | None = None, times: float = 1) -> Callable[[], None]:
        """Answer the next ``times`` matching requests with ``answer``. Returns a remover."""
        return self._failures.fail_next(op, answer, user=user, times=times)

    def gate(self, op: str, *, user: str | None = None) -> Gate:
        """Hold every matching request until the returned gate's ``release()``."""
        return self._failures.gate(op, user=user)

    def trust_client_key(self, private_key_pem: str) -> None:
        """Accept client assertions signed with this key too, without pinning it (see ``Directory``)."""
        self._directory.trust_client_key(private_key_pem)

    @property
    def people(self) -> list[str]:
        """The id of every person the cloud knows, in the order it met them."""
        return list(self._users)

    @property
    def notices(self) -> list[NoticeAttempt]:
        """Every run-notice attempt, with its decoded claims and the route's status."""
        return self._notices.attempts if self._notices is not None else []

    async def refusal_error(self, code: str) -> Exception:
        """The exact error the SDK raises when a refresh is refused with ``code``."""
        from ..sdk import MemoryConnectionStore, OAuth2Client
        from .keys import generate_private_key_pem

        probe = FakeCloud(self.client_id, issuer=self.issuer, runtime_url=self.runtime_url, runtime_id=self.runtime_id)
        store = MemoryConnectionStore()
        user_id = "user:refusal-probe"
        await probe.connect(store, user_id)
        probe.user(user_id).refuse(code)
        oauth = OAuth2Client(
            client_id=self.client_id,
            issuer=probe.issuer,
            transport=probe.transport,
            private_key=generate_private_key_pem("ec"),
            redirect_uri="https://app.test/callback",
            store=store,
        )
        try:
            client = await oauth.client(user_id)
            await client.grant.get()
        except Exception as exc:  # the value under test
            return exc
        finally:
            await oauth.aclose()
        raise RuntimeError(f"a refresh refused with {code!r} did not raise")

    def reset(self) -> None:
        """Clear runs, calls, intercepts, responders, memory, idempotency keys and notices; keep grants."""
        for run in list(self._runs.values()):
            for stream in list(run.streams):
                stream.close()
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        self._runs.clear()
        self._run_log.clear()
        self._questions.clear()
        self.calls.clear()
        self.directory_calls.clear()
        self.refreshes.clear()
        self.responder_errors.clear()
        self._failures.clear()
        self._responder = None
        self._ops.keys.clear()
        for user in self._users.values():
            user._responder = UNSET
            user.memory.documents.clear()
            user.reads.clear()
        if self._notices is not None:
            self._notices.reset()

    async def settle_tasks(self) -> None:
        """Wait for every responder and notice send in flight (handy in tests and demos)."""
        while True:
            tasks = [t for t in self._tasks if not t.done()]
            if not tasks:
                break
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._notices is not None:
            await self._notices.drain()

    def runtime_url_for(self, user_id: str) -> str:
        """The runtime URL of this person (the option, or its value for them)."""
        url = self.runtime_url(user_id) if callable(self.runtime_url) else self.runtime_url
        return url.rstrip("/")

    # -- internals used by the parts -----------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}{secrets.token_hex(3)}"

    def _mint_access(self, user: FakeUser, *, expired: bool = False) -> tuple[str, int]:
        self._token_serial += 1
        now = int(self.clock.time())
        ttl = self.access_token_ttl_s
        claims = {
            "iss": self.issuer,
            "sub": user.id,
            "aud": self.runtime_id,
            "client_id": self.client_id,
            "scope": " ".join(user.grant.scopes),
            "iat": now,
            "exp": now - 1 if expired else now + ttl,
            "jti": secrets.token_hex(8),
            "n": self._token_serial,
        }
        return self._key.sign(claims, typ=ACCESS_TOKEN_TYPE), ttl

    def _create_run(
        self, run_id: str, user_id: str, params: dict[str, Any], key: str | None, name: str | None
    ) -> FakeRun:
        """A new run. A client-chosen id of a deleted run starts a new run under that id (as the
        deleted run's start key does); the deleted run stays in ``runs.all`` with ``deleted`` set."""
        now = self.clock.time()
        old = self._runs.get(run_id)
        if old is not None and not old.deleted:
            raise CloudError(409, "run_exists", f"run {run_id} already exists", param="id")
        run = FakeRun(self, run_id, user_id, params, key, name, created_at=now, updated_at=now)
        self._runs[run_id] = run
        self._run_log.append(run)
        self.changes.emit("cloud", "run.started", run_id, user_id=user_id)
        return run

    def _forget_run_keys(self, run: FakeRun) -> None:
        self._ops.forget_run(run)

    def _question_dto(self, run: FakeRun, question_id: str) -> dict[str, Any]:
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

    def _respond(self, run: FakeRun, kind: str, messages: list[dict[str, Any]]) -> None:
        user = self.user(run.user_id)
        fn = self._responder if user._responder is UNSET else user._responder
        if fn is None:
            return
        ctx = ResponderContext(run, kind, messages)

        async def call() -> None:
            await asyncio.sleep(0)  # after the fake has answered
            try:
                result = fn(ctx)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.responder_errors.append(ResponderError(run.id, kind, exc))

        task = asyncio.get_running_loop().create_task(call())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run_changed(self, run: FakeRun, event: dict[str, Any] | None) -> None:
        if event is None:
            self.changes.emit("cloud", "run.deleted", run.id, user_id=run.user_id)
            return
        self.changes.emit("cloud", "run.event", run.id, event=event, user_id=run.user_id)
        if not run.streams:
            self._owe_notice(run)

    def _owe_notice(self, run: FakeRun) -> None:
        if self._notices is not None:
            self._notices.owe(run)

    def _grant_changed(self, user: FakeUser) -> None:
        self.changes.emit("cloud", "grant.changed", user.id)

    def _grant_revoked(self, user: FakeUser, code: str) -> None:
        envelope = CloudError(401, "grant_revoked", f"the grant was revoked ({code})").to_dict()
        for run in self._runs.values():
            if run.user_id != user.id:
                continue
            for stream in list(run.streams):
                stream.push("stream_error", envelope)
                stream.close()

    def __repr__(self) -> str:
        return f"FakeCloud(client_id={self.client_id!r}, issuer={self.issuer!r}, runs={len(self._run_log)})"
