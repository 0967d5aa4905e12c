"""The embedded desk: the cloud runs in this process.

``InProcessControl`` answers the desk's control calls with the very dispatch a served cloud's
control API runs (``services.served.control.ControlApp.dispatch``), without HTTP: an action is
checked, done and refused exactly as a window attached to a server sees it. ``CloudBook`` reads runs
and people from the cloud's own objects, as DTOs of the control API's shape, without copies; the
window's ``RunMirror`` reads each run's own event log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..changes import ChangeFeed
from ..clock import Clock
from .desk import Desk
from .mirror import RunMirror

if TYPE_CHECKING:
    from ..cloud import FakeCloud, FakeRun
    from ..served.control import ControlApp

__all__ = ["InProcessControl", "CloudBook", "embedded_desk"]


class InProcessControl:
    """The control API of a cloud in this process (``ControlClient``)."""

    def __init__(self, app: "ControlApp") -> None:
        self.app = app

    async def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One control call; a refusal raises ``ControlError`` as ``RemoteCloud.call`` does."""
        from ..served.errors import ControlError

        raw = json.dumps(body).encode() if body is not None else b""
        query = {k: str(v) for k, v in (params or {}).items()}
        status, answer = await self.app.dispatch(method, path, raw, query)
        if status >= 400:
            error = (answer or {}).get("error") or {}
            raise ControlError(status, str(error.get("code") or "error"), str(error.get("message") or ""))
        return answer


def _run(run: "FakeRun") -> dict[str, Any]:
    """The fields the desk's read models take from a live run (times as float seconds)."""
    return {
        "id": run.id, "user_id": run.user_id, "name": run.name, "status": run.status, "activity": run.activity,
        "params": run.params, "outcome": run.outcome, "last_turn_error": run.last_turn_error,
        "question": run.question, "pending": run.pending, "created_at": run.created_at,
        "updated_at": run.updated_at, "deleted": run.deleted, "seq": run.seq, "first_seq": run.first_seq,
    }


class CloudBook:
    """Runs and people read live from an in-process cloud (``RunBook``)."""

    def __init__(self, cloud: "FakeCloud") -> None:
        self.cloud = cloud

    def run_dtos(self) -> Iterator[Mapping[str, Any]]:
        return (_run(r) for r in self.cloud.runs.all)

    def run_dto(self, run_id: str) -> Mapping[str, Any] | None:
        try:
            return _run(self.cloud.runs.get(run_id))
        except KeyError:
            return None

    def events(self, run_id: str) -> Sequence[dict[str, Any]]:
        """One run's own event log (not a copy: the window's ``RunMirror`` reads it, never changes it)."""
        try:
            return self.cloud.runs.get(run_id).events
        except KeyError:
            return ()

    def people(self) -> Iterator[Mapping[str, Any]]:
        from ..served.dtos import person_dto

        return (person_dto(self.cloud.user(user_id)) for user_id in list(self.cloud.people))

    def person(self, user_id: str) -> Mapping[str, Any] | None:
        from ..served.dtos import person_dto

        return person_dto(self.cloud.user(user_id)) if user_id in self.cloud.people else None

    def absorb_run(self, dto: Mapping[str, Any]) -> None:
        """Nothing to keep: this book reads the live run."""

    async def refresh_people(self) -> None:
        """Nothing to read again: this book reads the live people."""


def embedded_desk(cloud: "FakeCloud", control: "ControlApp", changes: ChangeFeed, *, clock: Clock) -> Desk:
    """The desk of a window whose cloud runs in this process; ``control`` is the cloud's control app
    (the serving window's own, or one made for this window alone), acting as the app through the
    window's own connections, which report their refusals themselves."""
    book = CloudBook(cloud)
    return Desk(InProcessControl(control), book, changes, clock=clock, mirror=RunMirror(changes, source=book.events),
                refusals_recorded=True)
