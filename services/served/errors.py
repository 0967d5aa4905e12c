"""The one error of the control API: a call refused with a status, a code and a message.

The server raises it in a route and answers it as ``{"error": {"code", "message"}}`` with its status;
the client (``services.attached.RemoteCloud``) raises it again from that answer, so a refusal reads the
same on both sides of the wire, and in a desk that answers control calls in its own process.
"""

from __future__ import annotations

from ..errors import ServiceError

__all__ = ["ControlError"]


class ControlError(ServiceError):
    """A control call the served cloud refused (``status``, ``code``, ``message``)."""

    def __init__(self, status: int, code: str, message: str, *, param: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" if message else f"{status} {code}")
        self.status, self.code, self.message = status, code, message
        self.param = param
        """The request field the refusal is about, when there is one."""
