"""An in-process Honcho-compatible memory service reached through an httpx transport.

``FakeHonchoService`` keeps workspaces, peers, sessions, messages and conclusions in memory and
answers the subset of Honcho v3 routes the outbox uses, with Honcho's status codes and shapes:
get-or-create answers 201 when it created and 200 when it found; message batches hold at most
100 messages of at most 25,000 characters (422 otherwise, FastAPI's ``{"detail": [...]}``); an
unknown session or message is 404 ``{"detail": "..."}``; message, clone and conclusion creation
answer 201. A message keeps the ``created_at`` it was sent with (ISO 8601; 422 when it is not
one), else the time it arrived. Search, chat and representation are deterministic word matches,
and chat says it is a fake.

Like real Honcho, the NUL character is stripped from every string of a request (PostgreSQL text
cannot hold it); a lone surrogate is refused with 422 before anything is stored; everything else
is kept as sent. With ``state_path`` the service keeps its
state in that JSON file: loaded when it starts, written atomically after every change and before
the answer goes out, so a served fake killed at any moment comes back with every message it
acknowledged (and perhaps one batch it stored but never acknowledged, as a real server may). A
change that cannot be saved (a full disk) is answered 503 and undone in memory; an unreadable
state file is refused at start with ``FakeHonchoStateError`` and left as it is.

Faults for tests: ``go_down()`` (every call raises ``httpx.ConnectError``), ``fail_next(status,
times, retry_after=...)`` (the next calls answer that status, with a ``Retry-After`` header when
given), ``delete_session(id)`` (as if deleted on the server), ``come_up()``; ``calls`` records
every request.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

from ...clock import Clock
from ...errors import ServiceError
from ...files import atomic_write_json
from ...text import value_problem

__all__ = ["FakeHonchoService", "FakeHonchoStateError", "FakeHonchoTransport"]

_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_READS = re.compile(r"/(search|chat|representation|list)$")
MAX_CONTENT = 25_000


class FakeHonchoStateError(ServiceError):
    """The fake's state file cannot be read (it is left as it is)."""


class _HttpError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def _invalid(loc: list[Any], msg: str) -> _HttpError:
    return _HttpError(422, [{"type": "value_error", "loc": ["body", *loc], "msg": msg, "input": None}])


@dataclass
class _Workspace:
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    session_peers: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    conclusions: list[dict[str, Any]] = field(default_factory=list)


class FakeHonchoService:
    """The fake memory service's state, its route table and its fault switches."""

    def __init__(self, state_path: Path | str | None = None, *, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        """Where ``created_at`` times come from (the workspace's injected clock)."""
        self.workspaces: dict[str, _Workspace] = {}
        """Everything stored, per workspace id."""
        self.calls: list[tuple[str, str]] = []
        """Every request seen, as ``(method, path)``."""
        self.authorization: str | None = None
        """The ``Authorization`` header of the newest request."""
        self._down = False
        self._failures: list[tuple[int, str | None]] = []
        self._next_id = 1
        self._lock = threading.Lock()
        self.state_path = Path(state_path) if state_path is not None else None
        """The JSON file the state is kept in, or None (memory only)."""
        if self.state_path is not None and self.state_path.exists():
            self._load(self.state_path)
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., tuple[int, Any]]]] = [
            ("POST", re.compile(r"^/v3/workspaces$"), self._workspace),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/peers$"), self._peer),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/peers/([^/]+)/search$"), self._peer_search),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/peers/([^/]+)/chat$"), self._peer_chat),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/peers/([^/]+)/representation$"), self._representation),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/sessions$"), self._session),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/sessions/([^/]+)/peers$"), self._session_peers),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/sessions/([^/]+)/messages$"), self._add_messages),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/sessions/([^/]+)/messages/list$"), self._list_messages),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/sessions/([^/]+)/clone$"), self._clone),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/conclusions$"), self._conclusions),
            ("POST", re.compile(r"^/v3/workspaces/([^/]+)/conclusions/list$"), self._list_conclusions),
        ]

    # -- state on disk -------------------------------------------------------------------

    def _now(self) -> str:
        return datetime.fromtimestamp(self.clock.time(), UTC).isoformat()

    def _new_id(self) -> int:
        value = self._next_id
        self._next_id += 1
        return value

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            self._next_id = int(data.get("next_id", 1))
            self.workspaces = {wid: _Workspace(**ws) for wid, ws in (data.get("workspaces") or {}).items()}
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise FakeHonchoStateError(
                f"the memory fake's state file {path} cannot be read ({exc}); move it aside to start empty"
            ) from None

    def _restore(self) -> None:
        """Back to the state on disk (after a change that could not be saved)."""
        self.workspaces, self._next_id = {}, 1
        if self.state_path is not None and self.state_path.exists():
            self._load(self.state_path)

    def _save(self) -> None:
        if self.state_path is None:
            return
        atomic_write_json(self.state_path, {"next_id": self._next_id,
                                            "workspaces": {k: asdict(v) for k, v in self.workspaces.items()}})

    # -- fault switches ------------------------------------------------------------------

    @property
    def transport(self) -> FakeHonchoTransport:
        """A new httpx transport answering from this service."""
        return FakeHonchoTransport(self)

    def go_down(self) -> None:
        """Make the service unreachable: every call raises ``httpx.ConnectError``."""
        self._down = True

    def come_up(self) -> None:
        """Make the service reachable again and forget queued failures."""
        self._down = False
        self._failures.clear()

    def fail_next(self, status: int = 503, times: int = 1, *, retry_after: str | float | None = None) -> None:
        """Answer the next ``times`` calls with ``status`` and Honcho's ``{"detail": ...}``.

        ``retry_after`` (seconds, or an HTTP date as text) is sent as the ``Retry-After`` header.
        """
        header = None if retry_after is None else str(retry_after)
        self._failures.extend([(status, header)] * times)

    def delete_session(self, session_id: str, workspace_id: str = "workbench") -> None:
        """Delete a session and its messages, as an operator of the server would."""
        ws = self.workspaces.get(workspace_id)
        if ws is not None:
            ws.sessions.pop(session_id, None)
            ws.messages.pop(session_id, None)
            ws.session_peers.pop(session_id, None)
            with self._lock:
                self._save()

    # -- inspection helpers for tests and demos -------------------------------------------

    def session_messages(self, session_id: str, workspace_id: str = "workbench") -> list[dict[str, Any]]:
        """Messages stored in a session, oldest first."""
        ws = self.workspaces.get(workspace_id)
        return list(ws.messages.get(session_id, [])) if ws else []

    def all_messages(self, workspace_id: str = "workbench") -> list[dict[str, Any]]:
        """Every message of a workspace, session by session."""
        ws = self.workspaces.get(workspace_id)
        return [m for msgs in ws.messages.values() for m in msgs] if ws else []

    # -- dispatch --------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one request (called by the transport)."""
        path = request.url.path
        self.calls.append((request.method, path))
        self.authorization = request.headers.get("authorization")
        if self._down:
            raise httpx.ConnectError("memory service unreachable", request=request)
        with self._lock:  # served, requests are answered on worker threads
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            status, retry_after = failure
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            return httpx.Response(status, json={"detail": f"fake Honcho failure {status}"}, headers=headers)
        for method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match and method == request.method:
                try:
                    body = _strip_nul(json.loads(request.content)) if request.content else None
                except json.JSONDecodeError:
                    return httpx.Response(422, json={"detail": [{"type": "json_invalid", "loc": ["body"],
                                                                 "msg": "JSON decode error", "input": None}]})
                problem = value_problem(body, "body")
                if problem is not None:  # PostgreSQL cannot hold it: refused before anything is stored
                    return httpx.Response(422, json={"detail": [{"type": "string_unicode", "loc": ["body"],
                                                                 "msg": problem, "input": None}]})
                try:
                    with self._lock:
                        status, answer = handler(*[unquote(g) for g in match.groups()], body=body,
                                                 params=request.url.params)
                        if status in (200, 201) and not _READS.search(path):
                            try:
                                self._save()
                            except (OSError, ServiceError) as exc:  # answered as failed: keep only what is saved
                                self._restore()
                                return httpx.Response(503, json={"detail": f"fake Honcho could not save: {exc}"})
                except _HttpError as exc:
                    return httpx.Response(exc.status, json={"detail": exc.detail})
                return httpx.Response(status, json=answer)
        return httpx.Response(404, json={"detail": "Not Found"})

    def _ws(self, workspace_id: str) -> _Workspace:
        ws = self.workspaces.get(workspace_id)
        if ws is None:
            raise _HttpError(404, f"Workspace {workspace_id} not found")
        return ws

    def _session_of(self, ws: _Workspace, session_id: str) -> dict[str, Any]:
        session = ws.sessions.get(session_id)
        if session is None:
            raise _HttpError(404, f"Session {session_id} not found")
        return session

    # -- handlers --------------------------------------------------------------------------

    def _workspace(self, *, body: Any, params: Any) -> tuple[int, Any]:
        wid = _require_id(body)
        created = wid not in self.workspaces
        self.workspaces.setdefault(wid, _Workspace())
        return (201 if created else 200), {"id": wid, "metadata": {}, "configuration": {}, "created_at": self._now()}

    def _ensure_peer(self, ws: _Workspace, workspace_id: str, peer_id: str) -> tuple[bool, dict[str, Any]]:
        if peer_id in ws.peers:
            return False, ws.peers[peer_id]
        peer = {"id": peer_id, "workspace_id": workspace_id, "created_at": self._now(), "metadata": {},
                "configuration": {}}
        ws.peers[peer_id] = peer
        return True, peer

    def _peer(self, workspace_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        created, peer = self._ensure_peer(ws, workspace_id, _require_id(body))
        return (201 if created else 200), peer

    def _session(self, workspace_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        sid = _require_id(body)
        created = sid not in ws.sessions
        if created:
            ws.sessions[sid] = {"id": sid, "is_active": True, "workspace_id": workspace_id,
                                "metadata": body.get("metadata") or {}, "configuration": {}, "created_at": self._now()}
            ws.messages[sid] = []
            ws.session_peers[sid] = {}
        self._add_peers(ws, workspace_id, sid, body.get("peers") or {})
        return (201 if created else 200), ws.sessions[sid]

    def _add_peers(self, ws: _Workspace, workspace_id: str, sid: str, peers: Any) -> None:
        if not isinstance(peers, dict):
            raise _invalid(["peers"], "Input should be a valid dictionary")
        for peer_id, config in peers.items():
            if not _ID.match(peer_id):
                raise _invalid(["peers", peer_id], "String should match pattern '^[a-zA-Z0-9_-]+$'")
            self._ensure_peer(ws, workspace_id, peer_id)
            ws.session_peers[sid][peer_id] = dict(config or {})

    def _session_peers(self, workspace_id: str, session_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        session = self._session_of(ws, session_id)
        self._add_peers(ws, workspace_id, session_id, body or {})
        return 200, session

    def _add_messages(self, workspace_id: str, session_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        self._session_of(ws, session_id)
        items = (body or {}).get("messages")
        if not isinstance(items, list) or not items:
            raise _invalid(["messages"], "List should have at least 1 item after validation")
        if len(items) > 100:
            raise _invalid(["messages"], f"List should have at most 100 items after validation, not {len(items)}")
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise _invalid(["messages", index, "content"], "Field required")
            if len(item["content"]) > MAX_CONTENT:
                raise _invalid(["messages", index, "content"],
                               f"String should have at most {MAX_CONTENT} characters")
            if not isinstance(item.get("peer_id"), str) or not _ID.match(item["peer_id"]):
                raise _invalid(["messages", index, "peer_id"], "String should match pattern '^[a-zA-Z0-9_-]+$'")
            if item.get("created_at") is not None and _datetime(item["created_at"]) is None:
                raise _invalid(["messages", index, "created_at"], "Input should be a valid datetime")
        created = []
        for item in items:
            self._ensure_peer(ws, workspace_id, item["peer_id"])
            content = item["content"].replace("\x00", "")
            message = {"id": f"msg_{self._new_id():08d}", "content": content, "peer_id": item["peer_id"],
                       "session_id": session_id, "metadata": item.get("metadata") or {},
                       "created_at": _datetime(item.get("created_at")) or self._now(), "workspace_id": workspace_id,
                       "token_count": len(content.split())}
            ws.messages[session_id].append(message)
            created.append(message)
        return 201, created

    def _list_messages(self, workspace_id: str, session_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        self._session_of(ws, session_id)
        filters = (body or {}).get("filters") or {}
        return 200, _page([m for m in ws.messages[session_id] if _matches(m, filters)], params)

    def _list_conclusions(self, workspace_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        filters = (body or {}).get("filters") or {}
        return 200, _page([c for c in ws.conclusions if _matches(c, filters)], params)

    def _clone(self, workspace_id: str, session_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        original = self._session_of(ws, session_id)
        messages = ws.messages[session_id]
        cutoff = params.get("message_id")
        if cutoff is not None:
            positions = [i for i, m in enumerate(messages) if m["id"] == cutoff]
            if not positions:
                raise _HttpError(404, f"Message {cutoff} not found in session {session_id}")
            messages = messages[: positions[0] + 1]
        new_id = f"clone_{self._new_id():08d}"
        ws.sessions[new_id] = {**original, "id": new_id, "created_at": self._now()}
        ws.session_peers[new_id] = {k: dict(v) for k, v in ws.session_peers[session_id].items()}
        ws.messages[new_id] = [{**m, "id": f"msg_{self._new_id():08d}", "session_id": new_id} for m in messages]
        return 201, ws.sessions[new_id]

    def _peer_messages(self, ws: _Workspace, peer_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        sessions = [ws.messages.get(session_id, [])] if session_id else ws.messages.values()
        return [m for msgs in sessions for m in msgs if m["peer_id"] == peer_id]

    def _peer_search(self, workspace_id: str, peer_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        query = _require_text(body, "query")
        limit = int((body or {}).get("limit") or 10)
        return 200, _rank(self._peer_messages(ws, peer_id), query)[:limit]

    def _peer_chat(self, workspace_id: str, peer_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        query = _require_text(body, "query")
        messages = self._peer_messages(ws, peer_id)
        conclusions = [c for c in ws.conclusions if c["observed_id"] == peer_id]
        hits = _rank(messages + [{"content": c["content"]} for c in conclusions], query)[:3]
        lines = "; ".join(h["content"][:200] for h in hits) or "nothing stored matches the question"
        content = (f"[fake Honcho: a deterministic answer, no model] About {peer_id}, from "
                   f"{len(messages)} stored messages and {len(conclusions)} conclusions: {lines}")
        return 200, {"content": content}

    def _representation(self, workspace_id: str, peer_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        session_id = (body or {}).get("session_id")
        messages = self._peer_messages(ws, peer_id, session_id)
        conclusions = [c["content"] for c in ws.conclusions if c["observed_id"] == peer_id]
        recent = " | ".join(m["content"][:80] for m in messages[-3:])
        text = (f"[fake Honcho representation] {peer_id}: {len(messages)} messages"
                + (f"; recent: {recent}" if recent else "")
                + (f"; conclusions: {' | '.join(conclusions[-5:])}" if conclusions else ""))
        return 200, {"representation": text}

    def _conclusions(self, workspace_id: str, *, body: Any, params: Any) -> tuple[int, Any]:
        ws = self._ws(workspace_id)
        items = (body or {}).get("conclusions")
        if not isinstance(items, list) or not items:
            raise _invalid(["conclusions"], "List should have at least 1 item after validation")
        created = []
        for index, item in enumerate(items):
            content = item.get("content") if isinstance(item, dict) else None
            if not isinstance(content, str) or not 1 <= len(content) <= 65535:
                raise _invalid(["conclusions", index, "content"], "String should have 1..65535 characters")
            for key in ("observer_id", "observed_id"):
                if not isinstance(item.get(key), str):
                    raise _invalid(["conclusions", index, key], "Field required")
            conclusion = {"id": f"con_{self._new_id():08d}", "content": content.replace("\x00", ""),
                          "observer_id": item["observer_id"], "observed_id": item["observed_id"],
                          "session_id": item.get("session_id"), "level": "explicit", "created_at": self._now()}
            ws.conclusions.append(conclusion)
            created.append(conclusion)
        return 201, created


class FakeHonchoTransport(httpx.AsyncBaseTransport):
    """The httpx transport in front of a ``FakeHonchoService``."""

    def __init__(self, service: FakeHonchoService) -> None:
        self.service = service

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.service.handle(request)


def _datetime(value: Any) -> str | None:
    """An ISO 8601 time as the server stores it (UTC, ``isoformat``); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _page(items: list[dict[str, Any]], params: Any) -> dict[str, Any]:
    """One page of ``items`` as Honcho answers a list (``page``, ``size``, ``reverse`` in the query)."""
    if str(params.get("reverse", "")).lower() == "true":
        items = items[::-1]
    try:
        page, size = int(params.get("page", 1)), int(params.get("size", 50))
    except ValueError:
        raise _HttpError(422, [{"type": "int_parsing", "loc": ["query", "page"],
                                "msg": "Input should be a valid integer", "input": None}]) from None
    if page < 1 or not 1 <= size <= 100:
        raise _HttpError(422, [{"type": "value_error", "loc": ["query", "size"],
                                "msg": "page must be at least 1 and size 1..100", "input": None}])
    pages = max(1, -(-len(items) // size))
    chunk = items[(page - 1) * size: page * size]
    return {"items": chunk, "total": len(items), "page": page, "size": size, "pages": pages}


def _strip_nul(value: Any) -> Any:
    """``value`` with NUL removed from every string (keys too), as Honcho stores text."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {_strip_nul(k): _strip_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_nul(v) for v in value]
    return value


def _require_id(body: Any) -> str:
    value = (body or {}).get("id") if isinstance(body, dict) else None
    if not isinstance(value, str) or not _ID.match(value):
        raise _invalid(["id"], "String should match pattern '^[a-zA-Z0-9_-]+$'")
    return value


def _require_text(body: Any, key: str) -> str:
    value = body.get(key) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise _invalid([key], "Field required")
    return value


def _matches(message: dict[str, Any], filters: dict[str, Any]) -> bool:
    """Honcho's filter subset: equality on fields and metadata keys, ``in``, ``AND``, ``OR``."""
    for key, want in filters.items():
        if key == "OR":
            if not any(_matches(message, branch) for branch in want):
                return False
        elif key == "AND":
            if not all(_matches(message, branch) for branch in want):
                return False
        elif key == "metadata":
            meta = message.get("metadata") or {}
            for mkey, mwant in want.items():
                have = meta.get(mkey)
                if isinstance(mwant, dict) and "in" in mwant:
                    if have not in mwant["in"]:
                        return False
                elif have != mwant:
                    return False
        elif message.get(key) != want:
            return False
    return True


def _rank(items: list[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    words = [w for w in re.findall(r"\w+", query.lower()) if len(w) > 2] or [query.lower()]
    scored = []
    for order, item in enumerate(items):
        text = item["content"].lower()
        score = sum(text.count(w) for w in words)
        if score:
            scored.append((-score, order, item))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [item for _, _, item in scored]
