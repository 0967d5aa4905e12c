"""``CloudHost``: what the directory, the runtime, the transport and the state document need of
the cloud they serve.

``FakeCloud`` (``cloud.py``) is the one implementation; the parts below it name this protocol
instead, so no module of the cloud imports the module that assembles it (the lower parts, runs,
streams, notices, people and the shared state, declare their own smaller protocols beside them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..changes import ChangeFeed
from ..clock import Clock
from .limits import Limits
from .providers import Providers
from .records import CallRecord, DirectoryCall
from .shared import CloudState, ResponderError
from .users import FakeRuns, FakeUser

__all__ = ["CloudHost"]


class CloudHost(Protocol):
    """A fake cloud as its parts see it: its options, its records and its shared state."""

    @property
    def client_id(self) -> str: ...

    @property
    def issuer(self) -> str: ...

    @property
    def runtime_url(self) -> str | Callable[[str], str]: ...

    @property
    def runtime_id(self) -> str: ...

    @property
    def runtime_version(self) -> str: ...

    @property
    def stream_idle_ms(self) -> int: ...

    @property
    def isolated_runs(self) -> str: ...

    @property
    def access_token_ttl_s(self) -> int: ...

    @property
    def account_app_uri_template(self) -> str | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def changes(self) -> ChangeFeed: ...

    @property
    def profiles(self) -> list[dict[str, str]]: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def calls(self) -> list[CallRecord]: ...

    @property
    def directory_calls(self) -> list[DirectoryCall]: ...

    @property
    def refreshes(self) -> list[DirectoryCall]: ...

    @property
    def responder_errors(self) -> list[ResponderError]: ...

    @property
    def providers(self) -> Providers: ...

    @property
    def runs(self) -> FakeRuns: ...

    @property
    def state(self) -> CloudState: ...

    def user(self, user_id: str) -> FakeUser: ...

    def runtime_url_for(self, user_id: str) -> str: ...
