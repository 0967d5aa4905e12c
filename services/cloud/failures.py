"""Scripted failures and gates: ``intercept``, ``fail_next`` and ``gate`` for runtime and directory ops."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import Answer, CloudError, default_code

__all__ = ["InterceptContext", "Intercept", "Gate", "Failures", "DIRECTORY_OPS", "answer_error"]

DIRECTORY_OPS = ("directory.discovery", "directory.token", "directory.jwks")


@dataclass(frozen=True)
class InterceptContext:
    """What an intercept sees of the request it runs before."""

    op: str
    user_id: str | None
    method: str
    path: str
    query: dict[str, str]
    body: Any
    run_id: str | None


@dataclass
class Intercept:
    """One scripted interception; ``times`` may be ``math.inf``."""

    op: str
    fn: Callable[[InterceptContext], object]
    user: str | None
    times: float
    used: int = 0

    def matches(self, op: str, user_id: str | None) -> bool:
        if self.used >= self.times:
            return False
        if self.user is not None and self.user != user_id:
            return False
        if self.op == op:
            return True
        return self.op == "*" and op not in DIRECTORY_OPS


@dataclass
class Gate:
    """Holds every matching request until ``release()``."""

    op: str
    user: str | None
    _event: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0

    def release(self) -> None:
        """Let every held and future matching request through."""
        self._event.set()

    @property
    def released(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        self.held += 1
        try:
            await self._event.wait()
        finally:
            self.held -= 1


def answer_error(answer: object, op: str) -> CloudError | str:
    """A scripted answer as the envelope it produces (or ``'unreachable'``)."""
    if answer == "unreachable":
        return "unreachable"
    if isinstance(answer, CloudError):
        return answer
    if isinstance(answer, int) and not isinstance(answer, bool):
        if op in DIRECTORY_OPS:
            return CloudError(answer, default_code(answer), origin="directory", retryable=False)
        return CloudError(answer, default_code(answer), retryable=False)
    raise TypeError(f"an answer is a status number, 'unreachable' or FakeCloud.error(...), not {answer!r}")


class Failures:
    """The intercepts and gates of one cloud."""

    def __init__(self) -> None:
        self.intercepts: list[Intercept] = []
        self.gates: list[Gate] = []

    def intercept(
        self, op: str, fn: Callable[[InterceptContext], object], *, user: str | None = None, times: float = math.inf
    ) -> Callable[[], None]:
        entry = Intercept(op, fn, user, times)
        self.intercepts.append(entry)
        return lambda: self.intercepts.remove(entry) if entry in self.intercepts else None

    def fail_next(self, op: str, answer: Answer, *, user: str | None = None, times: float = 1) -> Callable[[], None]:
        if op in DIRECTORY_OPS and isinstance(answer, CloudError):
            raise ValueError(f"{op} cannot answer an envelope; use a status, 'unreachable' or user.refuse(code)")
        answer_error(answer, op)  # validate now, not at request time
        return self.intercept(op, lambda ctx: answer, user=user, times=times)

    def gate(self, op: str, *, user: str | None = None) -> Gate:
        gate = Gate(op, user)
        self.gates.append(gate)
        return gate

    async def run(self, ctx: InterceptContext) -> CloudError | str | None:
        """Hold at matching gates, then run matching intercepts; the first answer wins."""
        for gate in list(self.gates):
            if gate.released:
                continue
            if (gate.op == ctx.op or (gate.op == "*" and ctx.op not in DIRECTORY_OPS)) and (
                gate.user is None or gate.user == ctx.user_id
            ):
                await gate.wait()
        for entry in list(self.intercepts):
            if not entry.matches(ctx.op, ctx.user_id):
                continue
            entry.used += 1
            answer = entry.fn(ctx)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                if ctx.op in DIRECTORY_OPS and isinstance(answer, CloudError):
                    raise ValueError(f"{ctx.op} cannot answer an envelope")
                return answer_error(answer, ctx.op)
        return None

    def clear(self) -> None:
        for gate in self.gates:
            gate.release()
        self.intercepts.clear()
        self.gates.clear()
