"""``GuardApp``: what every request to a served cloud passes before any route sees it.

It wraps the whole served app (runtime, directory, control API and ``/honcho``) and refuses, in
the wire's error envelope (``errors.envelope``):

- a ``Host`` that is not one this server serves: 421 ``misdirected_request``. Served hosts are IP
  literals (a DNS-rebinding page cannot make a browser send one for its own name), ``localhost``
  and ``*.localhost``, and the host of the URL apps are given (``--public-url``);
- a request from a browser page of another origin: 403 ``cross_origin`` when ``Origin`` is present
  and is not the server's own origin (``null`` included), or ``Sec-Fetch-Site`` says
  ``cross-site`` / ``same-site`` (another port on localhost is the same site);
- a body over ``Limits.body_bytes``: 413 ``payload_too_large`` with the limit (a declared
  ``Content-Length`` is refused before a byte is read; a chunked body as soon as it passes the cap);
- a body that is not ``application/json`` (the token endpoint: its form encoding), 415
  ``unsupported_media_type``, so no "simple" cross-site request reaches a route;
- JSON that is malformed, not UTF-8, nested deeper than ``Limits.json_depth``, or holds text the
  stores cannot keep (a lone surrogate or NUL: ``services.text``'s policy): 400 ``invalid_request``
  naming the field in ``param``;
- more than ``Limits.streams_per_token`` event streams open with one bearer token: 429
  ``too_many_streams``.

``/honcho`` gets the Host, Origin, size and stream checks; what its bodies must be is the Honcho
fake's own business (it answers in Honcho's error shape). ``GET /openapi.json`` answers the
published wire (``services.openapi``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..files import json_deeper_than
from ..text import text_problem
from ..wire import DIRECTORY_TOKEN_PATH, match_route
from .asgi import CONTROL_PREFIX, ASGIApp, Receive, Scope, Send
from ..cloud.errors import envelope
from ..cloud.limits import DEFAULT_LIMITS, Limits

__all__ = ["GuardApp", "host_allowed", "json_problem", "OPENAPI_PATH", "SenderRefusal", "sender_refusal"]

OPENAPI_PATH = "/openapi.json"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_FORM = "application/x-www-form-urlencoded"
_JSON = "application/json"


def host_allowed(host: str, served: frozenset[str]) -> bool:
    """True when the ``Host`` header ``host`` (``name[:port]``) names this server."""
    name = _host_name(host)
    if not name:
        return False
    if name == "localhost" or name.endswith(".localhost") or name in served:
        return True
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class SenderRefusal:
    """Why a request's sender is refused: the HTTP status, the error code, a sentence, the header."""

    status: int
    code: str
    message: str
    param: str


def sender_refusal(host: str, origin: str | None, fetch_site: str, *, origins: frozenset[str],
                   hosts: frozenset[str] = frozenset(), host_ok: bool | None = None) -> SenderRefusal | None:
    """The Host and Origin checks every server of a workspace makes (the served cloud's ``GuardApp``
    and ``workbench web``): a ``Host`` that is not served (``host_allowed`` over ``hosts``, unless the
    caller already judged it: ``host_ok``), a page of another origin (``origin`` not one of
    ``origins`` nor the ``Host`` itself; ``null`` included) or of another site (``fetch_site``:
    ``Sec-Fetch-Site``). None: the sender may go on."""
    if not (host_allowed(host, hosts) if host_ok is None else host_ok):
        return SenderRefusal(421, "misdirected_request",
                             "this server does not serve that host name (use localhost, an IP address or its URL)",
                             "Host")
    if origin is not None:
        text = origin.strip().lower()
        if text not in origins and text != f"http://{host.lower()}" and text != f"https://{host.lower()}":
            return SenderRefusal(403, "cross_origin", "requests from a web page of another origin are refused",
                                 "Origin")
    if fetch_site.strip().lower() in ("cross-site", "same-site"):
        return SenderRefusal(403, "cross_origin", "requests from a web page of another site are refused",
                             "Sec-Fetch-Site")
    return None


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def json_problem(value: object, max_depth: int) -> tuple[str, str] | None:
    """``(field, problem)`` for the first value too deep or holding unstorable text, else None.

    Walks the parsed body without recursion; ``field`` is a dotted path (``events[2].fields.text``).
    """
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return where or "body", problem
            continue
        if isinstance(item, (dict, list)):
            if depth >= max_depth:
                return where or "body", f"nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in reversed(list(item.items())):
                    place = f"{where}.{key}" if where else str(key)
                    problem = text_problem(key)
                    if problem:
                        return where or "body", f"a key holds {problem}"
                    stack.append((child, place, depth + 1))
            else:
                for index in range(len(item) - 1, -1, -1):
                    stack.append((item[index], f"{where}[{index}]", depth + 1))
    return None


_RISKY_TEXT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})|\xed[\xa0-\xbf]|\x00")
"""What could decode to NUL or a surrogate: a ``\\u`` escape of one, a surrogate's UTF-8 bytes
(``json.loads`` decodes bytes with ``surrogatepass``), or a NUL byte (also a sign of a UTF-16 or
UTF-32 body, which ``json.loads`` accepts too)."""


def _plainly_fine(body: bytes, max_depth: int) -> bool:
    """True when ``json_problem`` cannot find anything in the JSON text ``body``, told from the
    text alone: no escape that could hide a surrogate or NUL, and no container nested more than
    ``max_depth`` deep (``files.json_deeper_than``). False means: parse it and look (it may also be
    fine, or not JSON at all)."""
    if (b"\\u" in body or b"\xed" in body or b"\x00" in body) and _RISKY_TEXT.search(body) is not None:
        return False
    return json_deeper_than(body, max_depth) is False


def _answer(status: int, code: str, message: str, **fields: Any) -> tuple[int, bytes]:
    return status, json.dumps(envelope(status, code, message, **fields)).encode()


class GuardApp:
    """The checks above around ``app``; ``origin`` is the server's own ``http://HOST:PORT``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        origin: str,
        hosts: tuple[str, ...] = (),
        limits: Limits = DEFAULT_LIMITS,
        passthrough_prefix: str | None = None,
        passes: Callable[[str], bool] | None = None,
        openapi: Callable[[], dict[str, object]] | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        parts = urlsplit(origin)
        names = {(parts.hostname or "").lower(), *(h.lower() for h in hosts)}
        self.hosts = frozenset(n if ":" not in n or n.startswith("[") else f"[{n}]" for n in names if n)
        self.origins = frozenset({origin.rstrip("/").lower()})
        self.passthrough = passthrough_prefix
        self.passes = passes
        """Which paths belong to the app that checks its own bodies (the Honcho fake: ``/honcho``, ``/v3``)."""
        self.openapi = openapi
        self._openapi_body: bytes | None = None
        self._streams: dict[str, int] = {}
        self._host_seen: dict[bytes, bool] = {}
        """``Host`` values already judged (a client sends the same one every time)."""

    def allow_origin(self, origin: str) -> None:
        """Accept pages of ``origin`` as this server's own (e.g. the public URL's)."""
        self.origins = self.origins | {origin.rstrip("/").lower()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refuse_sender(headers)
        if refusal is not None:
            await _send(send, *refusal)
            return
        method = scope["method"]
        path = scope.get("path", "/")
        if "\x00" in path:
            await _send(send, *_answer(400, "invalid_request", "the path holds a NUL character", param="path"))
            return
        if method == "GET" and path == OPENAPI_PATH and self.openapi is not None:
            if self._openapi_body is None:
                self._openapi_body = json.dumps(self.openapi()).encode()
            await _send(send, 200, self._openapi_body)
            return
        honcho = (self.passes(path) if self.passes is not None else
                  self.passthrough is not None and (path == self.passthrough or path.startswith(self.passthrough + "/")))
        read = await self._read_body(headers, receive)
        if isinstance(read, tuple):
            await _send(send, *read)
            return
        body = read
        if method in _BODY_METHODS:
            if not honcho:
                refusal = self._check_body(path, headers, body)
                if refusal is not None:
                    await _send(send, *refusal)
                    return
        replay = _replay(body, receive)
        stream_key = self._stream_key(method, path, headers)
        if stream_key is None:
            await self.app(scope, replay, send)
            return
        if self._streams.get(stream_key, 0) >= self.limits.streams_per_token:
            limit = self.limits.streams_per_token
            await _send(send, *_answer(429, "too_many_streams",
                                       f"this token already holds {limit} open event streams (the limit)",
                                       details={"limit": limit}))
            return
        self._streams[stream_key] = self._streams.get(stream_key, 0) + 1
        try:
            await self.app(scope, replay, send)
        finally:
            left = self._streams[stream_key] - 1
            if left:
                self._streams[stream_key] = left
            else:
                del self._streams[stream_key]

    # -- checks ------------------------------------------------------------------------------

    def _host_ok(self, raw: bytes) -> bool:
        known = self._host_seen.get(raw)
        if known is None:
            known = host_allowed(raw.decode("latin-1"), self.hosts)
            if len(self._host_seen) < 256:
                self._host_seen[raw] = known
        return known

    def _refuse_sender(self, headers: dict[bytes, bytes]) -> tuple[int, bytes] | None:
        raw_host = headers.get(b"host", b"")
        origin = headers.get(b"origin")
        refusal = sender_refusal(raw_host.decode("latin-1"), None if origin is None else origin.decode("latin-1"),
                                 headers.get(b"sec-fetch-site", b"").decode("latin-1"), origins=self.origins,
                                 host_ok=self._host_ok(raw_host))
        return None if refusal is None else _answer(refusal.status, refusal.code, refusal.message,
                                                    param=refusal.param)

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | tuple[int, bytes]:
        cap = self.limits.body_bytes
        declared = headers.get(b"content-length")
        if declared is not None:
            text = declared.decode("latin-1").strip()
            if not (text.isascii() and text.isdigit()):
                return _answer(400, "invalid_request", "Content-Length must be a number", param="Content-Length")
            if int(text) > cap:
                return self._too_large(cap)
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                return self._too_large(cap)
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(parts)

    @staticmethod
    def _too_large(cap: int) -> tuple[int, bytes]:
        return _answer(413, "payload_too_large", f"the request body is larger than the limit of {cap} bytes",
                       param="body", details={"limit": cap})

    def _check_body(self, path: str, headers: dict[bytes, bytes], body: bytes) -> tuple[int, bytes] | None:
        kind = headers.get(b"content-type", b"").decode("latin-1").split(";", 1)[0].strip().lower()
        form_ok = path.endswith(DIRECTORY_TOKEN_PATH)
        if kind == _FORM and form_ok:
            return None
        if kind not in ("", _JSON) and not (kind.startswith("application/") and kind.endswith("+json")):
            wanted = f"{_JSON} (or {_FORM} for the token endpoint)" if form_ok else _JSON
            return _answer(415, "unsupported_media_type", f"the body must be {wanted}, not {kind}",
                           param="Content-Type")
        if not body:
            return None
        if kind == "":
            return _answer(415, "unsupported_media_type", f"a request body needs Content-Type: {_JSON}",
                           param="Content-Type")
        if _plainly_fine(body, self.limits.json_depth):
            # the route parses it and answers malformed JSON itself
            return None
        try:
            value = json.loads(body)
        except RecursionError:
            return _answer(400, "invalid_request", f"the JSON body is nested deeper than {self.limits.json_depth} levels",
                           param="body")
        except UnicodeDecodeError:
            return _answer(400, "invalid_request", "the body is not UTF-8", param="body")
        except ValueError as exc:
            return _answer(400, "invalid_request", f"malformed JSON body: {exc}", param="body")
        found = json_problem(value, self.limits.json_depth)
        if found is not None:
            field, problem = found
            return _answer(400, "invalid_request", f"{field}: {problem}", param=field)
        return None

    def _stream_key(self, method: str, path: str, headers: dict[bytes, bytes]) -> str | None:
        """The bearer token's digest when this request opens an event stream, else None."""
        if method != "GET" or not (path.endswith("/events") or path.endswith("/changes")):
            return None
        if path != CONTROL_PREFIX + "/changes":
            matched = match_route("GET", path)
            if matched is None or matched[0].op != "run.events":
                return None
        token = headers.get(b"authorization", b"")
        return hashlib.sha256(token).hexdigest()


def _headers(scope: Scope) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.lower(), value)
    return out


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then the real channel (disconnects)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _send(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})

