"""People on the fake cloud: their grant, runs view, memory, refusals and grant reads."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clock import Clock, iso
from ..wire import REFUSAL_CODES
from .records import UNSET, CallRecord
from .runs import FakeRun, Responder
from .book import RunBook, RunLog

__all__ = ["FakeUser", "FakeGrant", "FakeMemory", "FakeRuns", "UNSET", "PeopleHost", "PeopleLedger"]


class PeopleLedger(Protocol):
    """What people and their runs view need of the cloud's shared state (``CloudState`` is one)."""

    responder: Responder | None
    """The cloud-wide responder."""

    @property
    def runs(self) -> RunBook: ...

    @property
    def run_log(self) -> RunLog: ...

    @property
    def user_responders(self) -> dict[str, Responder | None]: ...

    @property
    def token_serial(self) -> int: ...

    def grant_changed(self, user: "FakeUser") -> None: ...

    def grant_revoked(self, user: "FakeUser", code: str) -> None: ...


class PeopleHost(Protocol):
    """What a person needs of the cloud they are on (``FakeCloud`` is one).

    Declared here, beside its users, so this module never names the cloud above it."""

    @property
    def client_id(self) -> str: ...

    @property
    def account_app_uri_template(self) -> str | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def state(self) -> PeopleLedger: ...

    def user(self, user_id: str) -> "FakeUser": ...


class FakeRuns:
    """``cloud.runs`` and ``cloud.user(id).runs``: ``all`` (start order, deleted kept) and ``respond``."""

    def __init__(self, cloud: PeopleHost, user_id: str | None) -> None:
        self._cloud = cloud
        self._user_id = user_id

    @property
    def all(self) -> list[FakeRun]:
        """Every run in start order; a deleted run stays (``deleted`` set), even when its id was reused."""
        log = self._cloud.state.run_log
        if self._user_id is None:
            return list(log)
        return self._cloud.state.runs.held_runs([s for s in log.slots if s.user_id == self._user_id])

    def get(self, run_id: str) -> FakeRun:
        """The current run with this id (the newest one when a deleted run's id was started again;
        a deleted one when that is the last); ``KeyError`` when unknown."""
        run = self._cloud.state.runs[run_id]
        if self._user_id is not None and run.user_id != self._user_id:
            raise KeyError(run_id)
        return run

    def respond(self, fn: Responder | None) -> None:
        """Set the responder (``None`` turns it off; per user it overrides the cloud's)."""
        if self._user_id is None:
            self._cloud.state.responder = fn
        else:
            self._cloud.user(self._user_id)  # the person exists from now on
            self._cloud.state.user_responders[self._user_id] = fn

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)


class FakeGrant:
    """A person's grant: a versioned DTO; ``grant.get`` long-polls on ``version``."""

    def __init__(self, user: "FakeUser") -> None:
        self._user = user
        self._dto: dict[str, Any] | None = None
        self._changed = asyncio.Event()

    @property
    def state(self) -> dict[str, Any] | None:
        """The ``GrantGetDTO`` as ``grant.get`` answers it, or None when there is no grant."""
        return copy.deepcopy(self._dto)

    @property
    def active(self) -> bool:
        return self._dto is not None and self._dto["state"] == "active"

    @property
    def scopes(self) -> list[str]:
        return list(self._dto["resolved_scopes"]) if self._dto else []

    @property
    def mark(self) -> tuple[object, ...] | None:
        """``(version, rev, state)``, or None without a grant: a cheap test for a changed grant."""
        dto = self._dto
        return None if dto is None else (dto.get("version"), dto.get("rev"), dto.get("state"))

    def load(self, dto: dict[str, Any] | None) -> None:
        """Take a stored grant DTO as it is (loading a state: no version bump, no wake, no change)."""
        self._dto = copy.deepcopy(dto)

    def create(self, scopes: list[str], dependencies: list[dict[str, Any]] | None) -> None:
        """A new active grant with these scopes and dependencies (``FakeCloud.connect``)."""
        cloud = self._user.cloud
        template = cloud.account_app_uri_template
        self._dto = {
            "version": 1,
            "rev": 1,
            "state": "active",
            "client_id": cloud.client_id,
            "user_id": self._user.id,
            "resolved_scopes": list(scopes),
            "dependencies": [_dependency(d) for d in (dependencies or [])],
            "spend_cap": None,
            "revoked_code": None,
            "account_app_uri": (
                template.replace("{client_id}", cloud.client_id) if template is not None else None
            ),
        }
        self._wake()
        cloud.state.grant_changed(self._user)

    def set(
        self,
        *,
        dependencies: list[dict[str, Any]] | None = None,
        resolved_scopes: list[str] | None = None,
        spend_cap: dict[str, Any] | None = None,
    ) -> None:
        """Change the grant's content: a new ``rev``."""
        dto = self._require()
        if dependencies is not None:
            dto["dependencies"] = [_dependency(d) for d in dependencies]
        if resolved_scopes is not None:
            dto["resolved_scopes"] = list(resolved_scopes)
        if spend_cap is not None:
            dto["spend_cap"] = copy.deepcopy(spend_cap)
        self._bump(rev=True)

    def setup(self, provider: str, state: str, *, message: str | None = None) -> None:
        """A dependency's setup state changes, without a ``rev`` bump."""
        dto = self._require()
        for dep in dto["dependencies"]:
            if dep["provider"] == provider:
                dep["state"], dep["message"] = state, message
                break
        else:
            dto["dependencies"].append({"provider": provider, "state": state, "message": message})
        self._bump(rev=False)

    def sync(self) -> None:
        """A sync with unchanged content: no version change, no wake."""
        self._require()

    def revoke(self, code: str = "grant_revoked") -> None:
        """Deactivate: calls answer 401 ``grant_revoked``, held reads wake, streams get an error frame,
        and the next refresh is refused with ``code`` (one of ``services.wire.REFUSAL_CODES``)."""
        _check_refusal(code)
        dto = self._require()
        dto["state"], dto["revoked_code"] = "revoked", code
        self._bump(rev=True)
        self._user.cloud.state.grant_revoked(self._user, code)

    def restore(self, patch: dict[str, Any] | None = None) -> None:
        """Reactivate the grant, optionally changing its content."""
        dto = self._require()
        dto["state"], dto["revoked_code"] = "active", None
        for key, value in (patch or {}).items():
            dto[key] = copy.deepcopy(value)
        self._bump(rev=True)

    def _require(self) -> dict[str, Any]:
        if self._dto is None:
            raise ValueError(f"{self._user.id} has no grant: connect them first")
        return self._dto

    def _bump(self, *, rev: bool) -> None:
        assert self._dto is not None
        if rev:
            self._dto["rev"] += 1
        self._dto["version"] += 1
        self._wake()
        self._user.cloud.state.grant_changed(self._user)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self) -> None:
        """Wait until the grant's version changes (or it is revoked)."""
        await self._changed.wait()


def _check_refusal(code: str) -> None:
    """A code the directory can refuse with is one the SDK records as a refusal; anything else is a mistake."""
    if code not in REFUSAL_CODES:
        raise ValueError(f"{code!r} is not a refusal code; use one of {', '.join(REFUSAL_CODES)}")


def _dependency(dep: dict[str, Any]) -> dict[str, Any]:
    return {"provider": dep["provider"], "state": dep.get("state", "ready"), "message": dep.get("message")}


class FakeMemory:
    """A person's memory documents (``memory.list`` / ``memory.get``)."""

    def __init__(self, user: "FakeUser") -> None:
        self._user = user
        self.documents: dict[str, dict[str, Any]] = {}

    def put(
        self,
        name: str,
        body: str,
        *,
        privacy: str = "public",
        kind: str = "knowledge",
        preview: str | None = None,
        summary: str | None = None,
        rules: list[dict[str, Any]] | None = None,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Create or replace a document (a new revision)."""
        if privacy not in ("public", "friends", "private"):
            raise ValueError(f"privacy must be public, friends or private, not {privacy!r}")
        if kind not in ("knowledge", "preference", "report"):
            raise ValueError(f"kind must be knowledge, preference or report, not {kind!r}")
        previous = self.documents.get(name)
        doc = {
            "name": name,
            "owner": owner or self._user.id,
            "kind": kind,
            "privacy": privacy,
            "preview": preview if preview is not None else body.strip().splitlines()[0][:120] if body.strip() else "",
            "summary": summary,
            "rules": copy.deepcopy(rules or []),
            "revision": (previous["revision"] + 1) if previous else 1,
            "updated_at": iso(self._user.cloud.clock.time()),
            "bytes": len(body.encode("utf-8")),
            "body": body,
        }
        self.documents[name] = doc
        return copy.deepcopy(doc)

    def remove(self, name: str) -> None:
        """Delete a document (unknown names are ignored)."""
        self.documents.pop(name, None)

    def visible(self, manage: bool) -> list[dict[str, Any]]:
        return [d for d in self.documents.values() if manage or d["privacy"] == "public"]


@dataclass
class FakeUser:
    """One person: ``grant``, ``runs``, ``memory``, ``reads``, ``holding``, ``refuse``, ``expire_tokens``."""

    cloud: PeopleHost
    id: str
    reads: "list[CallRecord | None]" = field(default_factory=list)
    holding: int = 0
    refusal: str | None = None
    tokens_valid_from: int = 0
    refresh_token: str | None = None
    superseded: set[str] = field(default_factory=set)
    family_revoked: bool = False

    def __post_init__(self) -> None:
        self.grant = FakeGrant(self)
        self.memory = FakeMemory(self)
        self.runs = FakeRuns(self.cloud, self.id)

    def refuse(self, code: str) -> None:
        """Refuse every refresh with ``code`` (one of ``services.wire.REFUSAL_CODES``) and invalidate
        tokens issued until now; ``'ok'`` clears it."""
        if code == "ok":
            self.refusal = None
            return
        _check_refusal(code)
        self.refusal = code
        self.tokens_valid_from = self.cloud.state.token_serial + 1

    def expire_tokens(self) -> None:
        """Invalidate every access token issued until now, forcing a refresh without a refusal."""
        self.tokens_valid_from = self.cloud.state.token_serial + 1
