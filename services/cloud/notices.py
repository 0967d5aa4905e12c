"""Run notices: the runtime's pokes to the app that a run has events nobody is streaming.

Rules (the seed's): a notice is owed when an event is appended with no ``run.events`` stream open,
or when the last stream closes with events unread; a burst coalesces into one; up to three
attempts; a 401 re-mints the token once; a 5xx, a thrown ``deliver`` or no answer within the
timeout is retried; any other status ends the send. A run whose person has no active grant is
owed nothing. Every attempt is recorded in ``cloud.notices``.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from ..clock import Clock
from ..wire import NOTICE_TOKEN_TYPE
from .keys import SigningKey
from .runs import FakeRun

__all__ = ["RunNoticeConfig", "NoticeAttempt", "NoticeSender", "NoticeHost"]


class _Grant(Protocol):
    @property
    def active(self) -> bool: ...


class _Person(Protocol):
    @property
    def grant(self) -> _Grant: ...


class _Keys(Protocol):
    @property
    def key(self) -> SigningKey: ...


class NoticeHost(Protocol):
    """What the notice sender needs of its cloud (``FakeCloud`` is one)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def issuer(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    @property
    def runtime_id(self) -> str: ...

    @property
    def state(self) -> _Keys: ...

    def user(self, user_id: str) -> _Person: ...


@dataclass
class RunNoticeConfig:
    """Where notices go and the runtime's timing (waits default to 0 so tests stay fast)."""

    url: str
    deliver: Callable[[httpx.Request], object]
    """The app's route: takes the request, returns an ``httpx.Response`` or a status (may be async)."""
    retry_waits_ms: tuple[int, int] = (0, 0)
    ack_gap_ms: int = 0
    fail_gap_ms: int = 0
    timeout_ms: int = 10_000


@dataclass(frozen=True)
class NoticeAttempt:
    """One delivery attempt: the run, the decoded claims, and the route's status (or the error)."""

    run_id: str
    user_id: str
    attempt: int
    claims: dict[str, Any]
    status: int | None
    error: str | None
    at: float


@dataclass
class _RunNoticeState:
    task: asyncio.Task[None] | None = None
    next_allowed: float = 0.0


@dataclass
class NoticeSender:
    """Owes, coalesces and sends the notices of one cloud."""

    cloud: NoticeHost
    config: RunNoticeConfig
    attempts: list[NoticeAttempt] = field(default_factory=list)
    _state: dict[str, _RunNoticeState] = field(default_factory=dict)

    def owe(self, run: FakeRun) -> None:
        """Record that ``run`` is owed a notice; starts or extends its send."""
        if not self.cloud.user(run.user_id).grant.active or run.deleted:
            return
        state = self._state.setdefault(run.id, _RunNoticeState())
        if state.task is not None and not state.task.done():
            return  # coalesced: the send in flight goes on while newer events remain unsent
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to send from; the next event appended from a loop owes it again
        state.task = loop.create_task(self._send(run, state))

    def mint(self, run: FakeRun) -> tuple[str, dict[str, Any]]:
        """A notice token for ``run`` at its current cursor, with its claims."""
        now = int(self.cloud.clock.time())
        claims = {
            "iss": self.cloud.issuer,
            "aud": self.config.url,
            "sub": run.user_id,
            "grantee": f"app:{self.cloud.client_id}",
            "run_id": run.id,
            "runtime_id": self.cloud.runtime_id,
            "seq": run.seq,
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_hex(8),
        }
        return self.cloud.state.key.sign(claims, typ=NOTICE_TOKEN_TYPE), claims

    async def _send(self, run: FakeRun, state: _RunNoticeState) -> None:
        clock = self.cloud.clock
        while True:
            wait = state.next_allowed - clock.time()
            if wait > 0:
                await clock.sleep(wait)
            await asyncio.sleep(0)  # let a synchronous burst finish appending
            sent_seq = run.seq
            ok = await self._attempts(run)
            gap = self.config.ack_gap_ms if ok else self.config.fail_gap_ms
            state.next_allowed = clock.time() + gap / 1000
            if run.seq <= sent_seq or run.streams or run.deleted:
                return

    async def _attempts(self, run: FakeRun) -> bool:
        token, claims = self.mint(run)
        reminted = False
        waits = list(self.config.retry_waits_ms)
        for attempt in range(1, 4):
            if not self.cloud.user(run.user_id).grant.active:
                return False
            status, error = await self._deliver(run, token)
            self.attempts.append(
                NoticeAttempt(run.id, run.user_id, attempt, dict(claims), status, error, self.cloud.clock.time())
            )
            if status is not None and 200 <= status < 300:
                return True
            if status == 401 and not reminted:
                reminted = True
                token, claims = self.mint(run)
                continue
            if status is not None and status < 500 and status != 401:
                return False
            if status == 401:
                return False
            if attempt < 3:
                wait_ms = waits[min(attempt - 1, len(waits) - 1)] if waits else 0
                if wait_ms:
                    await self.cloud.clock.sleep(wait_ms / 1000)
        return False

    async def _deliver(self, run: FakeRun, token: str) -> tuple[int | None, str | None]:
        request = httpx.Request(
            "POST",
            self.config.url,
            headers={"Authorization": f"Bearer {token}"},
            json={"run_id": run.id, "seq": run.seq},
        )
        try:
            answer = self.config.deliver(request)
            if inspect.isawaitable(answer):
                answer = await asyncio.wait_for(answer, self.config.timeout_ms / 1000)
        except asyncio.TimeoutError:
            return None, "timeout"
        except Exception as exc:  # the app's route threw: retried, recorded
            return None, f"{type(exc).__name__}: {exc}"
        if isinstance(answer, httpx.Response):
            return answer.status_code, None
        if isinstance(answer, int):
            return answer, None
        return 200, None

    async def drain(self) -> None:
        """Wait until every notice send in flight has finished."""
        while True:
            tasks = [s.task for s in self._state.values() if s.task is not None and not s.task.done()]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    def reset(self) -> None:
        for state in self._state.values():
            if state.task is not None and not state.task.done():
                state.task.cancel()
        self._state.clear()
        self.attempts.clear()
