"""OKF errors: every refusal names what was wrong and carries the OKF error code (``E_JUDGMENT`` ...).

The codes are OKF's own (``E_JUDGMENT E_EXCLUSION E_OWNER E_BASELINE E_CONFIRM E_RECOVERY
E_VALIDATION E_VIEW E_PATH E_RUN E_SOURCE E_INPUT E_CAPTURE E_CONFIG E_INDEX``); the message is
meant for the operator and is shown after sanitising. ``remedy``, when set, says in plain words
what the operator can do about it (which file to put back or move aside, what to retry).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ServiceError
from ...files import PathError

__all__ = [
    "OkfError",
    "OkfConfigError",
    "OkfPathError",
    "OkfValidationError",
    "BaselineError",
    "ConfirmError",
    "RecoveryError",
    "PublicationInterrupted",
    "ViewError",
    "CaptureError",
    "RunStateError",
    "SourceError",
]


class OkfError(ServiceError):
    """A refused OKF operation; ``code`` is the OKF error code."""

    code: str = "E_OKF"
    """The OKF error code this class of failure carries."""

    def __init__(self, message: str, *, code: str | None = None, remedy: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.detail = message
        self.remedy = remedy
        """What the operator can do about it, or None."""
        super().__init__(f"{self.code}: {message}")


class OkfConfigError(OkfError):
    """A bindings file, soul declaration or base descriptor that is missing or malformed."""

    code = "E_CONFIG"


class OkfPathError(OkfError, PathError):
    """A path that escapes its base, is a link, overlaps another store or sits inside Git."""

    code = "E_PATH"


class OkfValidationError(OkfError):
    """A bundle that fails OKF validation; ``findings`` lists every problem."""

    code = "E_VALIDATION"

    def __init__(self, message: str, findings: Sequence[object] | None = None) -> None:
        self.findings = list(findings or [])
        super().__init__(message)


class BaselineError(OkfError):
    """The accepted base changed since the judgment was staged: nothing was written."""

    code = "E_BASELINE"


class ConfirmError(OkfError):
    """A proposal that is not the one validated (its hash differs), or a publication whose result
    does not equal the proposal's after-state."""

    code = "E_CONFIRM"


class RecoveryError(OkfError):
    """A pending publication journal (or an inconsistent receipt) that must recover first."""

    code = "E_RECOVERY"


class PublicationInterrupted(RecoveryError):
    """A publication that stopped after its journal was written (an OS error mid-way): recover it."""


class ViewError(OkfError):
    """A knowledge view that cannot be published (its target already exists)."""

    code = "E_VIEW"


class CaptureError(OkfError):
    """A capture that failed closed: nothing was recorded and the home keeps everything."""

    code = "E_CAPTURE"


class RunStateError(OkfError):
    """An operation the judgment's current state does not allow (e.g. approving it twice)."""

    code = "E_RUN"


class SourceError(OkfError):
    """An unknown or unusable source."""

    code = "E_SOURCE"
