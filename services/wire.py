"""The crouter wire as this project speaks it: every invented detail the SDK and FakeCloud share.

The seed names operations, fields, codes and event types; it does not give paths, DTO layouts
or the token exchange. Those choices live here, in one place, so the SDK (``services.sdk``) and
the fake (``services.cloud``) cannot drift apart. Wire names (operation names, event types,
error codes, JSON fields) are exactly the seed's.

Directory (``issuer``, default ``https://directory.test``)
    ``GET  /.well-known/openid-configuration``  op ``directory.discovery``:
        ``{issuer, token_endpoint, jwks_uri, authorization_endpoint, grant_types_supported,
        token_endpoint_auth_methods_supported: ["private_key_jwt"]}``
    ``POST /oauth/token``  op ``directory.token``: form body ``grant_type=refresh_token``,
        ``refresh_token``, ``client_id``, ``client_assertion_type`` (``CLIENT_ASSERTION_TYPE``),
        ``client_assertion`` (a JWT the app signs with its ``private_key``: ``iss`` = ``sub`` =
        client id, ``aud`` = the token endpoint, ``iat``, ``exp``, ``jti``; the header carries
        the public ``jwk``; RS256 for an RSA key, ES256 for an EC P-256 key). The directory
        learns the client's key from its first valid assertion and holds the client to it.
        Answer: ``{access_token, token_type: "Bearer", expires_in, refresh_token, scope,
        user_id, runtime_url, runtime_id}``. A refusal is 400 with the envelope below,
        ``origin: "directory"`` and ``code`` one of ``REFUSAL_CODES``.
    ``GET  /.well-known/jwks.json``  op ``directory.jwks``: ``{keys: [JWK]}`` (RS256, with ``kid``).

Access tokens are RS256 JWTs from the directory key: ``iss`` issuer, ``sub`` the person,
``aud`` the runtime id, ``client_id``, ``scope`` (space separated), ``iat``, ``exp``, ``jti``;
header ``typ: at+jwt``.

Runtime (``runtime_url``, default ``https://runtime.test``), bearer access token on every call:
    see ``ROUTES``. Keyed sends (``run.start``, ``run.message``) carry ``Idempotency-Key``.
    Every request carries ``MIN_RUNTIME_HEADER`` (the SDK's minimum runtime version); a runtime
    older than that answers 426 ``runtime_version_unsupported``. Every answer carries
    ``RUNTIME_VERSION_HEADER``.

Error envelope (every non-2xx JSON answer, directory and runtime):
    ``{"error": {"status", "code", "message", "origin", "retryable", "details", "param",
    "retry_after_s"}}`` (``retry_after_s`` only when set; the others always present, null when
    unknown). ``origin`` is ``runtime``, ``directory`` or ``provider``.

Run DTO (``run.start``, ``run.get``, items of ``run.list``):
    ``{id, user_id, name, status, activity, params, outcome, result, last_turn_error, question,
    pending, messages, created_at, updated_at, last_event_id}`` where ``status`` is one of
    ``RUN_STATUSES``, ``activity`` is null unless running, ``outcome`` is null or the settled
    outcome as ``node.settled`` wrote it (``{outcome: <one of OUTCOMES>, ...its fields}``), ``result`` is the settled result text, ``last_turn_error`` is
    ``{code, message}`` or null, ``question`` is the open question DTO or null, ``pending`` and
    ``messages`` are lists of message DTOs ``{id, text, at, delivered}``.

Run events (``run.events``, a text/event-stream):
    Each event is ``id: <seq>`` / ``event: <type>`` / ``data: <json>`` and a blank line, the JSON
    being ``{id, seq, run_id, node_id, type, at, ...fields}``. ``seq`` counts from 1 per run and
    is the cursor: reconnect with ``?after=<seq>`` or ``Last-Event-ID``. The root node's id is
    the run id; any other ``node_id`` is a child node. Event types and their fields:

    - ``node.turn.started``: ``input: {text, message_ids}``, ``entry_id``
    - ``node.output_text.delta``: ``delta``, ``entry_id``
    - ``node.output_text.done``: ``text``, ``entry_id``
    - ``node.turn.completed``: ``stop_reason`` (``end_turn`` | ``error``), ``error``
      (``{code, message}`` or null), ``entry_id``
    - ``node.activity``: ``activity`` (fake-only, from ``set_activity``; ``tool`` when a tool call)
    - ``node.idle``: nothing (stopped without submitting)
    - ``node.question.opened``: ``question`` (the question DTO); ``node.question.answered``:
      ``question_id``, ``answers``
    - ``node.message.received``: ``message`` (a message DTO), ``start_turn``
    - ``node.settled``: ``outcome`` plus the outcome's own fields: ``result`` for ``result``;
      ``declined: {reason, code, retryable}``; ``failure`` for ``canceled`` /
      ``deadline_exceeded``; ``runtime_error`` (the reason) for ``runtime_error``
    - ``node.reopened``: nothing (a message reopened a settled run)
    - ``run.renamed``: ``name``; ``run.interrupted``: nothing

    Control frames (``event:`` name, JSON ``data``), never counted as events:
    ``stream_gap`` ``{requested_after, first_available}`` (then the stream goes on from the
    first available event); ``stream_error`` ``{error: envelope}`` (ends the stream, e.g. the
    grant was revoked); ``stream_dropped`` ``{reason}`` (the run was deleted); ``stream_idle``
    ``{idle_ms}`` (idle close after ``stream_idle_ms``; the client may reconnect).

Grant DTO (``grant.get``):
    ``{version, rev, state, client_id, user_id, resolved_scopes, dependencies:
    [{provider, state, message}], spend_cap, revoked_code, account_app_uri}``; ``state`` is
    ``active`` or ``revoked``. ``?wait=<seconds>&since=<version>`` holds the read until the
    version differs from ``since`` or the wait ends (then the same version is answered).

Answers by operation: ``run.start`` 201 run DTO; ``run.get`` / ``run.interrupt`` /
    ``run.cancel`` / ``run.rename`` run DTO; ``run.list`` ``{runs: [run DTO]}`` (start order);
    ``run.delete`` ``{id, deleted: true}``; ``run.message`` 201 ``{message, run, cursor}`` where
    ``cursor`` is the event id just before the message's ``node.message.received`` event (stream
    ``after=cursor`` to follow the turn it starts); ``question.get`` / ``question.answer`` question
    DTO; ``memory.list`` ``{documents: [item]}``; ``memory.get`` item plus ``body``.
    ``run.start`` may carry a client-chosen ``id`` (``run_<letters, digits, - or _>``) so an isolated
    run's ``cwd`` can name its root folder ``/apps/<client_id>/nodes/<run id>``.
Question DTO: ``{id, run_id, title, slots, status (open|answered), answers, created_at}``.
Memory list item: ``{name, owner, kind, privacy, preview, summary, rules, revision,
    updated_at, bytes}``; ``memory.get`` adds ``body``.
Provider tools: ``{providers: [{name, status, error, tools: [{name, group, scope}]}]}``;
    ``provider.call`` body ``{arguments}`` answers ``{result}``.
Profiles: ``{profiles: [{name, description}]}``. Trace: ``{run_id, spans: [...]}``.

Base URLs: the ``issuer`` and a person's ``runtime_url`` may carry a path (``https://h/tenant``,
    with or without a trailing slash). A route's path is appended to the base's path
    (``join_url``); the fake finds the route by taking the base's path off the request's
    (``route_under``). Both sides use these two functions, so they cannot disagree.

Lists the wire defines are ``Literal`` types, read with ``typing.get_args`` (the tuples below are
exactly that): ``RefusalCode`` (what a directory refusal says; ``user.refuse`` and
``grant.revoke`` take one), ``RunStatus``, ``Outcome`` (how a run settles, as ``node.settled``
writes it), ``SettleEnding`` (the keys ``FakeRun.settle`` takes), ``Failure`` (the outcomes a
``failure`` ending names) and ``TurnErrorCode`` (``fail_turn``'s codes).

Run notices: ``POST <run_notice.url>`` with ``Authorization: Bearer <token>`` and JSON
    ``{run_id, seq}``. The token is an RS256 JWT from the directory key with header
    ``typ: NOTICE_TOKEN_TYPE`` and claims ``iss``, ``aud`` (the notice URL), ``sub`` (the person),
    ``grantee`` (``app:<client_id>``), ``run_id``, ``runtime_id``, ``seq``, ``iat``, ``exp``, ``jti``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args
from urllib.parse import SplitResult, urlsplit

__all__ = [
    "event_line_name",
    "Route",
    "ROUTES",
    "match_route",
    "route_path",
    "DIRECTORY_DISCOVERY_PATH",
    "DIRECTORY_TOKEN_PATH",
    "DIRECTORY_JWKS_PATH",
    "CLIENT_ASSERTION_TYPE",
    "IDEMPOTENCY_KEY",
    "LAST_EVENT_ID",
    "MIN_RUNTIME_HEADER",
    "RUNTIME_VERSION_HEADER",
    "SDK_MIN_RUNTIME_VERSION",
    "NOTICE_TOKEN_TYPE",
    "ACCESS_TOKEN_TYPE",
    "RefusalCode",
    "RunStatus",
    "Outcome",
    "SettleEnding",
    "Failure",
    "TurnErrorCode",
    "REFUSAL_CODES",
    "RUN_STATUSES",
    "OUTCOMES",
    "SETTLE_ENDINGS",
    "FAILURES",
    "TURN_ERROR_CODES",
    "join_url",
    "route_under",
    "RETRYABLE_READS",
    "KEYED_SENDS",
    "CONTROL_FRAMES",
    "version_tuple",
]

DIRECTORY_DISCOVERY_PATH = "/.well-known/openid-configuration"
DIRECTORY_TOKEN_PATH = "/oauth/token"
DIRECTORY_JWKS_PATH = "/.well-known/jwks.json"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

IDEMPOTENCY_KEY = "Idempotency-Key"
LAST_EVENT_ID = "Last-Event-ID"
MIN_RUNTIME_HEADER = "Crouter-Min-Runtime-Version"
RUNTIME_VERSION_HEADER = "Crouter-Runtime-Version"
SDK_MIN_RUNTIME_VERSION = "1.2.0"
"""The oldest runtime this SDK talks to; FakeCloud's default ``runtime_version`` is newer."""

ACCESS_TOKEN_TYPE = "at+jwt"
NOTICE_TOKEN_TYPE = "run-notice+jwt"

RefusalCode = Literal[
    "grant_removed",
    "grant_suspended",
    "refresh_token_expired",
    "refresh_token_reused",
    "grant_revoked",
]
"""A directory refusal: the SDK removes the connection and runs ``on_refusal`` for these only."""
RunStatus = Literal["running", "idle", "waiting_on_user", "settled"]
Outcome = Literal["result", "declined", "canceled", "deadline_exceeded", "runtime_error"]
"""How a run settled (``node.settled``'s ``outcome``)."""
SettleEnding = Literal["result", "declined", "failure", "runtime_error"]
"""The one key ``FakeRun.settle`` takes (``failure`` names a ``Failure``)."""
Failure = Literal["canceled", "deadline_exceeded"]
TurnErrorCode = Literal["model_error", "content_refused"]
"""The codes a failed turn carries (``fail_turn``)."""

REFUSAL_CODES: tuple[RefusalCode, ...] = get_args(RefusalCode)
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
SETTLE_ENDINGS: tuple[SettleEnding, ...] = get_args(SettleEnding)
FAILURES: tuple[Failure, ...] = get_args(Failure)
TURN_ERROR_CODES: tuple[TurnErrorCode, ...] = get_args(TurnErrorCode)
CONTROL_FRAMES = ("stream_gap", "stream_error", "stream_dropped", "stream_idle")

RETRYABLE_READS = frozenset(
    {
        "grant.get",
        "run.get",
        "run.list",
        "run.delete",
        "trace.get",
        "question.get",
        "memory.list",
        "memory.get",
        "provider.tools",
        "profile.list",
    }
)
"""GET and DELETE operations: a 5xx, 429 or unreachable answer is retried with backoff."""
KEYED_SENDS = frozenset({"run.start", "run.message"})
"""POSTs sent with an ``Idempotency-Key``: retried with the same key when the error is retryable."""


@dataclass(frozen=True, slots=True)
class Route:
    """One runtime operation: its name, HTTP method and path template (``{name}`` segments)."""

    op: str
    method: str
    template: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.template)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(template: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(template)
    if pattern is None:
        regex = re.sub(
            r"\{(\w+)(:path)?\}",
            lambda m: f"(?P<{m.group(1)}>{'.+' if m.group(2) else '[^/]+'})",
            template,
        )
        pattern = _PATTERNS[template] = re.compile(f"^{regex}$")
    return pattern


ROUTES: tuple[Route, ...] = (
    Route("grant.get", "GET", "/v1/grant"),
    Route("run.start", "POST", "/v1/runs"),
    Route("run.list", "GET", "/v1/runs"),
    Route("run.get", "GET", "/v1/runs/{run_id}"),
    Route("run.delete", "DELETE", "/v1/runs/{run_id}"),
    Route("run.message", "POST", "/v1/runs/{run_id}/messages"),
    Route("run.events", "GET", "/v1/runs/{run_id}/events"),
    Route("run.interrupt", "POST", "/v1/runs/{run_id}/interrupt"),
    Route("run.cancel", "POST", "/v1/runs/{run_id}/cancel"),
    Route("run.rename", "POST", "/v1/runs/{run_id}/rename"),
    Route("trace.get", "GET", "/v1/runs/{run_id}/trace"),
    Route("question.get", "GET", "/v1/questions/{question_id}"),
    Route("question.answer", "POST", "/v1/questions/{question_id}/answer"),
    Route("memory.list", "GET", "/v1/memory"),
    Route("memory.get", "GET", "/v1/memory/{name:path}"),
    Route("provider.tools", "GET", "/v1/providers"),
    Route("provider.call", "POST", "/v1/providers/{provider}/tools/{tool}/call"),
    Route("profile.list", "GET", "/v1/profiles"),
)
"""Every runtime operation. Query parameters: ``run.list`` ``?status=&limit=``;
``grant.get`` ``?wait=&since=``; ``run.events`` ``?after=``; ``memory.list`` ``?kind=``.
Bodies: ``run.start`` ``{prompt, isolated?, cwd?, worktree?, name?, profile?, ...}``;
``run.message`` ``{text, start_turn = true}``; ``run.rename`` ``{name}``;
``question.answer`` ``{answers}``; ``provider.call`` ``{arguments}``."""

_BY_OP = {route.op: route for route in ROUTES}


def match_route(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route a request addresses and its path parameters, or None."""
    for route in ROUTES:
        if route.method != method:
            continue
        found = route.pattern.match(path)
        if found:
            return route, found.groupdict()
    return None


def route_path(op: str, **params: str) -> tuple[str, str]:
    """``(method, path)`` of ``op`` with its path parameters filled in (URL-quoted)."""
    from urllib.parse import quote

    route = _BY_OP[op]
    path = route.template
    for key, value in params.items():
        safe = "/" if f"{{{key}:path}}" in path else ""
        path = path.replace(f"{{{key}:path}}", quote(value, safe=safe)).replace(
            f"{{{key}}}", quote(value, safe="")
        )
    return route.method, path


def join_url(base: str, path: str) -> str:
    """``base`` (an issuer or runtime URL, which may carry a path) followed by a route ``path``.

    ``join_url("https://h/tenant/", "/v1/runs") == "https://h/tenant/v1/runs"``: the base's path is
    kept (unlike ``urllib.parse.urljoin``, which drops it for a path starting with ``/``).
    """
    return base.rstrip("/") + "/" + path.lstrip("/")


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a number: no port matches it
        port = -1
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _route_by_prefix(base: str, url: str) -> str | None:
    """``route_under`` for the common case, by comparing text: ``url`` starts with ``base``
    (without its trailing slash) followed by ``/``, ``?``, ``#`` or nothing. None when that does not
    hold (the URL may still be under the base, written another way: the full check decides)."""
    prefix = base.rstrip("/")
    if "?" in prefix or "#" in prefix or not url.startswith(prefix):
        return None
    rest = url[len(prefix) :]
    if not rest or rest[0] in "?#":
        return "/"
    if rest[0] != "/" or prefix.count("/") < 2:
        return None
    end = len(rest)
    for mark in "?#":
        found = rest.find(mark)
        if found != -1 and found < end:
            end = found
    return rest[:end]


def route_under(base: str, url: str) -> str | None:
    """The route path of ``url`` below ``base`` (``"/v1/runs"``), or None when ``url`` is not under it.

    The inverse of ``join_url``: same scheme, host and port, and the base's path (trailing slash
    or not) as a whole-segment prefix of the URL's path.
    """
    fast = _route_by_prefix(base, url)
    if fast is not None:
        return fast
    base_parts, url_parts = urlsplit(base), urlsplit(url)
    if _origin(base_parts) != _origin(url_parts):
        return None
    prefix = base_parts.path.rstrip("/")
    path = url_parts.path or "/"
    if not prefix:
        return path
    if path == prefix:
        return "/"
    if path.startswith(prefix + "/"):
        return path[len(prefix) :]
    return None


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.10.2"`` as ``(1, 10, 2)`` for comparisons; non-numeric parts count as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


_NAMES: dict[str, str] = {}
"""Event types already made fit for the ``event:`` line (a run uses a handful)."""


def event_line_name(name: object) -> str:
    """``name`` as an SSE ``event:`` line may carry it: one line of ASCII (anything else as its
    backslash escape, CR and LF as spaces), so no stored text can end the line or add a frame. The
    event's ``data`` keeps its type exactly."""
    if not isinstance(name, str):  # a type an older server kept without checking it
        name = str(name)
    line = _NAMES.get(name)
    if line is None:
        line = name.encode("ascii", "backslashreplace").decode().replace("\r", " ").replace("\n", " ")
        if len(_NAMES) < 4096:
            _NAMES[name] = line
    return line


_E = TypeVar("_E", bound=Mapping[str, Any])


def events_without(events: Sequence[_E], exclude: Collection[str], limit: int | None = None) -> list[_E]:
    """A run's ``events`` without those whose ``type`` is in ``exclude`` (the types a reader leaves
    out: ``GET /runs/{id}/events?exclude=``), at most ``limit`` of them; ``events`` itself when it is
    a list and there is nothing to leave out or cut (callers pass a slice, or a list they only read)."""
    if not exclude and isinstance(events, list) and (limit is None or limit >= len(events)):
        return events
    out: list[_E] = []
    if limit is not None and limit <= 0:
        return out
    for event in events:
        if event.get("type") not in exclude:
            out.append(event)
            if limit is not None and len(out) >= limit:
                break
    return out
