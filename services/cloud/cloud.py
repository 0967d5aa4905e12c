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
import contextlib
import math
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..changes import ChangeFeed
from ..clock import Clock
from .directory import Directory
from .limits import DEFAULT_LIMITS
from .errors import Answer, CloudError, failure_answer
from .failures import Gate, InterceptContext
from .notices import NoticeAttempt, NoticeSender, RunNoticeConfig
from .providers import Providers
from .runtime import RuntimeOps
from .records import UNSET, CallRecord, DirectoryCall
from .shared import CloudState, ResponderError
from .transport import CloudTransport
from .users import FakeUser, FakeRuns

if TYPE_CHECKING:  # the SDK sits below the cloud: named for types, imported where used
    from ..sdk import Connection, ConnectionStore, Crouter

__all__ = ["FakeCloud", "ResponderError"]

DEFAULT_SCOPES = ("crtr:llm", "crtr:act")


class FakeCloud:
    """The seed's FakeCloud in Python; see the module docstring for its options.

    Its state lives in one ``CloudState`` (``state``) that every part of the cloud shares."""

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
        self.profiles: list[dict[str, str]] = [
            {"name": "default", "description": "The runtime's default profile"},
        ]
        self.limits = DEFAULT_LIMITS
        """What the runtime accepts at most (``limits.Limits``); a served cloud's are its server's."""
        self.calls: list[CallRecord] = []
        self.directory_calls: list[DirectoryCall] = []
        self.refreshes: list[DirectoryCall] = []
        self.responder_errors: list[ResponderError] = []
        self.providers = Providers()
        self.runs = FakeRuns(self, None)
        self.state = CloudState(self)
        """The state every part of this cloud shares (``services.cloud.shared``)."""
        if isinstance(run_notice, dict):
            run_notice = RunNoticeConfig(**run_notice)
        if run_notice is not None:
            self.state.notices = NoticeSender(self, run_notice)
        self._directory = Directory(self)
        self.transport = CloudTransport(self, self._directory, RuntimeOps(self))

    # -- the seed's surface ------------------------------------------------------------------

    @staticmethod
    def error(
        status: int,
        code: str,
        message: str | None = None,
        *,
        origin: str = "runtime",
        retryable: bool | None = None,
        details: object = None,
        param: str | None = None,
        retry_after_s: float | None = None,
    ) -> CloudError:
        """An error envelope to raise from a provider handler or to script as an answer."""
        return CloudError(status, code, message, origin, retryable, details, param, retry_after_s)

    def user(self, user_id: str) -> FakeUser:
        """The person with this id (created on first use, without a grant)."""
        users = self.state.users
        user = users.get(user_id)
        if user is None:
            user = users[user_id] = FakeUser(self, user_id)
        return user

    async def connect(
        self,
        store: "ConnectionStore",
        user_id: str,
        *,
        scopes: list[str] | None = None,
        dependencies: list[dict[str, Any]] | None = None,
    ) -> "Connection":
        """Make the person's grant active and save a ``Connection`` whose access token has expired."""
        from ..sdk import Connection

        user = self.user(user_id)
        resolved = list(scopes) if scopes is not None else list(DEFAULT_SCOPES)
        if user.grant.state is None:
            user.grant.create(resolved, dependencies)
        else:
            user.grant.restore({"resolved_scopes": resolved, "dependencies": [
                {"provider": d["provider"], "state": d.get("state", "ready"), "message": d.get("message")}
                for d in (dependencies or [])
            ]})
        refresh = "rt_" + secrets.token_urlsafe(24)
        user.refresh_token, user.superseded, user.family_revoked = refresh, set(), False
        self.state.refresh_tokens[refresh] = user.id
        access, _ = self.state.mint_access(user, expired=True)
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

    def crouter(self, user_id: str, **options: Any) -> "Crouter":
        """A real ``Crouter`` on this person's runtime with a fresh token and no refresh."""
        from ..sdk import Crouter

        access, _ = self.state.mint_access(self.user(user_id))
        return Crouter(runtime_url=self.runtime_url_for(user_id), token=access, transport=self.transport, **options)

    def intercept(
        self, op: str, fn: Callable[[InterceptContext], object], *, user: str | None = None, times: float = math.inf
    ) -> Callable[[], None]:
        """Run ``fn`` before matching operations; it may await, act, or return an answer. Returns a remover."""
        return self.state.failures.intercept(op, fn, user=user, times=times)

    def fail_next(self, op: str, answer: Answer, *, user: str | None = None, times: float = 1) -> Callable[[], None]:
        """Answer the next ``times`` matching requests with ``answer``. Returns a remover.

        Every scripted failure, however it was asked for (here, the control API in this process or over
        HTTP), is published as a ``failure.armed`` change: ``{op, answer, user, times}`` as the control
        API's ``POST /fail_next`` takes them (an envelope as ``{status, code, ...}``; ``times`` null:
        always), so a recording keeps it where it was armed."""
        remover = self.state.failures.fail_next(op, answer, user=user, times=times)
        self.changes.announce("cloud", "failure.armed", op, op=op, answer=failure_answer(answer), user=user,
                              times=None if math.isinf(times) else int(times) if float(times).is_integer() else times)
        return remover

    def gate(self, op: str, *, user: str | None = None) -> Gate:
        """Hold every matching request until the returned gate's ``release()``."""
        return self.state.failures.gate(op, user=user)

    @contextlib.contextmanager
    def replayable_ids(self, salt: str) -> Iterator[None]:
        """Within the block, ids (messages, questions, turns, ...) are derived from ``salt`` and their
        serial rather than drawn at random: the same script replayed on a fresh cloud makes the same
        ids (a world seeded again on each launch of an in-memory cloud files no message twice)."""
        previous, self.state.id_salt = self.state.id_salt, salt
        try:
            yield
        finally:
            self.state.id_salt = previous

    def trust_client_key(self, private_key_pem: str) -> None:
        """Accept client assertions signed with this key too, without pinning it (see ``Directory``)."""
        self._directory.trust_client_key(private_key_pem)

    @property
    def people(self) -> list[str]:
        """The id of every person the cloud knows, in the order it met them."""
        return list(self.state.users)

    @property
    def notices(self) -> list[NoticeAttempt]:
        """Every run-notice attempt, with its decoded claims and the route's status."""
        notices = self.state.notices
        return notices.attempts if notices is not None else []

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
        state = self.state
        for run in list(state.runs.held()):
            for stream in list(run.streams):
                stream.close()
        for task in list(state.tasks):
            task.cancel()
        state.tasks.clear()
        state.runs.clear()
        state.run_log.clear()
        state.questions.clear()
        self.calls.clear()
        self.directory_calls.clear()
        self.refreshes.clear()
        self.responder_errors.clear()
        state.failures.clear()
        state.responder = None
        state.idempotency.clear()
        state.user_responders.clear()
        for user in state.users.values():
            user.memory.documents.clear()
            user.reads.clear()
        if state.notices is not None:
            state.notices.reset()

    async def settle_tasks(self) -> None:
        """Wait for every responder and notice send in flight (handy in tests and demos)."""
        while True:
            tasks = [t for t in self.state.tasks if not t.done()]
            if not tasks:
                break
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.state.notices is not None:
            await self.state.notices.drain()

    def runtime_url_for(self, user_id: str) -> str:
        """The runtime URL of this person (the option, or its value for them)."""
        url = self.runtime_url(user_id) if callable(self.runtime_url) else self.runtime_url
        return url.rstrip("/")

    def __repr__(self) -> str:
        return f"FakeCloud(client_id={self.client_id!r}, issuer={self.issuer!r}, runs={len(self.state.run_log)})"
