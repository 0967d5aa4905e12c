"""Error envelopes the fake answers with, and the scripted answers a test can give an operation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

import httpx

__all__ = ["CloudError", "Answer", "envelope", "error_response", "default_code", "failure_answer"]

_DEFAULT_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    422: "unprocessable",
    426: "runtime_version_unsupported",
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}


def default_code(status: int) -> str:
    """The code a bare status number answers with."""
    return _DEFAULT_CODES.get(status, "internal_error" if status >= 500 else "error")


@dataclass
class CloudError(Exception):
    """An error envelope: raised by handlers (``FakeCloud.error(...)``) or scripted as an answer."""

    status: int
    code: str
    message: str | None = None
    origin: str = "runtime"
    retryable: bool | None = None
    details: Any = None
    param: str | None = None
    retry_after_s: float | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.retryable is None:
            self.retryable = self.status == 503
        if self.message is None:
            self.message = self.code.replace("_", " ")
        Exception.__init__(self, f"{self.status} {self.code}: {self.message}")

    def to_dict(self) -> dict[str, Any]:
        """The envelope body (``{"error": {...}}``)."""
        return envelope(
            self.status,
            self.code,
            self.message,
            origin=self.origin,
            retryable=bool(self.retryable),
            details=self.details,
            param=self.param,
            retry_after_s=self.retry_after_s,
        )

    def response(self) -> httpx.Response:
        """This envelope as an HTTP answer."""
        return httpx.Response(self.status, json=self.to_dict(), headers=self.headers)


Answer = Union[int, Literal["unreachable"], CloudError]
"""What a scripted failure answers: a status number, ``'unreachable'``, or an envelope."""


def envelope(
    status: int,
    code: str,
    message: str | None = None,
    *,
    origin: str = "runtime",
    retryable: bool = False,
    details: object = None,
    param: str | None = None,
    retry_after_s: float | None = None,
) -> dict[str, object]:
    """The JSON error envelope of the wire (``services.wire``)."""
    body: dict[str, object] = {
        "status": status,
        "code": code,
        "message": message if message is not None else code.replace("_", " "),
        "origin": origin,
        "retryable": retryable,
        "details": details,
        "param": param,
    }
    if retry_after_s is not None:
        body["retry_after_s"] = retry_after_s
    return {"error": body}


def error_response(
    status: int, code: str | None = None, message: str | None = None, **fields: Any
) -> httpx.Response:
    """An HTTP answer carrying an envelope."""
    return CloudError(status, code or default_code(status), message, **fields).response()


def failure_answer(answer: object) -> object:
    """A scripted answer as JSON, as the control API's ``POST /fail_next`` takes it: a status number,
    ``"unreachable"``, or an envelope's ``{status, code, message, origin, retryable, details, param,
    retry_after_s}``."""
    if isinstance(answer, CloudError):
        return {"status": answer.status, "code": answer.code, "message": answer.message, "origin": answer.origin,
                "retryable": answer.retryable, "details": answer.details, "param": answer.param,
                "retry_after_s": answer.retry_after_s}
    return answer
