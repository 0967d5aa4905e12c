"""What a fake cloud records of the requests it answers, and the ``UNSET`` sentinel.

These sit below every other part of the cloud: the transport and the directory append the
records, the cloud lists them (``cloud.calls``, ``cloud.directory_calls``), and nothing here
imports another part of the cloud.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["CallRecord", "DirectoryCall", "UNSET"]


class _Unset:
    """The type of ``UNSET``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final[Any] = _Unset()
"""A value that was never set (distinct from ``None``, which sets "nothing"): a per-person
responder never set, an option left at its default. Typed ``Any`` on purpose: it stands in for a
parameter of any type as its default."""


@dataclass
class CallRecord:
    """One runtime request as the seed's ``cloud.calls`` lists it."""

    user_id: str | None
    op: str | None
    run_id: str | None
    question_id: str | None
    method: str
    path: str
    query: dict[str, str]
    body: Any
    """The request's decoded JSON body (any JSON value), or None."""
    idempotency_key: str | None
    status: int | None
    at: float


@dataclass
class DirectoryCall:
    """One directory request: the op, who it was for (token calls), and its ``answer``."""

    op: str
    method: str
    path: str
    user_id: str | None
    answer: str
    """``ok``, a refusal code, a status number as text, or ``unreachable``."""
    status: int | None
    at: float
