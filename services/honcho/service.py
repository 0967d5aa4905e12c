"""An in-process Honcho-compatible memory service reached through an httpx transport.

``FakeHonchoService`` answers the Honcho v3 routes the official SDKs call (``honcho-ai`` for
Python, ``@honcho-ai/sdk`` for TypeScript; the list is in ``HONCHO_ROUTES`` and in the contract
tests), with the real server's validation, limits, status codes and error bodies (read from
plastic-labs/honcho ``src/routers``, ``src/schemas/api.py``, ``src/crud``):

- ids are 1..512 characters of ``[a-zA-Z0-9_-]``; metadata at most 5 levels deep and 100
  top-level keys; a batch holds 1..100 messages of at most 25,000 characters; a chat query
  1..10,000 characters; search ``limit`` and pages' ``size`` 1..100. Validation failures are
  422 with FastAPI's ``{"detail": [{"type", "loc", "msg", "input"}]}``; a missing resource is
  404, a workspace with active sessions refuses deletion with 409, too many observers is 400,
  all with ``{"detail": "..."}``; an unknown route is 404 and a known path with another method 405.
- get-or-create answers 201 when it created and 200 when it found (a session's or peer's new
  metadata replaces the stored one); messages to a session not yet created create it (and make
  their authors members); a session never created lists as an empty page; deleting a session
  answers 202 and from then on the session answers 404 (its messages are gone).
- filters are Honcho's whole language (``filters``), 422 on an unknown column.
- search (workspace, session, a peer's messages) is a word match instead of Honcho's semantic
  search: messages sharing any word of the query (FTS5), newest first, filters applied.
- answers a model makes in real Honcho (representation, card, summaries, context, chat) are
  made by rule from the stored messages and can be scripted (``answers``, ``respond``).
  Summaries exist only where real Honcho has written one: a session's short summary from its 20th
  message (then every 20th), its long one from its 60th (then every 60th), each covering the
  messages up to the one that reached the count (the ``summary`` configuration of the session or
  workspace changes the counts or turns them off); the context picks one as Honcho does.

Like real Honcho, the NUL character is stripped from every string of a request; a lone
surrogate is refused with 422 before anything is stored. With ``api_key`` set, every request must
carry ``Authorization: Bearer <key>`` (else 401 ``{"detail": "No access token provided"}`` or
``{"detail": "Invalid JWT"}``, as Honcho with auth on). A request with a body must be
``application/json``; a body that is not UTF-8 JSON, or nests deeper than 64 levels, is 422.

State lives in SQLite (``store``): each request is one transaction, so a batch is stored
whole or not at all (also across a kill -9) and acknowledged only once committed. A change that
cannot be saved (a full disk) is answered 503 and rolled back; an unreadable state file is refused
at start with ``FakeHonchoStateError`` and left as it is.

Faults for tests: ``go_down()`` (every call raises ``httpx.ConnectError``), ``fail_next(status,
times, retry_after=...)``, ``fill_disk()`` (a full disk), ``delete_session(id)`` (gone entirely, as after the server's
background deletion), ``come_up()``. ``calls`` records the newest ``calls_kept`` requests (a
ring: 10,000 by default); a request refused for want of the API key is only counted
(``refused_calls``), so a flood of keyless requests costs no memory.
"""

from __future__ import annotations

import hmac
import json
import re
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from json.encoder import c_make_encoder, c_encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import TypeAlias, TypeGuard, TypeVar
from urllib.parse import unquote

import httpx
from httpx import QueryParams

from ..clock import Clock
from ..text import value_problem
from .answers import Answer, AnswerKind, HonchoAsk, Responder, default_answer, rank
from .filters import (
    FilterError,
    SQLValue,
    compile_filter,
    extract_session_allowlist,
    parse_time,
    sortable_time,
)
from ..honcho_wire import (
    JSON,
    Conclusion,
    JSONObject,
    Message,
    Page,
    Peer,
    PeerCardAnswer,
    PeerContext,
    QueueStatus,
    RepresentationAnswer,
    Session,
    SessionContext,
    SessionPeerConfig,
    SessionSummaries,
    Summary,
    ValidationIssue,
    WireAnswer,
    Workspace,
)
from .store import FakeHonchoStateError, index_messages, last_message_seq, open_store
from .upload import UploadError, read_upload, split_text

__all__ = ["HONCHO_ROUTES", "FakeHonchoService", "FakeHonchoStateError", "FakeHonchoTransport"]

NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_NAME = 512
MAX_CONTENT = 25_000
MAX_QUERY = 10_000
MAX_JSON_DEPTH = 64
OBSERVERS_LIMIT = 10
METADATA_MAX_DEPTH = 5
METADATA_MAX_KEYS = 100
CALLS_KEPT = 10_000
SUMMARY_EVERY = (20, 60)
"""Honcho's ``MESSAGES_PER_SHORT_SUMMARY`` and ``MESSAGES_PER_LONG_SUMMARY`` (``src/config.py``): a
session's short summary is written at its 20th message and every 20th after, the long one every 60th."""
"""How many requests ``FakeHonchoService.calls`` keeps by default (the newest)."""
REASONING_LEVELS = ("minimal", "low", "medium", "high", "max")
_W = "/v3/workspaces/([^/]+)"

HONCHO_ROUTES: list[tuple[str, str]] = [
    ("POST", "/v3/workspaces"), ("POST", "/v3/workspaces/list"), ("PUT", "/v3/workspaces/{w}"),
    ("DELETE", "/v3/workspaces/{w}"), ("POST", "/v3/workspaces/{w}/search"),
    ("GET", "/v3/workspaces/{w}/queue/status"), ("POST", "/v3/workspaces/{w}/schedule_dream"),
    ("POST", "/v3/workspaces/{w}/peers"), ("POST", "/v3/workspaces/{w}/peers/list"),
    ("PUT", "/v3/workspaces/{w}/peers/{p}"), ("POST", "/v3/workspaces/{w}/peers/{p}/sessions"),
    ("POST", "/v3/workspaces/{w}/peers/{p}/chat"), ("POST", "/v3/workspaces/{w}/peers/{p}/representation"),
    ("GET", "/v3/workspaces/{w}/peers/{p}/card"), ("PUT", "/v3/workspaces/{w}/peers/{p}/card"),
    ("GET", "/v3/workspaces/{w}/peers/{p}/context"), ("POST", "/v3/workspaces/{w}/peers/{p}/search"),
    ("POST", "/v3/workspaces/{w}/sessions"), ("POST", "/v3/workspaces/{w}/sessions/list"),
    ("PUT", "/v3/workspaces/{w}/sessions/{s}"), ("DELETE", "/v3/workspaces/{w}/sessions/{s}"),
    ("POST", "/v3/workspaces/{w}/sessions/{s}/clone"), ("GET", "/v3/workspaces/{w}/sessions/{s}/peers"),
    ("POST", "/v3/workspaces/{w}/sessions/{s}/peers"), ("PUT", "/v3/workspaces/{w}/sessions/{s}/peers"),
    ("DELETE", "/v3/workspaces/{w}/sessions/{s}/peers"), ("GET", "/v3/workspaces/{w}/sessions/{s}/peers/{p}/config"),
    ("PUT", "/v3/workspaces/{w}/sessions/{s}/peers/{p}/config"), ("GET", "/v3/workspaces/{w}/sessions/{s}/context"),
    ("GET", "/v3/workspaces/{w}/sessions/{s}/summaries"), ("POST", "/v3/workspaces/{w}/sessions/{s}/search"),
    ("POST", "/v3/workspaces/{w}/sessions/{s}/messages"), ("POST", "/v3/workspaces/{w}/sessions/{s}/messages/list"),
    ("POST", "/v3/workspaces/{w}/sessions/{s}/messages/upload"),
    ("GET", "/v3/workspaces/{w}/sessions/{s}/messages/{m}"), ("PUT", "/v3/workspaces/{w}/sessions/{s}/messages/{m}"),
    ("POST", "/v3/workspaces/{w}/conclusions"), ("POST", "/v3/workspaces/{w}/conclusions/list"),
    ("POST", "/v3/workspaces/{w}/conclusions/query"), ("DELETE", "/v3/workspaces/{w}/conclusions/{c}"),
]
"""Every route the fake answers, as the server spells it."""

Reply: TypeAlias = "tuple[int, WireAnswer | httpx.Response]"
"""A route handler's status and answer body (or a whole response, for a stream)."""

Handler: TypeAlias = "Callable[..., Reply]"
"""A route handler: called with the path's ids, then ``body=`` and ``params=``."""

Loc: TypeAlias = "list[str | int]"
"""Where in the request a validation error points (after ``body``)."""

T = TypeVar("T")


class _HttpError(Exception):
    def __init__(self, status: int, detail: str | list[ValidationIssue]) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def _invalid(loc: Loc, msg: str, kind: str = "value_error", value: JSON = None) -> _HttpError:
    return _HttpError(422, [{"type": kind, "loc": ["body", *loc], "msg": msg, "input": value}])


def _query_invalid(name: str, msg: str, kind: str = "value_error") -> _HttpError:
    return _HttpError(422, [{"type": kind, "loc": ["query", name], "msg": msg, "input": None}])


_ENCODE = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(value, ensure_ascii=False)`` without building an encoder per call."""

_C_ENCODE = (None if c_make_encoder is None or c_encode_basestring is None else
             c_make_encoder(None, None, c_encode_basestring, None, ": ", ", ", False, False, True))
"""The C encoder ``_ENCODE`` builds on each call, built once. Without the circular-reference
check: it only encodes values parsed from a request or copied by ``_copy_body``, never circular."""


def _j(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``; a dict or list through the C encoder built once."""
    if _C_ENCODE is not None and (type(value) is dict or type(value) is list):
        return "".join(_C_ENCODE(value, 0))
    return _ENCODE(value)


class FakeHonchoService:
    """The fake memory service's state, its route table and its fault switches."""

    def __init__(self, state_path: Path | str | None = None, *, clock: Clock | None = None,
                 api_key: str | None = None, calls_kept: int = CALLS_KEPT) -> None:
        self.clock = clock or Clock()
        """Where ``created_at`` times come from (the workspace's injected clock)."""
        self.api_key = api_key
        """When set, every request must carry ``Authorization: Bearer <api_key>``."""
        if isinstance(calls_kept, bool) or not isinstance(calls_kept, int) or calls_kept < 1:
            raise ValueError(f"calls_kept must be a positive whole number, not {calls_kept!r}")
        self.calls: deque[tuple[str, str]] = deque(maxlen=calls_kept)
        """The newest ``calls_kept`` requests answered, as ``(method, path)`` (the oldest go first);
        a request refused for want of the API key is not among them."""
        self.refused_calls = 0
        """How many requests were refused with 401 (no or a wrong API key): counted, never kept."""
        self.authorization: str | None = None
        """The ``Authorization`` header of the newest request not refused with 401."""
        self.state_path = Path(state_path) if state_path is not None else None
        """The state's path (SQLite; a ``.json`` path means the ``.db`` beside it), or None (memory)."""
        self._down = False
        self._failures: list[tuple[int, str | None]] = []
        self._scripts: dict[str, Responder] = {}
        self._lock = threading.Lock()
        self._db = open_store(self.state_path)
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            (method, re.compile("^" + re.sub(r"\{\w\}", "([^/]+)", path) + "$"), handler)
            for (method, path), handler in zip(HONCHO_ROUTES, self._handlers(), strict=True)
        ]

    def _handlers(self) -> list[Handler]:
        return [self._workspace, self._list_workspaces, self._update_workspace, self._delete_workspace,
                self._workspace_search, self._queue_status, self._schedule_dream,
                self._peer, self._list_peers, self._update_peer, self._peer_sessions, self._peer_chat,
                self._representation, self._get_card, self._set_card, self._peer_context, self._peer_search,
                self._session, self._list_sessions, self._update_session, self._delete_session, self._clone,
                self._session_peers, self._add_peers, self._set_peers, self._remove_peers,
                self._get_peer_config, self._set_peer_config, self._session_context, self._summaries,
                self._session_search, self._add_messages, self._list_messages, self._upload, self._get_message,
                self._update_message, self._conclusions, self._list_conclusions, self._query_conclusions,
                self._delete_conclusion]

    def close(self) -> None:
        """Close the store."""
        self._db.close()

    # -- fault switches and scripts --------------------------------------------------------

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
        """Answer the next ``times`` calls with ``status`` and Honcho's ``{"detail": ...}``."""
        header = None if retry_after is None else str(retry_after)
        self._failures.extend([(status, header)] * times)

    def fill_disk(self, extra_pages: int | None = 0) -> None:
        """Let the store grow by at most ``extra_pages`` pages more, as a full disk (None lifts it)."""
        with self._lock:
            if extra_pages is None:
                self._db.execute("PRAGMA max_page_count = 1073741823")
            else:
                used = int(self._db.execute("PRAGMA page_count").fetchone()[0])
                self._db.execute(f"PRAGMA max_page_count = {used + int(extra_pages)}")

    def respond(self, kind: AnswerKind, responder: Responder | None) -> None:
        """Script the model-made answer of ``kind`` (see ``answers``); None removes it."""
        if responder is None:
            self._scripts.pop(kind, None)
        else:
            self._scripts[kind] = responder

    def delete_session(self, session_id: str, workspace_id: str = "workbench") -> None:
        """Delete a session entirely, as the server's background deletion ends."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._purge_session(workspace_id, session_id, keep_row=False)
            self._db.execute("COMMIT")

    # -- inspection helpers for tests and views ------------------------------------------

    def _read(self, sql: str, params: tuple[str, ...]) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def session_messages(self, session_id: str, workspace_id: str = "workbench") -> list[Message]:
        """Messages stored in a session, oldest first."""
        rows = self._read("SELECT * FROM messages WHERE workspace_id = ? AND session_id = ? ORDER BY seq",
                          (workspace_id, session_id))
        return [_message(r) for r in rows]

    def all_messages(self, workspace_id: str = "workbench") -> list[Message]:
        """Every message of a workspace, session by session."""
        rows = self._read("SELECT * FROM messages WHERE workspace_id = ? ORDER BY session_id, seq", (workspace_id,))
        return [_message(r) for r in rows]

    def workspace_ids(self) -> list[str]:
        """Every workspace's id."""
        return [r["id"] for r in self._read("SELECT id FROM workspaces ORDER BY rowid", ())]

    def peer_ids(self, workspace_id: str = "workbench") -> list[str]:
        """Every peer's id in a workspace."""
        return [r["id"] for r in self._read("SELECT id FROM peers WHERE workspace_id = ? ORDER BY rowid",
                                            (workspace_id,))]

    def session_members(self, session_id: str, workspace_id: str = "workbench") -> dict[str, SessionPeerConfig]:
        """A session's members and their session configuration."""
        rows = self._read("SELECT peer_id, configuration FROM session_peers WHERE workspace_id = ? "
                          "AND session_id = ? ORDER BY rowid", (workspace_id, session_id))
        return {r["peer_id"]: json.loads(r["configuration"]) for r in rows}

    def stored_conclusions(self, workspace_id: str = "workbench") -> list[Conclusion]:
        """Every conclusion of a workspace, oldest first."""
        return [_conclusion(r) for r in self._read("SELECT * FROM conclusions WHERE workspace_id = ? ORDER BY seq",
                                                   (workspace_id,))]

    # -- dispatch --------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one request (called by the transport and by the served app)."""

        def read_body(handler: Handler) -> JSON | tuple[str, bytes]:
            if handler == self._upload:
                return request.headers.get("content-type", ""), request.content
            return _body(request)

        status, answer, headers = self._reply(request.method, request.url.path, request.headers.get("authorization"),
                                               read_body, request.url.params, request)
        if isinstance(answer, httpx.Response):
            return answer
        if status == 204:
            return httpx.Response(204)
        return httpx.Response(status, json=answer, headers=headers)

    def call(self, method: str, path: str, *, body: JSON = None, params: QueryParams | None = None,
             authorization: str | None = None) -> tuple[int, WireAnswer | JSON, dict[str, str]]:
        """Answer one call made in this process, its body and answer as values, not JSON text.

        What ``handle`` answers to the same request, minus the JSON encoding and parsing a real
        server needs and an in-process caller does not (``HonchoClient`` over this service's
        transport): the body is copied and checked as ``_body`` checks a parsed one (nesting,
        NUL stripped, a lone surrogate refused), so nothing the caller keeps is shared. ``path``
        is the decoded URL path; an unreachable service raises ``httpx.ConnectError``.
        """

        copied, depth = _copy_body(body)  # fails as JSON encoding would, before anything is sent

        def read_body(handler: Handler) -> JSON | tuple[str, bytes]:
            if handler == self._upload:
                raise _HttpError(415, "Unsupported Media Type: an upload is multipart/form-data")
            if copied is not None and depth > MAX_JSON_DEPTH:
                raise _too_deep()
            return copied

        status, answer, headers = self._reply(method, path, authorization, read_body,
                                               params if params is not None else QueryParams(), None)
        if isinstance(answer, httpx.Response):
            content = answer.read()
            try:
                value: JSON = json.loads(content) if content else None
            except ValueError:
                value = content.decode("utf-8", "replace")
            return answer.status_code, value, dict(answer.headers)
        return status, answer, headers

    def _reply(self, method: str, path: str, authorization: str | None,
                read_body: Callable[[Handler], JSON | tuple[str, bytes]], params: QueryParams,
                request: httpx.Request | None) -> tuple[int, WireAnswer | httpx.Response, dict[str, str]]:
        if self._down:
            self._record(method, path, authorization)
            raise httpx.ConnectError("memory service unreachable", request=request)
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            self._record(method, path, authorization)
            status, retry_after = failure
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            return status, {"detail": f"fake Honcho failure {status}"}, headers
        if self.api_key is not None:
            given = authorization or ""
            refusal = None
            if not given.lower().startswith("bearer ") or not given[7:].strip():
                refusal = "No access token provided"
            elif not hmac.compare_digest(given[7:].strip().encode(), self.api_key.encode()):
                refusal = "Invalid JWT"
            if refusal is not None:
                with self._lock:
                    self.refused_calls += 1
                return 401, {"detail": refusal}, {}
        self._record(method, path, authorization)
        path_known = False
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if not match:
                continue
            path_known = True
            if route_method != method:
                continue
            try:
                body = read_body(handler)
                groups = [unquote(g) for g in match.groups()]
                status, answer = self._run(handler, groups, body, params)
                return status, answer, {}
            except _HttpError as exc:
                return exc.status, {"detail": exc.detail}, {}
        if path_known:
            return 405, {"detail": "Method Not Allowed"}, {}
        return 404, {"detail": "Not Found"}, {}

    def _record(self, method: str, path: str, authorization: str | None) -> None:
        self.calls.append((method, path))
        self.authorization = authorization

    def _run(self, handler: Handler, groups: list[str], body: JSON | tuple[str, bytes],
             params: QueryParams) -> tuple[int, WireAnswer | httpx.Response]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                status, answer = handler(*groups, body=body, params=params)
                self._db.execute("COMMIT")
            except (_HttpError, FilterError) as exc:
                self._db.execute("ROLLBACK")
                if isinstance(exc, FilterError):
                    return 422, {"detail": str(exc)}
                return exc.status, {"detail": exc.detail}
            except sqlite3.Error as exc:  # a full disk: nothing of this request is kept
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                return 503, {"detail": f"fake Honcho could not save: {exc}"}
        return status, answer

    # -- plumbing --------------------------------------------------------------------------

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.time(), UTC)

    def _times(self, given: datetime | None = None) -> tuple[str, str]:
        moment = given or self._now()
        return moment.isoformat(), sortable_time(moment)

    def _new_id(self, prefix: str) -> str:
        return self._new_ids(prefix, 1)[0]

    def _new_ids(self, prefix: str, count: int) -> list[str]:
        """``count`` new ids in order (one read and one write of the counter)."""
        row = self._db.execute("SELECT value FROM counter WHERE name = 'next_id'").fetchone()
        value = int(row["value"]) if row else 1
        self._db.execute("INSERT OR REPLACE INTO counter VALUES ('next_id', ?)", (value + count,))
        return [f"{prefix}_{value + i:08d}" for i in range(count)]

    def _one(self, sql: str, *params: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(sql, params).fetchone()
        return row

    def _ensure_workspace(self, wid: str) -> None:
        if self._one("SELECT 1 FROM workspaces WHERE id = ?", wid) is None:
            self._db.execute("INSERT INTO workspaces (id, created_at, ts) VALUES (?, ?, ?)", (wid, *self._times()))

    def _workspace_row(self, wid: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM workspaces WHERE id = ?", wid)
        if row is None:
            raise _HttpError(404, f"Workspace {wid} not found")
        return row

    def _ensure_peer(self, wid: str, pid: str, metadata: JSONObject | None = None,
                     configuration: JSONObject | None = None) -> tuple[bool, sqlite3.Row]:
        row = self._one("SELECT * FROM peers WHERE workspace_id = ? AND id = ?", wid, pid)
        if row is None:
            self._ensure_workspace(wid)
            self._db.execute("INSERT INTO peers VALUES (?, ?, ?, ?, ?, ?)",
                             (wid, pid, _j(metadata or {}), _j(configuration or {}), *self._times()))
            created = True
        else:
            if metadata is not None:
                self._db.execute("UPDATE peers SET metadata = ? WHERE workspace_id = ? AND id = ?",
                                 (_j(metadata), wid, pid))
            if configuration is not None:
                self._db.execute("UPDATE peers SET configuration = ? WHERE workspace_id = ? AND id = ?",
                                 (_j(configuration), wid, pid))
            created = False
        fresh = self._one("SELECT * FROM peers WHERE workspace_id = ? AND id = ?", wid, pid)
        assert fresh is not None
        return created, fresh

    def _peer_row(self, wid: str, pid: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM peers WHERE workspace_id = ? AND id = ?", wid, pid)
        if row is None:
            raise _HttpError(404, f"Peer {pid} not found in workspace {wid}")
        return row

    def _session_row(self, wid: str, sid: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM sessions WHERE workspace_id = ? AND id = ?", wid, sid)
        if row is None or not row["is_active"]:
            raise _HttpError(404, f"Session {sid} not found in workspace {wid}")
        return row

    def _ensure_session(self, wid: str, sid: str, metadata: JSONObject | None = None,
                        configuration: JSONObject | None = None,
                        peers: dict[str, SessionPeerConfig] | None = None) -> tuple[bool, sqlite3.Row]:
        row = self._one("SELECT * FROM sessions WHERE workspace_id = ? AND id = ?", wid, sid)
        if row is not None and not row["is_active"]:
            raise _HttpError(404, f"Session {sid} not found in workspace {wid}")
        created = row is None
        if created:
            observers = sum(1 for c in (peers or {}).values() if c.get("observe_others"))
            if observers > OBSERVERS_LIMIT:
                raise _HttpError(400, f"Cannot create session {sid} with {observers} observers. Maximum allowed is "
                                      f"{OBSERVERS_LIMIT} observers per session. Observers are peers with "
                                      "'observe_others' set to true.")
            self._ensure_workspace(wid)
            self._db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, 1, ?, ?)",
                             (wid, sid, _j(metadata or {}), _j(configuration or {}), *self._times()))
        else:
            assert row is not None
            if metadata is not None:
                self._db.execute("UPDATE sessions SET metadata = ? WHERE workspace_id = ? AND id = ?",
                                 (_j(metadata), wid, sid))
            if configuration is not None:
                merged = {**json.loads(row["configuration"]), **configuration}
                self._db.execute("UPDATE sessions SET configuration = ? WHERE workspace_id = ? AND id = ?",
                                 (_j(merged), wid, sid))
        if peers:
            self._join(wid, sid, peers, replace_config=False)
        fresh = self._one("SELECT * FROM sessions WHERE workspace_id = ? AND id = ?", wid, sid)
        assert fresh is not None
        return created, fresh

    def _join(self, wid: str, sid: str, peers: dict[str, SessionPeerConfig], *, replace_config: bool) -> None:
        for pid, config in peers.items():
            self._ensure_peer(wid, pid)
            verb = "INSERT OR REPLACE" if replace_config else "INSERT OR IGNORE"
            self._db.execute(f"{verb} INTO session_peers VALUES (?, ?, ?, ?)", (wid, sid, pid, _j(config)))

    def _purge_session(self, wid: str, sid: str, *, keep_row: bool) -> None:
        self._db.execute("DELETE FROM messages WHERE workspace_id = ? AND session_id = ?", (wid, sid))
        self._db.execute("DELETE FROM session_peers WHERE workspace_id = ? AND session_id = ?", (wid, sid))
        self._db.execute("DELETE FROM conclusions WHERE workspace_id = ? AND session_id = ?", (wid, sid))
        if keep_row:
            self._db.execute("UPDATE sessions SET is_active = 0 WHERE workspace_id = ? AND id = ?", (wid, sid))
        else:
            self._db.execute("DELETE FROM sessions WHERE workspace_id = ? AND id = ?", (wid, sid))

    def _page(self, table: str, where: str, params: list[SQLValue], query: QueryParams,
              convert: Callable[[sqlite3.Row], T], order: str = "rowid") -> Page[T]:
        page, size = _int_param(query, "page", 1, 1, None), _int_param(query, "size", 50, 1, 100)
        reverse = _bool_param(query, "reverse")
        total = int(self._db.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0])
        direction = "DESC" if reverse else "ASC"
        # the page's rowids first (an index walk when unfiltered), then only those rows are read
        rows = self._db.execute(f"SELECT * FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {where} "
                                f"ORDER BY {order} {direction} LIMIT ? OFFSET ?) ORDER BY {order} {direction}",
                                [*params, size, (page - 1) * size]).fetchall()
        return {"items": [convert(r) for r in rows], "total": total, "page": page, "size": size,
                "pages": -(-total // size)}

    def _answer(self, ask: HonchoAsk) -> Answer:
        script = self._scripts.get(ask.kind)
        if script is not None:
            value = script(ask)
            if value is not None:
                return value
        return default_answer(ask)

    def _card_answer(self, ask: HonchoAsk) -> list[str] | None:
        """The peer card ``ask`` is answered with (a script's single text is a one-line card)."""
        answer = self._answer(ask)
        return [answer] if isinstance(answer, str) else answer

    def _scope_messages(self, wid: str, observed: str | None, sessions: list[str] | None,
                        limit: int = 200) -> list[Message]:
        sql, params = "SELECT * FROM messages WHERE workspace_id = ?", [wid]
        if observed is not None:
            sql, params = sql + " AND peer_id = ?", [*params, observed]
        if sessions is not None:
            sql += f" AND session_id IN ({', '.join('?' * len(sessions))})"
            params.extend(sessions)
        rows = self._db.execute(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit]).fetchall()
        return [_message(r) for r in reversed(rows)]

    def _conclusion_texts(self, wid: str, observer: str | None, observed: str | None) -> list[str]:
        sql, params = "SELECT content FROM conclusions WHERE workspace_id = ?", [wid]
        if observed is not None:
            sql, params = sql + " AND observed_id = ?", [*params, observed]
        if observer is not None:
            sql, params = sql + " AND observer_id = ?", [*params, observer]
        return [r["content"] for r in self._db.execute(sql + " ORDER BY seq", params).fetchall()]

    def _card(self, wid: str, observer: str, observed: str) -> list[str] | None:
        row = self._one("SELECT card FROM peer_cards WHERE workspace_id = ? AND observer_id = ? AND observed_id = ?",
                        wid, observer, observed)
        return json.loads(row["card"]) if row else None

    def _search(self, wid: str, body: JSON, scope_sql: str, scope_params: list[str]) -> list[Message]:
        body = _object(body)
        query = body.get("query")
        if not isinstance(query, str):
            raise _invalid(["query"], "Field required", "missing")
        limit = _int_field(body, "limit", 10, 1, 100)
        where = compile_filter(body.get("filters"), "messages", alias="m")
        words = re.findall(r"\w+", query)
        if words:
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            rows = self._db.execute(
                "SELECT m.* FROM messages_fts f JOIN messages m ON m.seq = f.rowid WHERE messages_fts MATCH ? "
                f"AND m.workspace_id = ? {scope_sql} AND {where.sql} ORDER BY f.rowid DESC LIMIT ?",
                [match, wid, *scope_params, *where.params, limit]).fetchall()
        else:
            rows = self._db.execute(
                f"SELECT m.* FROM messages m WHERE m.workspace_id = ? {scope_sql} AND {where.sql} "
                "AND instr(lower(m.content), lower(?)) > 0 ORDER BY m.seq DESC LIMIT ?",
                [wid, *scope_params, *where.params, query, limit]).fetchall()
        return [_message(r) for r in rows]

    # -- workspaces ------------------------------------------------------------------------

    def _workspace(self, *, body: JSON, params: QueryParams) -> tuple[int, Workspace]:
        body = _object(body)
        wid = _name(body, "id")
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        created = self._one("SELECT 1 FROM workspaces WHERE id = ?", wid) is None
        if created:
            self._db.execute("INSERT INTO workspaces VALUES (?, ?, ?, ?, ?)",
                             (wid, _j(metadata or {}), _j(configuration or {}), *self._times()))
        return (201 if created else 200), _workspace(self._workspace_row(wid))

    def _list_workspaces(self, *, body: JSON, params: QueryParams) -> tuple[int, Page[Workspace]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "workspaces")
        return 200, self._page("workspaces", where.sql, where.params, params, _workspace)

    def _update_workspace(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Workspace]:
        body = _object(body)
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        self._ensure_workspace(wid)
        if metadata is not None:
            self._db.execute("UPDATE workspaces SET metadata = ? WHERE id = ?", (_j(metadata), wid))
        if configuration is not None:
            self._db.execute("UPDATE workspaces SET configuration = ? WHERE id = ?", (_j(configuration), wid))
        return 200, _workspace(self._workspace_row(wid))

    def _delete_workspace(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, dict[str, str]]:
        self._workspace_row(wid)
        if self._one("SELECT 1 FROM sessions WHERE workspace_id = ? AND is_active = 1", wid) is not None:
            raise _HttpError(409, f"Cannot delete workspace '{wid}': active session(s) remain. "
                                  "Delete all sessions first.")
        for table in ("messages", "session_peers", "conclusions", "peer_cards", "peers", "sessions"):
            self._db.execute(f"DELETE FROM {table} WHERE workspace_id = ?", (wid,))
        self._db.execute("DELETE FROM workspaces WHERE id = ?", (wid,))
        return 202, {"message": "Workspace deletion accepted"}

    def _workspace_search(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Message]]:
        return 200, self._search(wid, body, "", [])

    def _queue_status(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, QueueStatus]:
        self._workspace_row(wid)
        return 200, {"total_work_units": 0, "completed_work_units": 0, "in_progress_work_units": 0,
                     "pending_work_units": 0, "sessions": None}

    def _schedule_dream(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, None]:
        body = _object(body)
        self._workspace_row(wid)
        if not isinstance(body.get("observer"), str):
            raise _invalid(["observer"], "Field required", "missing")
        return 204, None

    # -- peers -----------------------------------------------------------------------------

    def _peer(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Peer]:
        body = _object(body)
        pid = _name(body, "id")
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        created, row = self._ensure_peer(wid, pid, metadata, configuration)
        return (201 if created else 200), _peer(row)

    def _list_peers(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Peer]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "peers")
        return 200, self._page("peers", f"workspace_id = ? AND {where.sql}", [wid, *where.params], params, _peer)

    def _update_peer(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, Peer]:
        body = _object(body)
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        return 200, _peer(self._ensure_peer(wid, pid, metadata, configuration)[1])

    def _peer_sessions(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Session]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "sessions")
        scope = ("workspace_id = ? AND is_active = 1 AND id IN (SELECT session_id FROM session_peers "
                 "WHERE workspace_id = ? AND peer_id = ?)")
        return 200, self._page("sessions", f"{scope} AND {where.sql}", [wid, wid, pid, *where.params], params,
                               _session)

    def _peer_chat(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> Reply:
        body = _object(body)
        query = body.get("query")
        if not isinstance(query, str):
            raise _invalid(["query"], "Field required", "missing")
        if not 1 <= len(query) <= MAX_QUERY:
            raise _invalid(["query"], f"String should have at {'least 1 character' if not query else 'most 10000 characters'}",
                           "string_too_short" if not query else "string_too_long")
        level = body.get("reasoning_level", "low")
        if level not in REASONING_LEVELS:
            raise _invalid(["reasoning_level"], "Input should be 'minimal', 'low', 'medium', 'high' or 'max'",
                           "literal_error", level)
        session_id = _optional_str(body, "session_id")
        sessions = extract_session_allowlist(body.get("filters"), must_include=session_id)
        if sessions is None and session_id is not None:
            sessions = [session_id]
        self._peer_row(wid, pid)
        target = _optional_str(body, "target")
        observed = target or pid
        ask = HonchoAsk("chat", wid, pid, target, session_id, query, self._scope_messages(wid, observed, sessions),
                        self._conclusion_texts(wid, None, observed), self._card(wid, pid, observed))
        content = str(self._answer(ask))
        if body.get("stream") is True:
            chunks = [{"delta": {"content": content}, "done": False}, {"delta": {}, "done": True}]
            text = "".join(f"data: {_j(c)}\n\n" for c in chunks)
            return 200, httpx.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})
        return 200, {"content": content}

    def _representation(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, RepresentationAnswer]:
        body = _optional_object(body)
        session_id = _optional_str(body, "session_id")
        sessions = extract_session_allowlist(body.get("filters"), must_include=session_id)
        if sessions is None and session_id is not None:
            sessions = [session_id]
        for key in ("search_top_k", "max_conclusions"):
            if body.get(key) is not None:
                _int_field(body, key, 0, 1, 100)
        target = _optional_str(body, "target")
        self._peer_row(wid, pid)
        observed = target or pid
        ask = HonchoAsk("representation", wid, pid, target, session_id, _optional_str(body, "search_query"),
                        self._scope_messages(wid, observed, sessions), self._conclusion_texts(wid, None, observed))
        return 200, {"representation": str(self._answer(ask))}

    def _get_card(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, PeerCardAnswer]:
        self._peer_row(wid, pid)
        observed = _param(params, "target") or pid
        card = self._card_answer(HonchoAsk("card", wid, pid, _param(params, "target"),
                                           card=self._card(wid, pid, observed)))
        return 200, {"peer_card": card}

    def _set_card(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, PeerCardAnswer]:
        body = _object(body)
        card = body.get("peer_card")
        if not _strings(card):
            raise _invalid(["peer_card"], "Input should be a valid list of strings", "list_type")
        self._peer_row(wid, pid)
        observed = _param(params, "target") or pid
        self._ensure_peer(wid, observed)
        self._db.execute("INSERT OR REPLACE INTO peer_cards VALUES (?, ?, ?, ?)", (wid, pid, observed, _j(card)))
        return 200, {"peer_card": card}

    def _peer_context(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, PeerContext]:
        self._peer_row(wid, pid)
        target = _param(params, "target")
        observed = target or pid
        ask = HonchoAsk("representation", wid, pid, target, None, _param(params, "search_query"),
                        self._scope_messages(wid, observed, None), self._conclusion_texts(wid, None, observed))
        card = self._card_answer(HonchoAsk("card", wid, pid, target, card=self._card(wid, pid, observed)))
        return 200, {"peer_id": pid, "target_id": observed, "representation": str(self._answer(ask)),
                     "peer_card": card}

    def _peer_search(self, wid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Message]]:
        return 200, self._search(wid, body, "AND m.peer_id = ?", [pid])

    # -- sessions --------------------------------------------------------------------------

    def _session(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        body = _object(body)
        sid = _name(body, "id")
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        peers = _peer_configs(body.get("peers"), ["peers"])
        created, row = self._ensure_session(wid, sid, metadata, configuration, peers)
        return (201 if created else 200), _session(row)

    def _list_sessions(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Session]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "sessions")
        return 200, self._page("sessions", f"workspace_id = ? AND is_active = 1 AND {where.sql}",
                               [wid, *where.params], params, _session)

    def _update_session(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        body = _object(body)
        metadata = _metadata(body.get("metadata"), ["metadata"])
        configuration = _config(body.get("configuration"), ["configuration"])
        return 200, _session(self._ensure_session(wid, sid, metadata, configuration)[1])

    def _delete_session(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, dict[str, str]]:
        self._session_row(wid, sid)
        self._purge_session(wid, sid, keep_row=True)
        return 202, {"message": "Session deleted successfully"}

    def _clone(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        original = self._session_row(wid, sid)
        cutoff = _param(params, "message_id")
        limit_seq = None
        if cutoff is not None:
            row = self._one("SELECT seq FROM messages WHERE workspace_id = ? AND session_id = ? AND id = ?",
                            wid, sid, cutoff)
            if row is None:
                raise _HttpError(404, f"Message {cutoff} not found in session {sid}")
            limit_seq = row["seq"]
        new_id = self._new_id("clone")
        self._db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, 1, ?, ?)",
                         (wid, new_id, original["metadata"], original["configuration"], *self._times()))
        self._db.execute("INSERT INTO session_peers SELECT workspace_id, ?, peer_id, configuration FROM session_peers "
                         "WHERE workspace_id = ? AND session_id = ?", (new_id, wid, sid))
        rows = self._db.execute("SELECT * FROM messages WHERE workspace_id = ? AND session_id = ? "
                                + ("AND seq <= ? " if limit_seq is not None else "") + "ORDER BY seq",
                                [wid, sid] + ([limit_seq] if limit_seq is not None else [])).fetchall()
        first = last_message_seq(self._db)
        self._db.executemany("INSERT INTO messages (id, workspace_id, session_id, peer_id, content, metadata, "
                             "created_at, ts, token_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             [(mid, wid, new_id, m["peer_id"], m["content"], m["metadata"], m["created_at"], m["ts"],
                               m["token_count"]) for mid, m in zip(self._new_ids("msg", len(rows)), rows)])
        index_messages(self._db, first)
        return 201, _session(self._session_row(wid, new_id))

    def _members(self, wid: str, sid: str) -> str:
        return "workspace_id = ? AND id IN (SELECT peer_id FROM session_peers WHERE workspace_id = ? AND session_id = ?)"

    def _session_peers(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Peer]]:
        self._session_row(wid, sid)
        return 200, self._page("peers", self._members(wid, sid), [wid, wid, sid], params, _peer)

    def _add_peers(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        peers = _peer_configs(body, []) or {}
        self._session_row(wid, sid)
        self._join(wid, sid, peers, replace_config=False)
        self._check_observers(wid, sid)
        return 200, _session(self._session_row(wid, sid))

    def _set_peers(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        peers = _peer_configs(body, []) or {}
        self._session_row(wid, sid)
        self._db.execute("DELETE FROM session_peers WHERE workspace_id = ? AND session_id = ?", (wid, sid))
        self._join(wid, sid, peers, replace_config=True)
        self._check_observers(wid, sid)
        return 200, _session(self._session_row(wid, sid))

    def _remove_peers(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Session]:
        if not isinstance(body, list) or not all(isinstance(p, str) for p in body):
            raise _invalid([], "Input should be a valid list", "list_type", body)
        self._session_row(wid, sid)
        for pid in body:
            self._db.execute("DELETE FROM session_peers WHERE workspace_id = ? AND session_id = ? AND peer_id = ?",
                             (wid, sid, pid))
        return 200, _session(self._session_row(wid, sid))

    def _check_observers(self, wid: str, sid: str) -> None:
        count = sum(1 for c in self.session_members_in_tx(wid, sid).values() if c.get("observe_others"))
        if count > OBSERVERS_LIMIT:
            raise _HttpError(400, f"Cannot create session {sid} with {count} observers. Maximum allowed is "
                                  f"{OBSERVERS_LIMIT} observers per session. Observers are peers with "
                                  "'observe_others' set to true.")

    def session_members_in_tx(self, wid: str, sid: str) -> dict[str, SessionPeerConfig]:
        """A session's members, read inside the running request's transaction."""
        rows = self._db.execute("SELECT peer_id, configuration FROM session_peers WHERE workspace_id = ? "
                                "AND session_id = ?", (wid, sid)).fetchall()
        return {r["peer_id"]: json.loads(r["configuration"]) for r in rows}

    def _get_peer_config(self, wid: str, sid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, SessionPeerConfig]:
        self._peer_row(wid, pid)
        row = self._one("SELECT configuration FROM session_peers WHERE workspace_id = ? AND session_id = ? "
                        "AND peer_id = ?", wid, sid, pid)
        if row is None:
            raise _HttpError(404, f"Session peer {pid} not found in session {sid} in workspace {wid}")
        config = json.loads(row["configuration"])
        return 200, {"observe_me": config.get("observe_me"), "observe_others": config.get("observe_others")}

    def _set_peer_config(self, wid: str, sid: str, pid: str, *, body: JSON, params: QueryParams) -> tuple[int, None]:
        config = _peer_config(body, [])
        self._session_row(wid, sid)
        self._peer_row(wid, pid)
        row = self._one("SELECT configuration FROM session_peers WHERE workspace_id = ? AND session_id = ? "
                        "AND peer_id = ?", wid, sid, pid)
        update = {k: v for k, v in config.items() if v is not None}
        merged = {**(json.loads(row["configuration"]) if row else {}), **update}
        self._db.execute("INSERT OR REPLACE INTO session_peers VALUES (?, ?, ?, ?)", (wid, sid, pid, _j(merged)))
        self._check_observers(wid, sid)
        return 204, None

    def _summary_every(self, wid: str, sid: str) -> tuple[int, int] | None:
        """How many messages apart the session's short and long summaries are written (the session's
        ``summary`` configuration, else the workspace's, else Honcho's 20 and 60), or None when
        summaries are off (``summary.enabled: false``)."""
        short, long = SUMMARY_EVERY
        rows = [self._one("SELECT configuration FROM workspaces WHERE id = ?", wid),
                self._one("SELECT configuration FROM sessions WHERE workspace_id = ? AND id = ?", wid, sid)]
        for row in rows:  # the workspace's first, then the session's over it
            config = json.loads(row["configuration"]) if row else {}
            summary = config.get("summary") if isinstance(config, dict) else None
            if not isinstance(summary, dict):
                continue
            if summary.get("enabled") is False:
                return None
            given = summary.get("messages_per_short_summary")
            short = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else short
            given = summary.get("messages_per_long_summary")
            long = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else long
        return short, long

    def _summary(self, wid: str, sid: str, kind: str) -> Summary | None:
        """The session's newest ``kind`` summary, as real Honcho writes them: after every
        ``messages_per_short_summary`` (20) messages a short one, every ``messages_per_long_summary``
        (60) a long one, each up to the message that reached the count (``message_id``); before the
        first such message there is none."""
        every = self._summary_every(wid, sid)
        if every is None:
            return None
        period = every[0] if kind == "short" else every[1]
        count = int(self._db.execute("SELECT COUNT(*) FROM messages WHERE workspace_id = ? AND session_id = ?",
                                     (wid, sid)).fetchone()[0])
        upto = count - count % period
        if upto == 0:
            return None
        rows = self._db.execute("SELECT * FROM messages WHERE workspace_id = ? AND session_id = ? ORDER BY seq "
                                "LIMIT ? OFFSET ?", (wid, sid, min(upto, 100 if kind == "short" else 300),
                                                     max(0, upto - (100 if kind == "short" else 300)))).fetchall()
        messages = [_message(r) for r in rows]
        text = str(self._answer(HonchoAsk("summary", wid, None, None, sid, kind, messages)))
        return {"content": text, "message_id": messages[-1]["id"], "summary_type": kind,
                "created_at": messages[-1]["created_at"], "token_count": len(text.split())}

    def _session_context(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, SessionContext]:
        self._session_row(wid, sid)
        tokens = _int_param(params, "tokens", 100_000, 1, 100_000)
        include_summary = _bool_param(params, "summary", default=True)
        rows = self._db.execute("SELECT * FROM messages WHERE workspace_id = ? AND session_id = ? ORDER BY seq DESC",
                                (wid, sid))
        picked: list[Message] = []
        used = 0
        for row in rows:
            if used + row["token_count"] > tokens:
                break
            used += row["token_count"]
            picked.append(_message(row))
        picked.reverse()
        target = _param(params, "peer_target")
        perspective = _param(params, "peer_perspective")
        representation = card = None
        if target:
            sessions = [sid] if _bool_param(params, "limit_to_session") else None
            ask = HonchoAsk("representation", wid, perspective or target, target, sid, _param(params, "search_query"),
                            self._scope_messages(wid, target, sessions), self._conclusion_texts(wid, None, target))
            representation = str(self._answer(ask))
            card = self._card_answer(HonchoAsk("card", wid, perspective or target, target,
                                               card=self._card(wid, perspective or target, target)))
        summary = None
        if include_summary:  # as Honcho picks: the long one when it fits 40% of the budget and says more
            short, long = self._summary(wid, sid, "short"), self._summary(wid, sid, "long")
            budget = int(tokens * 0.4)
            if long is not None and long["token_count"] <= budget and long["token_count"] > (
                    short["token_count"] if short is not None else 0):
                summary = long
            elif short is not None and 0 < short["token_count"] <= budget:
                summary = short
        return 200, {"id": sid, "messages": picked, "summary": summary, "peer_representation": representation,
                     "peer_card": card}

    def _summaries(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, SessionSummaries]:
        self._session_row(wid, sid)
        return 200, {"id": sid, "short_summary": self._summary(wid, sid, "short"),
                     "long_summary": self._summary(wid, sid, "long")}

    def _session_search(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Message]]:
        return 200, self._search(wid, body, "AND m.session_id = ?", [sid])

    # -- messages --------------------------------------------------------------------------

    def _add_messages(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Message]]:
        items = _object(body).get("messages")
        if not isinstance(items, list):
            raise _invalid(["messages"], "Field required" if items is None else "Input should be a valid list",
                           "missing" if items is None else "list_type")
        if not items:
            raise _invalid(["messages"], "List should have at least 1 item after validation, not 0", "too_short")
        if len(items) > 100:
            raise _invalid(["messages"], f"List should have at most 100 items after validation, not {len(items)}",
                           "too_long")
        checked = []
        peers: set[str] = set()  # names already checked in this batch (a batch has few authors)
        moments: dict[str, datetime | None] = {}  # times already parsed in this batch
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise _invalid(["messages", index], "Input should be a valid dictionary", "dict_type")
            content = item.get("content")
            if not isinstance(content, str):
                raise _invalid(["messages", index, "content"], "Field required", "missing")
            if len(content) > MAX_CONTENT:
                raise _invalid(["messages", index, "content"], f"String should have at most {MAX_CONTENT} characters",
                               "string_too_long")
            peer = item.get("peer_id")
            if not isinstance(peer, str) or peer not in peers:
                if not isinstance(peer, str) or not NAME.match(peer) or len(peer) > MAX_NAME:
                    raise _invalid(["messages", index, "peer_id"], "String should match pattern '^[a-zA-Z0-9_-]+$'",
                                   "string_pattern_mismatch", peer)
                peers.add(peer)
            when = item.get("created_at")
            if isinstance(when, str):
                if when not in moments:
                    moments[when] = parse_time(when)
                moment = moments[when]
            else:
                moment = None
            if when is not None and moment is None:
                raise _invalid(["messages", index, "created_at"], "Input should be a valid datetime", "datetime_parsing")
            metadata = _metadata(item.get("metadata"), ["messages", index, "metadata"])
            checked.append((content, peer, metadata or {}, moment))
        return 201, self._store(wid, sid, checked)

    def _store(self, wid: str, sid: str, checked: list[tuple[str, str, JSONObject, datetime | None]]
               ) -> list[Message]:
        """Insert a batch's messages (one statement for all rows, one for their search index)."""
        self._ensure_session(wid, sid, peers={p: {"observe_me": None, "observe_others": None}
                                              for p in dict.fromkeys(c[1] for c in checked)})
        ids = self._new_ids("msg", len(checked))
        stamps: dict[datetime | None, tuple[str, str]] = {}  # one "now" per request, as a transaction's now()
        rows: list[tuple[str, str, str, str, str, str, str, str, int]] = []
        created: list[Message] = []
        for mid, (content, peer, metadata, moment) in zip(ids, checked):
            stamp = stamps.get(moment)
            if stamp is None:
                stamp = stamps[moment] = self._times(moment)
            at, ts = stamp
            tokens = len(content.split())
            rows.append((mid, wid, sid, peer, content, _j(metadata), at, ts, tokens))
            created.append({"id": mid, "content": content, "peer_id": peer, "session_id": sid, "metadata": metadata,
                            "created_at": at, "workspace_id": wid, "token_count": tokens})
        first = last_message_seq(self._db)
        self._db.executemany("INSERT INTO messages (id, workspace_id, session_id, peer_id, content, metadata, "
                             "created_at, ts, token_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        index_messages(self._db, first)
        return created

    def _upload(self, wid: str, sid: str, *, body: tuple[str, bytes], params: QueryParams) -> tuple[int, list[Message]]:
        content_type, raw = body
        try:
            upload = read_upload(content_type, raw)
        except UploadError as exc:
            raise _HttpError(exc.status, exc.detail) from None
        if not NAME.match(upload.peer_id) or len(upload.peer_id) > MAX_NAME:
            raise _invalid(["peer_id"], "String should match pattern '^[a-zA-Z0-9_-]+$'", "string_pattern_mismatch",
                           upload.peer_id)
        moment = parse_time(upload.created_at) if upload.created_at else None
        if upload.created_at and moment is None:
            raise _invalid(["created_at"], "Input should be a valid datetime", "datetime_parsing")
        metadata = _metadata(upload.metadata if isinstance(upload.metadata, dict) else None, ["metadata"]) or {}
        text = upload.text.replace("\x00", "")
        problem = value_problem(text, "file")
        if problem is not None:
            raise _invalid(["file"], problem, "string_unicode")
        chunks = split_text(text, MAX_CONTENT)
        return 201, self._store(wid, sid, [(c, upload.peer_id, metadata, moment) for c in chunks])

    def _list_messages(self, wid: str, sid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Message]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "messages")
        return 200, self._page("messages", f"workspace_id = ? AND session_id = ? AND {where.sql}",
                               [wid, sid, *where.params], params, _message, order="seq")

    def _message_row(self, wid: str, sid: str, mid: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM messages WHERE workspace_id = ? AND session_id = ? AND id = ?", wid, sid, mid)
        if row is None:
            raise _HttpError(404, f"Message with ID {mid} not found")
        return row

    def _get_message(self, wid: str, sid: str, mid: str, *, body: JSON, params: QueryParams) -> tuple[int, Message]:
        return 200, _message(self._message_row(wid, sid, mid))

    def _update_message(self, wid: str, sid: str, mid: str, *, body: JSON, params: QueryParams) -> tuple[int, Message]:
        metadata = _metadata(_object(body).get("metadata"), ["metadata"])
        self._message_row(wid, sid, mid)
        if metadata is not None:
            self._db.execute("UPDATE messages SET metadata = ? WHERE id = ?", (_j(metadata), mid))
        return 200, _message(self._message_row(wid, sid, mid))

    # -- conclusions -----------------------------------------------------------------------

    def _conclusions(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Conclusion]]:
        body = _object(body)
        items = body.get("conclusions", body.get("observations"))
        if not isinstance(items, list) or not items:
            raise _invalid(["conclusions"], "List should have at least 1 item after validation, not 0", "too_short")
        if len(items) > 100:
            raise _invalid(["conclusions"], f"List should have at most 100 items after validation, not {len(items)}",
                           "too_long")
        self._ensure_workspace(wid)
        created = []
        for index, item in enumerate(items):
            fields = item if isinstance(item, dict) else {}
            content = fields.get("content")
            if not isinstance(content, str) or not 1 <= len(content) <= 65535:
                raise _invalid(["conclusions", index, "content"], "String should have 1..65535 characters")
            observer, observed = fields.get("observer_id"), fields.get("observed_id")
            for key, value in (("observer_id", observer), ("observed_id", observed)):
                if not isinstance(value, str):
                    raise _invalid(["conclusions", index, key], "Field required", "missing")
            session_id = fields.get("session_id")
            cid = self._new_id("con")
            at, ts = self._times()
            self._db.execute("INSERT INTO conclusions (id, workspace_id, observer_id, observed_id, session_id, "
                             "content, created_at, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (cid, wid, observer, observed, session_id, content, at, ts))
            created.append(_conclusion(self._one("SELECT * FROM conclusions WHERE id = ?", cid)))
        return 201, created

    def _list_conclusions(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, Page[Conclusion]]:
        where = compile_filter(_optional_object(body).get("filters") or None, "conclusions")
        return 200, self._page("conclusions", f"workspace_id = ? AND {where.sql}", [wid, *where.params], params,
                               _conclusion, order="seq")

    def _query_conclusions(self, wid: str, *, body: JSON, params: QueryParams) -> tuple[int, list[Conclusion]]:
        body = _object(body)
        query = body.get("query")
        if not isinstance(query, str):
            raise _invalid(["query"], "Field required", "missing")
        top_k = _int_field(body, "top_k", 10, 1, 100)
        where = compile_filter(body.get("filters"), "conclusions")
        rows = self._db.execute(f"SELECT * FROM conclusions WHERE workspace_id = ? AND {where.sql} ORDER BY seq",
                                [wid, *where.params]).fetchall()
        return 200, rank([_conclusion(r) for r in rows], query)[:top_k]

    def _delete_conclusion(self, wid: str, cid: str, *, body: JSON, params: QueryParams) -> tuple[int, None]:
        if self._one("SELECT 1 FROM conclusions WHERE workspace_id = ? AND id = ?", wid, cid) is None:
            raise _HttpError(404, f"Conclusion {cid} not found")
        self._db.execute("DELETE FROM conclusions WHERE workspace_id = ? AND id = ?", (wid, cid))
        return 204, None


class FakeHonchoTransport(httpx.AsyncBaseTransport):
    """The httpx transport in front of a ``FakeHonchoService``."""

    def __init__(self, service: FakeHonchoService) -> None:
        self.service = service

    @property
    def honcho_service(self) -> FakeHonchoService:
        """The service behind this transport, for a client in this process (``InProcessTransport``)."""
        return self.service

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.service.handle(request)


# -- request reading ---------------------------------------------------------------------------

def _body(request: httpx.Request) -> JSON:
    raw = request.content
    if not raw:
        return None
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise _HttpError(415, f"Unsupported Media Type: a request body must be application/json, not {kind or 'unset'}")
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _HttpError(422, [{"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error",
                                "input": None}]) from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise _too_deep()
    if b"\\u" not in raw:  # only a JSON escape can put NUL or a lone surrogate into UTF-8 JSON text
        return body
    body = _strip_nul(body)
    problem = value_problem(body, "body")
    if problem is not None:  # PostgreSQL cannot hold it: refused before anything is stored
        raise _HttpError(422, [{"type": "string_unicode", "loc": ["body"], "msg": problem, "input": None}])
    return body


def _too_deep() -> _HttpError:
    return _HttpError(422, [{"type": "json_invalid", "loc": ["body"],
                             "msg": f"JSON nests deeper than {MAX_JSON_DEPTH} levels", "input": None}])


def _copy_body(value: object) -> tuple[JSON, int]:
    """An in-process caller's body as parsing its JSON text would give it, and its ``_depth``.

    A fresh copy (lists for tuples), NUL removed from every string as ``_body`` does. What JSON
    encoding refuses fails the same way here: a lone surrogate (``UnicodeEncodeError``), a float
    JSON cannot hold (``ValueError``), a value of another type (``TypeError``).
    """
    strings: list[str] = []
    deepest = [1]
    copy = _copy_json(value, 1, strings, deepest)
    joined = "".join(strings)
    joined.encode("utf-8")  # a lone surrogate raises here, as httpx's encoding of the body would
    if "\x00" in joined:
        copy = _strip_nul(copy)
    return copy, deepest[0] - 1


def _copy_json(value: object, level: int, strings: list[str], deepest: list[int]) -> JSON:
    """A copy of ``value`` (a node at ``level``) as its JSON text parses; every string into ``strings``,
    the deepest level holding a node into ``deepest[0]``."""
    if isinstance(value, str):
        strings.append(value)
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and type(value) is int:
        return value
    if isinstance(value, float) and type(value) is float:
        if value - value != 0.0:  # NaN or an infinity
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return value
    if isinstance(value, dict):
        if value and level >= deepest[0]:
            deepest[0] = level + 1
        copied: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):  # JSON text holds every key as a string: what it would parse to
                return _copy_json(json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False)), level,
                                  strings, deepest)
            strings.append(key)
            if isinstance(item, str):
                strings.append(item)
                copied[key] = item
            elif type(item) is int or item is None or isinstance(item, bool):
                copied[key] = item
            else:
                copied[key] = _copy_json(item, level + 1, strings, deepest)
        return copied
    if isinstance(value, (list, tuple)):
        if value and level >= deepest[0]:
            deepest[0] = level + 1
        listed: list[JSON] = []
        for item in value:
            if isinstance(item, str):
                strings.append(item)
                listed.append(item)
            elif type(item) is int or item is None or isinstance(item, bool):
                listed.append(item)
            else:
                listed.append(_copy_json(item, level + 1, strings, deepest))
        return listed
    # anything else (an int or float subclass, another type): what its JSON text would parse to, or
    # the TypeError JSON encoding raises
    return _copy_json(json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False)), level, strings, deepest)


def _depth(value: JSON) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return depth
        nxt: list[JSON] = []
        for item in level:
            if isinstance(item, dict):
                nxt.extend(item.values())
            elif isinstance(item, list):
                nxt.extend(item)
        level = nxt
    return depth - 1


def _strip_nul(value: JSON) -> JSON:
    """``value`` with NUL removed from every string (keys too), as Honcho stores text."""
    if isinstance(value, str):
        return _strip_text(value)
    if isinstance(value, dict):
        return {_strip_text(k): _strip_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_nul(v) for v in value]
    return value


def _strip_text(text: str) -> str:
    return text.replace("\x00", "") if "\x00" in text else text


def _object(body: JSON) -> JSONObject:
    if body is None:
        raise _invalid([], "Field required", "missing")
    if not isinstance(body, dict):
        raise _invalid([], "Input should be a valid dictionary or object to extract fields from",
                       "model_attributes_type", body)
    return body


def _optional_object(body: JSON) -> JSONObject:
    return {} if body is None else _object(body)


def _name(body: JSONObject, key: str) -> str:
    value = body.get(key)
    if value is None:
        raise _invalid([key], "Field required", "missing")
    if not isinstance(value, str):
        raise _invalid([key], "Input should be a valid string", "string_type", value)
    if not value:
        raise _invalid([key], "String should have at least 1 character", "string_too_short", value)
    if len(value) > MAX_NAME:
        raise _invalid([key], f"String should have at most {MAX_NAME} characters", "string_too_long", value)
    if not NAME.match(value):
        raise _invalid([key], "String should match pattern '^[a-zA-Z0-9_-]+$'", "string_pattern_mismatch", value)
    return value


def _optional_str(body: JSONObject, key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid([key], "Input should be a valid string", "string_type", value)
    return value


def _metadata(value: JSON, loc: Loc) -> JSONObject | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary", "dict_type", value)
    if len(value) > METADATA_MAX_KEYS:
        raise _invalid(loc, f"Value error, Metadata exceeds maximum of {METADATA_MAX_KEYS} top-level keys")
    for item in value.values():  # the first level here: most metadata nests no further
        if isinstance(item, dict) and _nests_deeper(item, 2):
            raise _invalid(loc, f"Value error, Metadata nesting exceeds maximum depth of {METADATA_MAX_DEPTH}")
    return value


def _nests_deeper(data: JSONObject, level: int) -> bool:
    """Whether ``data``, a dict at metadata ``level``, or a dict inside it, lies below ``METADATA_MAX_DEPTH``."""
    if level > METADATA_MAX_DEPTH:
        return True
    return any(isinstance(item, dict) and _nests_deeper(item, level + 1) for item in data.values())


def _config(value: JSON, loc: Loc) -> JSONObject | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary", "dict_type", value)
    return value


def _peer_config(value: JSON, loc: Loc) -> SessionPeerConfig:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary or object to extract fields from",
                       "model_attributes_type", value)
    return {"observe_me": _flag(value, "observe_me", loc), "observe_others": _flag(value, "observe_others", loc)}


def _flag(config: JSONObject, key: str, loc: Loc) -> bool | None:
    flag = config.get(key)
    if flag is not None and not isinstance(flag, bool):
        raise _invalid([*loc, key], "Input should be a valid boolean", "bool_type", flag)
    return flag


def _peer_configs(value: JSON, loc: Loc) -> dict[str, SessionPeerConfig] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(loc, "Input should be a valid dictionary", "dict_type", value)
    configs: dict[str, SessionPeerConfig] = {}
    for pid, config in value.items():
        if not NAME.match(pid) or len(pid) > MAX_NAME:
            raise _invalid([*loc, pid], "String should match pattern '^[a-zA-Z0-9_-]+$'", "string_pattern_mismatch", pid)
        configs[pid] = _peer_config(config, [*loc, pid])
    return configs


def _strings(value: JSON) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _int_field(body: JSONObject, key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid([key], "Input should be a valid integer", "int_type", value)
    if value < low:
        raise _invalid([key], f"Input should be greater than or equal to {low}", "greater_than_equal", value)
    if value > high:
        raise _invalid([key], f"Input should be less than or equal to {high}", "less_than_equal", value)
    return value


def _param(params: QueryParams, key: str) -> str | None:
    """The query parameter ``key`` (its first value), or None."""
    value: str | None = params.get(key)
    return value


def _int_param(params: QueryParams, key: str, default: int, low: int, high: int | None) -> int:
    raw = _param(params, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _query_invalid(key, "Input should be a valid integer, unable to parse string as an integer",
                             "int_parsing") from None
    if value < low:
        raise _query_invalid(key, f"Input should be greater than or equal to {low}", "greater_than_equal")
    if high is not None and value > high:
        raise _query_invalid(key, f"Input should be less than or equal to {high}", "less_than_equal")
    return value


def _bool_param(params: QueryParams, key: str, default: bool = False) -> bool:
    raw = _param(params, key)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes", "on"):
        return True
    if raw.lower() in ("false", "0", "no", "off"):
        return False
    raise _query_invalid(key, "Input should be a valid boolean, unable to interpret input", "bool_parsing")


# -- answers -----------------------------------------------------------------------------------

def _workspace(r: sqlite3.Row) -> Workspace:
    return {"id": r["id"], "metadata": json.loads(r["metadata"]), "configuration": json.loads(r["configuration"]),
            "created_at": r["created_at"]}


def _peer(r: sqlite3.Row) -> Peer:
    return {"id": r["id"], "workspace_id": r["workspace_id"], "created_at": r["created_at"],
            "metadata": json.loads(r["metadata"]), "configuration": json.loads(r["configuration"])}


def _session(r: sqlite3.Row) -> Session:
    return {"id": r["id"], "is_active": bool(r["is_active"]), "workspace_id": r["workspace_id"],
            "metadata": json.loads(r["metadata"]), "configuration": json.loads(r["configuration"]),
            "created_at": r["created_at"]}


def _message(r: sqlite3.Row) -> Message:
    return {"id": r["id"], "content": r["content"], "peer_id": r["peer_id"], "session_id": r["session_id"],
            "metadata": json.loads(r["metadata"]), "created_at": r["created_at"], "workspace_id": r["workspace_id"],
            "token_count": r["token_count"]}


def _conclusion(r: sqlite3.Row | None) -> Conclusion:
    assert r is not None
    return {"id": r["id"], "content": r["content"], "observer_id": r["observer_id"], "observed_id": r["observed_id"],
            "session_id": r["session_id"], "level": r["level"], "created_at": r["created_at"]}
