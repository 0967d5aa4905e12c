"""The fake crouter cloud: a directory and a runtime answering through an httpx transport.

``FakeCloud`` is the seed's FakeCloud in Python: app code and the workbench talk to it with the
real SDK (``services.sdk``) over ``cloud.transport``; tests and the operator drive its runs
(``FakeRun``), grants, memory, providers, failures and gates directly. It is the pure fake: serving
it is ``services.served``'s, and ``services.attached.RemoteCloud`` drives a served one (``workbench
serve``) through its control API the same way, awaited.
"""

from .cloud import FakeCloud, ResponderError
from .directory import DirectoryCall
from .errors import CloudError
from .failures import Gate, InterceptContext
from .keys import generate_private_key_pem
from .notices import NoticeAttempt, RunNoticeConfig
from .runs import FakeRun, ResponderContext
from .runtime import ToolCall
from .transport import CallRecord
from .users import FakeGrant, FakeMemory, FakeUser, FakeRuns

__all__ = [
    "FakeCloud",
    "FakeRun",
    "FakeUser",
    "FakeGrant",
    "FakeMemory",
    "FakeRuns",
    "CloudError",
    "CallRecord",
    "DirectoryCall",
    "NoticeAttempt",
    "RunNoticeConfig",
    "ResponderContext",
    "ResponderError",
    "InterceptContext",
    "Gate",
    "ToolCall",
    "generate_private_key_pem",
]
