"""The Python crouter SDK: an app's production path to people's runtimes.

``OAuth2Client`` keeps each person's ``Connection`` (in a ``ConnectionStore``) fresh through the
directory and builds ``Crouter`` clients; ``Crouter`` exposes runs, questions, memory, grant,
providers and profiles with the retry table of ``services.sdk.http``; ``RunStream`` and
``RunReply`` read a run's event stream; ``verify_run_notice`` checks run notices;
``forward_run_events`` relays a run's events. The wire it speaks is ``services.wire``.
"""

from .crouter import Crouter
from .errors import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    CrouterError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    Refusal,
    RefusalError,
    RunNoticeError,
    RuntimeVersionError,
    ServiceUnavailableError,
    error_from_envelope,
    refusal_of,
)
from .models import Connection, ReplyResult, Run, RunEvent
from .notices import verify_run_notice
from .oauth import OAuth2Client
from .sse import SSEEvent, SSEParser
from .stores import ConnectionStore, MemoryConnectionStore, SQLModelConnectionStore
from .streams import RunReply, RunStream, forward_run_events

__all__ = [
    "OAuth2Client",
    "Crouter",
    "Connection",
    "ConnectionStore",
    "MemoryConnectionStore",
    "SQLModelConnectionStore",
    "Run",
    "RunEvent",
    "RunReply",
    "ReplyResult",
    "RunStream",
    "SSEEvent",
    "SSEParser",
    "forward_run_events",
    "verify_run_notice",
    "Refusal",
    "refusal_of",
    "error_from_envelope",
    "CrouterError",
    "APIConnectionError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RefusalError",
    "RunNoticeError",
    "RuntimeVersionError",
    "ServiceUnavailableError",
]
