"""An httpx client for the subset of Honcho's v3 HTTP API the outbox uses.

It speaks Honcho's own routes and shapes (``/v3/workspaces/{w}/...``), so the same client works
against the in-process fake (``transport=FakeHonchoService().transport``, ``services.honcho``) and a real Honcho
server (``base_url="https://api.honcho.dev"``, ``api_key=...``). Failures become
``HonchoUnavailableError`` (unreachable, timeout, 408, 5xx), ``HonchoRateLimitedError`` (429) or
``HonchoRequestError`` (other 4xx), each with a message naming the call and Honcho's own
``detail``, and the answer's ``Retry-After`` header when it sent one.

Over the in-process fake's own transport the calls go to the fake as values
(``InProcessHoncho.call``, ``services.honcho_wire``): the same routes, checks and answers, without encoding each body
to JSON text and parsing it back on both sides, which a server in another process needs and
one in this process does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NoReturn, cast
from urllib.parse import quote, unquote

import httpx

from ...honcho_wire import (
    JSON,
    Conclusion,
    InProcessHoncho,
    InProcessTransport,
    JSONObject,
    Message,
    Page,
    Session,
    SessionPeerConfig,
)
from .models import HonchoRateLimitedError, HonchoRequestError, HonchoUnavailableError

__all__ = ["HonchoClient"]

_API = "/v3"


class HonchoClient:
    """Async calls to one Honcho workspace."""

    def __init__(
        self,
        workspace_id: str,
        *,
        base_url: str = "https://honcho.fake",
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 15.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.workspace_id = workspace_id
        """The workspace every call is scoped to."""
        self._http = httpx.AsyncClient(base_url=base_url, transport=transport, headers=headers, timeout=timeout)
        self._direct: InProcessHoncho | None = (
            transport.honcho_service if isinstance(transport, InProcessTransport) else None)
        """The in-process fake behind ``transport``, called with values instead of JSON text."""
        self._authorization = headers.get("Authorization")
        self._workspace_ready = False
        self._known_peers: set[str] = set()

    @property
    def base_url(self) -> str:
        """The server's base URL, as given."""
        return str(self._http.base_url).rstrip("/")

    async def aclose(self) -> None:
        """Close the underlying HTTP client."""
        await self._http.aclose()

    # -- plumbing ------------------------------------------------------------------------

    def _ws(self, *parts: str) -> str:
        tail = "".join("/" + quote(p, safe="") for p in parts)
        return f"{_API}/workspaces/{quote(self.workspace_id, safe='')}{tail}"

    async def _call(self, what: str, method: str, url: str, *, json: object = None,
                    params: Mapping[str, str | int] | None = None) -> JSON:
        """Honcho's answer to one request (None for an empty one); the shape is the route's, as the
        server documents it, so callers name it with ``cast``."""
        if self._direct is not None:
            return self._call_direct(self._direct, what, method, url, json, params)
        try:
            response = await self._http.request(method, url, json=json, params=params)
        except httpx.TimeoutException as exc:
            raise HonchoUnavailableError(f"{what}: timed out ({exc.__class__.__name__})") from exc
        except httpx.TransportError as exc:
            raise HonchoUnavailableError(f"{what}: cannot reach Honcho ({exc})") from exc
        status = response.status_code
        if status >= 400:
            _raise_for(what, status, _detail(response), response.headers.get("retry-after"))
        if response.status_code == 204 or not response.content:
            return None
        answer: JSON = response.json()
        return answer

    def _call_direct(self, service: InProcessHoncho, what: str, method: str, url: str, body: object,
                     params: Mapping[str, str | int] | None) -> JSON:
        """``_call`` to the in-process fake: the same answer and errors, the body passed as a value."""
        try:
            status, answer, headers = service.call(method, unquote(self._http.base_url.path.rstrip("/") + url),
                                                   body=cast(JSON, body),
                                                   params=httpx.QueryParams(params) if params else None,
                                                   authorization=self._authorization)
        except httpx.TransportError as exc:
            raise HonchoUnavailableError(f"{what}: cannot reach Honcho ({exc})") from exc
        if status >= 400:
            _raise_for(what, status, _answer_detail(answer), headers.get("Retry-After") or headers.get("retry-after"))
        if status == 204 or answer is None:
            return None
        return cast(JSON, answer)

    # -- workspace, peers, sessions --------------------------------------------------------

    def forget(self) -> None:
        """Forget which workspace and peers are known to exist (after the server lost some)."""
        self._workspace_ready = False
        self._known_peers.clear()

    async def ensure_workspace(self) -> None:
        """Get-or-create the workspace (once per client)."""
        if self._workspace_ready:
            return
        await self._call("workspace get-or-create", "POST", f"{_API}/workspaces", json={"id": self.workspace_id})
        self._workspace_ready = True

    async def get_or_create_peer(self, peer_id: str) -> None:
        """Get-or-create a peer (once per client and peer)."""
        if peer_id in self._known_peers:
            return
        await self.ensure_workspace()
        await self._call(f"peer {peer_id} get-or-create", "POST", self._ws("peers"), json={"id": peer_id})
        self._known_peers.add(peer_id)

    async def get_or_create_session(self, session_id: str, peers: Mapping[str, SessionPeerConfig]) -> Session:
        """Get-or-create a session with ``peers`` (``{peer_id: SessionPeerConfig}``)."""
        await self.ensure_workspace()
        return cast(Session, await self._call(f"session {session_id} get-or-create", "POST", self._ws("sessions"),
                                              json={"id": session_id, "peers": peers}))

    async def add_peers(self, session_id: str, peers: Mapping[str, SessionPeerConfig]) -> Session:
        """Add ``peers`` to an existing session."""
        return cast(Session, await self._call(f"session {session_id} add peers", "POST",
                                              self._ws("sessions", session_id, "peers"), json=peers))

    async def clone_session(self, session_id: str, message_id: str | None) -> Session:
        """Clone a session up to and including ``message_id`` (the whole session when None)."""
        params = {"message_id": message_id} if message_id else None
        return cast(Session, await self._call(f"session {session_id} clone", "POST",
                                              self._ws("sessions", session_id, "clone"), params=params))

    # -- messages ------------------------------------------------------------------------

    async def add_messages(self, session_id: str, messages: Sequence[Mapping[str, object]]) -> list[Message]:
        """Create up to 100 messages (Honcho's ``MessageCreate``: ``{content, peer_id, metadata?,
        created_at?}``) in a session; Honcho's message objects come back in order."""
        if not 1 <= len(messages) <= 100:
            raise HonchoRequestError(f"add messages: a batch holds 1..100 messages, got {len(messages)}")
        return cast(list[Message], await self._call(f"session {session_id} add {len(messages)} messages", "POST",
                                                    self._ws("sessions", session_id, "messages"),
                                                    json={"messages": messages}))

    async def list_messages(self, session_id: str, filters: JSONObject | None = None) -> list[Message]:
        """Every message of a session (oldest first), following Honcho's pages."""
        items: list[Message] = []
        page = 1
        while True:
            body = {"filters": filters} if filters else {}
            answer = cast("Page[Message]", await self._call(f"session {session_id} list messages", "POST",
                                                            self._ws("sessions", session_id, "messages", "list"),
                                                            json=body, params={"page": page, "size": 100}))
            items.extend(answer.get("items", []))
            if page >= int(answer.get("pages") or 1):
                return items
            page += 1

    async def list_page(self, what: str, *parts: str, filters: JSONObject | None = None, page: int = 1,
                        size: int = 50, reverse: bool = False) -> Page[JSONObject]:
        """One page of a list route (``sessions``, ``peers``, ``sessions/{id}/messages``): Honcho's page,
        its items as the route's objects (an empty answer is an empty page)."""
        body = {"filters": filters} if filters else {}
        answer = await self._call(f"list {what}", "POST", self._ws(*parts, "list"), json=body,
                                  params={"page": page, "size": size, "reverse": str(reverse).lower()})
        if not isinstance(answer, dict):
            return {"items": [], "total": 0, "page": page, "size": size, "pages": 0}
        return cast("Page[JSONObject]", answer)

    async def search(self, query: str, *, limit: int = 20, filters: JSONObject | None = None) -> list[Message]:
        """Messages of the whole workspace that match ``query``."""
        body: JSONObject = {"query": query, "limit": limit}
        if filters:
            body["filters"] = filters
        return list(cast("list[Message] | None", await self._call("workspace search", "POST", self._ws("search"),
                                                                  json=body)) or [])

    # -- recall --------------------------------------------------------------------------

    async def peer_search(self, peer_id: str, query: str, limit: int = 10) -> list[Message]:
        """Messages of a peer that match ``query``."""
        return cast(list[Message], await self._call(f"peer {peer_id} search", "POST",
                                                    self._ws("peers", peer_id, "search"),
                                                    json={"query": query, "limit": limit}))

    async def peer_chat(self, peer_id: str, query: str, *, session_id: str | None = None) -> str:
        """Ask Honcho's dialectic endpoint about a peer; the answer text (empty when none)."""
        body: JSONObject = {"query": query, "stream": False, "reasoning_level": "low"}
        if session_id:
            body["session_id"] = session_id
        answer = await self._call(f"peer {peer_id} chat", "POST", self._ws("peers", peer_id, "chat"), json=body)
        return _text_field(answer, "content")

    async def peer_representation(self, peer_id: str, *, session_id: str | None = None) -> str:
        """A peer's representation text, optionally scoped to a session."""
        body = {"session_id": session_id} if session_id else {}
        answer = await self._call(f"peer {peer_id} representation", "POST",
                                  self._ws("peers", peer_id, "representation"), json=body)
        return _text_field(answer, "representation")

    async def create_conclusions(self, conclusions: Sequence[Mapping[str, object]]) -> list[Conclusion]:
        """Create conclusions (Honcho's ``ConclusionCreate``: ``{content, observer_id, observed_id,
        session_id?}``)."""
        await self.ensure_workspace()
        return cast(list[Conclusion], await self._call("create conclusions", "POST", self._ws("conclusions"),
                                                       json={"conclusions": conclusions}))


def _text_field(answer: JSON, key: str) -> str:
    """``answer[key]`` as text (empty when the answer or the field is empty)."""
    value = answer.get(key) if isinstance(answer, dict) else None
    return str(value or "")


def _raise_for(what: str, status: int, detail: str, retry_after: str | None) -> NoReturn:
    message = f"{what}: HTTP {status} {detail}"
    if status == 429:
        raise HonchoRateLimitedError(message, status=status, retry_after=retry_after)
    if status >= 500 or status == 408:
        raise HonchoUnavailableError(message, status=status, retry_after=retry_after)
    raise HonchoRequestError(message, status=status, retry_after=retry_after)


def _detail(response: httpx.Response) -> str:
    """Honcho's ``detail`` (a string, or FastAPI's list of validation errors) in a few words."""
    try:
        body: JSON = response.json()
    except ValueError:
        return response.text[:200]
    return _answer_detail(body)


def _answer_detail(body: object) -> str:
    """``_detail`` of an answer already parsed."""
    if isinstance(body, str):
        return body[:200]
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)[:300]
    return str(detail)[:300]
