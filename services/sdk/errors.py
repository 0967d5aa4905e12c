"""The SDK's errors: one base carrying the wire's error envelope, one subclass per kind of answer.

Every non-2xx answer of the runtime or the directory carries the envelope
``{"error": {status, code, message, origin, retryable, details, param, retry_after_s}}``
(``services.wire``). ``error_from_envelope`` turns it into the matching class, chosen by status:

| status | class |
|---|---|
| 400, 422 | ``BadRequestError`` |
| 401 | ``AuthenticationError`` |
| 403 | ``PermissionDeniedError`` |
| 404 | ``NotFoundError`` |
| 409 | ``ConflictError`` |
| 426 | ``RuntimeVersionError`` |
| 429 | ``RateLimitError`` |
| 503 | ``ServiceUnavailableError`` (an ``InternalServerError``) |
| other 5xx | ``InternalServerError`` |

A request that never got an answer raises ``APIConnectionError``. A refresh the directory refuses
raises ``RefusalError`` with a ``Refusal`` attached; ``refusal_of(e)`` reads it from any error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.errors import ServiceError

__all__ = [
    "CrouterError",
    "APIConnectionError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RuntimeVersionError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "RefusalError",
    "RunNoticeError",
    "Refusal",
    "refusal_of",
    "error_from_envelope",
]


@dataclass(frozen=True, slots=True)
class Refusal:
    """The directory refused to refresh a person's connection: it is gone until they sign in again."""

    code: str
    """One of ``services.wire.REFUSAL_CODES`` (``grant_removed``, ``refresh_token_reused``, ...)."""
    user_id: str
    """The person whose stored connection was removed."""
    message: str | None = None
    """The directory's words, when it gave any."""


class CrouterError(ServiceError):
    """Any failure the SDK reports; carries the wire's error envelope fields."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        origin: str | None = None,
        retryable: bool | None = None,
        details: object = None,
        param: str | None = None,
        retry_after_s: float | None = None,
        refusal: Refusal | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.origin = origin
        self.retryable = retryable
        self.details = details
        self.param = param
        self.retry_after_s = retry_after_s
        self.refusal = refusal

    @property
    def envelope(self) -> dict[str, Any]:
        """The error as the wire's envelope body (``retry_after_s`` only when set)."""
        body: dict[str, Any] = {
            "status": self.status,
            "code": self.code,
            "message": self.message,
            "origin": self.origin,
            "retryable": self.retryable,
            "details": self.details,
            "param": self.param,
        }
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"


class APIConnectionError(CrouterError):
    """The request got no answer: the host is unreachable or the connection broke."""


class BadRequestError(CrouterError):
    """400/422: the request was malformed; ``param`` names the field when known."""


class AuthenticationError(CrouterError):
    """401: the bearer token is missing, expired, forged or the grant is revoked."""


class PermissionDeniedError(CrouterError):
    """403: the grant lacks a scope the call needs (``scope_missing``)."""


class NotFoundError(CrouterError):
    """404: no such run, question or memory document (or it is hidden from this grant)."""


class ConflictError(CrouterError):
    """409: ``run_settled``, ``idempotency_conflict`` and other state conflicts."""


class RuntimeVersionError(CrouterError):
    """426: the runtime is older than this SDK's minimum version."""


class RateLimitError(CrouterError):
    """429: too many requests."""


class InternalServerError(CrouterError):
    """A 5xx answer (or a directory outage during a token refresh)."""


class ServiceUnavailableError(InternalServerError):
    """503: the service or a provider cannot serve the call now (often retryable)."""


class RefusalError(CrouterError):
    """The directory refused a refresh; ``refusal`` says why and whose connection was removed."""


class RunNoticeError(CrouterError):
    """A run notice whose token did not verify: forged, expired, misaddressed, or keys unavailable."""


_BY_STATUS: dict[int, type[CrouterError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: BadRequestError,
    426: RuntimeVersionError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_class(status: int) -> type[CrouterError]:
    """The error class for an HTTP status."""
    found = _BY_STATUS.get(status)
    if found is not None:
        return found
    return InternalServerError if status >= 500 else CrouterError


def _as_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def error_from_envelope(
    envelope: object, status: int, *, origin: str | None = None, cls: type[CrouterError] | None = None
) -> CrouterError:
    """The error an envelope describes; tolerant of a missing or malformed envelope.

    ``status`` is the HTTP status (used when the envelope lacks one); ``origin`` is the default
    origin; ``cls`` forces a class instead of the status table.
    """
    body = envelope if isinstance(envelope, dict) else {}
    raw_status = body.get("status")
    if isinstance(raw_status, int) and not isinstance(raw_status, bool):
        status = raw_status
    code = body.get("code") if isinstance(body.get("code"), str) else None
    message = body.get("message") if isinstance(body.get("message"), str) else None
    retryable = body.get("retryable") if isinstance(body.get("retryable"), bool) else None
    kind = cls or error_class(status)
    return kind(
        message or f"HTTP {status}" + (f" ({code})" if code else ""),
        status=status,
        code=code or f"http_{status}",
        origin=body.get("origin") if isinstance(body.get("origin"), str) else origin,
        retryable=retryable,
        details=body.get("details"),
        param=body.get("param") if isinstance(body.get("param"), str) else None,
        retry_after_s=_as_float(body.get("retry_after_s")),
    )


def refusal_of(error: BaseException | None) -> Refusal | None:
    """The refusal behind an error (also through ``__cause__``), or None."""
    seen = 0
    while error is not None and seen < 8:
        refusal = getattr(error, "refusal", None)
        if isinstance(refusal, Refusal):
            return refusal
        error = error.__cause__
        seen += 1
    return None
