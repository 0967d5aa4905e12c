"""``OAuth2Client``: an app's connections to people's runtimes, refreshed through the directory.

- Discovery (``wire.join_url(issuer, wire.DIRECTORY_DISCOVERY_PATH)``) is fetched once per client.
- A refresh posts ``grant_type=refresh_token`` with a client assertion signed by ``private_key``.
  The rotated refresh token is saved to the store before the new access token is used.
- Refreshes are single-flight per person: concurrent callers share one refresh. With a store
  ``lock`` the refresh runs inside it and re-reads the connection first, skipping the refresh when
  another process already did it.
- A refusal (``wire.REFUSAL_CODES``) removes the stored connection, runs ``on_refusal`` once with
  the ``Refusal``, and raises ``RefusalError`` (``refusal_of(e)`` is set). A 5xx from the token
  endpoint raises ``InternalServerError`` coded ``invalid_request``, origin ``directory``, and keeps
  the connection; no answer raises ``APIConnectionError``, also keeping it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import httpx

from services import wire
from services.clock import Clock

from .assertion import load_signing_key
from .crouter import Crouter
from .errors import (
    APIConnectionError,
    AuthenticationError,
    CrouterError,
    InternalServerError,
    Refusal,
    RefusalError,
)
from .http import Sleep, decode_error
from .models import Connection, Run
from .stores import ConnectionStore

__all__ = ["OAuth2Client", "RefusalHandler", "EXPIRY_MARGIN_S"]

RefusalHandler = Callable[[Refusal], object]
"""``on_refusal``'s callback: called with the ``Refusal``; may be async."""

EXPIRY_MARGIN_S = 10.0
"""An access token this close to its expiry is refreshed before use."""


class _ConnectionAuth:
    """The token source ``OAuth2Client.client`` gives its ``Crouter``."""

    refreshable = True

    def __init__(self, oauth: "OAuth2Client", user_id: str) -> None:
        self._oauth = oauth
        self._user_id = user_id

    async def token(self) -> str:
        return (await self._oauth._current(self._user_id)).access_token

    async def refresh(self, stale: str) -> str:
        return (await self._oauth._refreshed(self._user_id, stale=stale)).access_token


class OAuth2Client:
    """An app's OAuth client on one directory: builds ``Crouter``s and keeps tokens fresh."""

    def __init__(
        self,
        *,
        client_id: str,
        issuer: str,
        private_key: Any,
        store: ConnectionStore,
        redirect_uri: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_refusal: RefusalHandler | None = None,
        max_retries: int = 2,
        sleep: Sleep | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client_id = client_id
        self.issuer = issuer.rstrip("/")
        self.redirect_uri = redirect_uri
        self.store = store
        self.max_retries = max_retries
        self.clock = clock or Clock()
        self.sleep: Sleep = sleep or self.clock.sleep
        self._key = load_signing_key(private_key)
        self._http = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30.0))
        self._refusal_handler = on_refusal
        self._discovery: dict[str, Any] | None = None
        self._discovery_lock = asyncio.Lock()
        self._connections: dict[str, Connection] = {}
        self._inflight: dict[str, asyncio.Future[Connection]] = {}
        self._refusals: dict[str, RefusalError] = {}
        self.refresh_count = 0
        """How many refresh requests this client sent to the directory."""

    def on_refusal(self, handler: RefusalHandler | None) -> RefusalHandler | None:
        """Set the refusal callback (usable as a decorator); returns it."""
        self._refusal_handler = handler
        return handler

    # -- clients -----------------------------------------------------------------------------

    async def client(self, user_id: str) -> Crouter:
        """A ``Crouter`` on the person's runtime; refreshes first when the stored token expired."""
        conn = await self._current(user_id)
        return Crouter(
            runtime_url=conn.runtime_url,
            auth=_ConnectionAuth(self, user_id),
            http_client=self._http,
            max_retries=self.max_retries,
            sleep=self.sleep,
            clock=self.clock,
            user_id=user_id,
        )

    async def discovery(self) -> dict[str, Any]:
        """The directory's discovery document (fetched once; a failure is not remembered)."""
        if self._discovery is not None:
            return self._discovery
        async with self._discovery_lock:
            if self._discovery is None:
                url = wire.join_url(self.issuer, wire.DIRECTORY_DISCOVERY_PATH)
                answer = await self._directory("GET", url)
                if not isinstance(answer, dict) or not isinstance(answer.get("token_endpoint"), str):
                    raise CrouterError(
                        "the directory's discovery document has no token_endpoint",
                        code="invalid_response",
                        origin="directory",
                    )
                self._discovery = answer
        return self._discovery

    # -- tokens ------------------------------------------------------------------------------

    async def _current(self, user_id: str) -> Connection:
        conn = self._connections.get(user_id)
        if conn is not None and not conn.expired(self.clock.time(), EXPIRY_MARGIN_S):
            return conn
        return await self._refreshed(user_id, stale=None)

    async def _refreshed(self, user_id: str, *, stale: str | None) -> Connection:
        """A usable connection: single-flight per person, skipped when already refreshed."""
        future = self._inflight.get(user_id)
        if future is None:
            future = asyncio.ensure_future(self._refresh_flow(user_id, stale))
            self._inflight[user_id] = future

            def _done(done: asyncio.Future[Connection]) -> None:
                if self._inflight.get(user_id) is done:
                    del self._inflight[user_id]
                if not done.cancelled():
                    done.exception()  # retrieved here so a failure nobody awaits is not reported

            future.add_done_callback(_done)
        return await asyncio.shield(future)

    def _store_lock(self, user_id: str) -> AbstractAsyncContextManager[object]:
        lock = getattr(self.store, "lock", None)
        return lock(user_id) if callable(lock) else nullcontext()

    async def _refresh_flow(self, user_id: str, stale: str | None) -> Connection:
        async with self._store_lock(user_id):
            conn = await self.store.get(user_id)
            if conn is None:
                self._connections.pop(user_id, None)
                refused = self._refusals.get(user_id)
                if refused is not None:
                    raise refused
                raise AuthenticationError(
                    f"no stored connection for {user_id}", code="not_connected", origin="directory"
                )
            self._refusals.pop(user_id, None)
            fresh = not conn.expired(self.clock.time(), EXPIRY_MARGIN_S)
            if fresh and (stale is None or conn.access_token != stale):
                self._connections[user_id] = conn
                return conn
            new = await self._refresh(conn)
            await self.store.save(new)
            self._connections[user_id] = new
            return new

    async def _refresh(self, conn: Connection) -> Connection:
        endpoint = str((await self.discovery())["token_endpoint"])
        form = {
            "grant_type": "refresh_token",
            "refresh_token": conn.refresh_token,
            "client_id": self.client_id,
            "client_assertion_type": wire.CLIENT_ASSERTION_TYPE,
            "client_assertion": self._key.assertion(
                client_id=self.client_id, audience=endpoint, now=self.clock.time()
            ),
        }
        self.refresh_count += 1
        response = await self._send("POST", endpoint, data=form)
        if response.status_code >= 300:
            error = decode_error(response, response.content, origin="directory")
            if error.code in wire.REFUSAL_CODES and response.status_code < 500:
                await self._refused(conn.user_id, error)
            if response.status_code >= 500:
                raise InternalServerError(
                    f"the directory failed to refresh the connection (HTTP {response.status_code})",
                    status=response.status_code,
                    code="invalid_request",
                    origin="directory",
                    retryable=error.retryable,
                    details=error.details,
                ) from error
            raise error
        try:
            answer = response.json()
            return Connection(
                user_id=str(answer.get("user_id") or conn.user_id),
                access_token=str(answer["access_token"]),
                refresh_token=str(answer.get("refresh_token") or conn.refresh_token),
                expires_at=self.clock.time() + float(answer.get("expires_in", 3600)),
                scope=str(answer.get("scope") or "").split() or list(conn.scope),
                runtime_url=str(answer.get("runtime_url") or conn.runtime_url),
                runtime_id=str(answer.get("runtime_id") or conn.runtime_id),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CrouterError(
                "the directory's token answer is malformed", code="invalid_response", origin="directory"
            ) from exc

    async def _refused(self, user_id: str, error: CrouterError) -> None:
        refusal = Refusal(code=str(error.code), user_id=user_id, message=error.message)
        refused = RefusalError(
            error.message,
            status=error.status,
            code=error.code,
            origin="directory",
            retryable=False,
            details=error.details,
            param=error.param,
            refusal=refusal,
        )
        await self.store.delete(user_id)
        self._connections.pop(user_id, None)
        self._refusals[user_id] = refused
        handler = self._refusal_handler
        if handler is not None:
            try:
                outcome = handler(refusal)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:  # the refusal is what the caller must see
                raise refused from exc
        raise refused

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request to the directory; an unreachable directory is a retryable ``APIConnectionError``."""
        try:
            return await self._http.request(method, url, headers={"Accept": "application/json"}, **kwargs)
        except httpx.TransportError as exc:
            raise APIConnectionError(
                f"the directory is unreachable ({type(exc).__name__}: {exc})",
                code="connection_error",
                origin="directory",
                retryable=True,
            ) from exc

    async def _directory(self, method: str, url: str) -> Any:
        response = await self._send(method, url)
        if response.status_code >= 300:
            raise decode_error(response, response.content, origin="directory")
        try:
            return response.json()
        except ValueError as exc:
            raise CrouterError("the directory answered non-JSON", code="invalid_response", origin="directory") from exc

    # -- watchers ----------------------------------------------------------------------------

    async def watch_grants(self, user_id: str, *, wait: float = 30.0) -> AsyncIterator[dict[str, Any]]:
        """Yield the person's grant now, then each new version (long-polling ``grant.get``)."""
        client = await self.client(user_id)
        grant = await client.grant.get()
        yield grant
        version = grant.get("version")
        while True:
            grant = await client.grant.get(wait=wait, since=version)
            if grant.get("version") != version:
                version = grant.get("version")
                yield grant

    async def watch_runs(self, user_id: str, interval: float = 1.0) -> AsyncIterator[Run]:
        """Poll ``run.list`` every ``interval`` seconds; yield each run that is new or changed."""
        client = await self.client(user_id)
        seen: dict[str, dict[str, Any]] = {}
        while True:
            for run in await client.runs.list():
                if seen.get(run.id) != run.raw:
                    seen[run.id] = run.raw
                    yield run
            await self.sleep(interval)

    async def aclose(self) -> None:
        """Close the HTTP client shared by this client's ``Crouter``s."""
        await self._http.aclose()

    async def __aenter__(self) -> "OAuth2Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

