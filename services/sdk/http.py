"""The runtime request core: bearer auth, the version header, error mapping and the retry table.

One SDK call makes these attempts (``max_retries`` defaults to 2; a call's ``max_retries``
overrides it), exactly as the seed's retry table says:

- reads (``wire.RETRYABLE_READS``): a 5xx, a 429 or no answer is retried ``max_retries`` times,
  waiting 0.25 s, 0.5 s (doubling after that);
- keyed sends (``wire.KEYED_SENDS``): resent with the same ``Idempotency-Key`` when the envelope
  says ``retryable: true`` or there was no answer, waiting ``retry_after_s`` when the envelope
  sets it, else 0.5 s, 1 s (doubling); a plain status (``retryable: false``) is not retried;
- every other POST is sent once;
- a 401 on any operation, when the call's token can be refreshed, refreshes once and repeats the
  whole call once; the repeat has its own retries (so one 401 then three 500s on a read surfaces
  the 500, and a 401 surfaces only when the repeat gets one too).

Waits go through an injectable ``sleep`` so tests record them instead of waiting.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx

from services import wire

from .errors import APIConnectionError, AuthenticationError, CrouterError, error_from_envelope

__all__ = [
    "Sleep",
    "TokenSource",
    "FixedToken",
    "RuntimeHttp",
    "read_delay",
    "send_delay",
    "decode_error",
    "OpenStream",
]

Sleep = Callable[[float], Awaitable[None]]
"""An async wait, ``await sleep(seconds)``."""


class TokenSource(Protocol):
    """Where a runtime client gets its bearer token and, optionally, a fresh one after a 401."""

    refreshable: bool
    """False for a fixed token: a 401 is then raised as it is."""

    async def token(self) -> str:
        """The token to send now (refreshing first when it is known to be expired)."""
        ...

    async def refresh(self, stale: str) -> str:
        """A token that replaces ``stale`` (single-flight; may raise a refusal)."""
        ...


class FixedToken:
    """A token that never changes and is never refreshed."""

    refreshable = False

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    async def refresh(self, stale: str) -> str:
        return self._token


def read_delay(attempt: int, error: CrouterError) -> float:
    """The wait before retry ``attempt`` (0-based) of a read: 0.25 s, 0.5 s, 1 s ..."""
    return 0.25 * (2**attempt)


def send_delay(attempt: int, error: CrouterError) -> float:
    """The wait before resend ``attempt`` of a keyed send: ``retry_after_s`` or 0.5 s, 1 s ..."""
    if error.retry_after_s is not None and error.retry_after_s >= 0:
        return error.retry_after_s
    return 0.5 * (2**attempt)


def _read_retryable(error: CrouterError) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    return error.status is not None and (error.status >= 500 or error.status == 429)


def _send_retryable(error: CrouterError) -> bool:
    return isinstance(error, APIConnectionError) or error.retryable is True


def decode_error(response: httpx.Response, body: bytes, *, origin: str = "runtime") -> CrouterError:
    """The error a non-2xx answer describes (envelope when present, else the bare status)."""
    envelope: object = None
    if body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            envelope = parsed.get("error", parsed)
    return error_from_envelope(envelope, response.status_code, origin=origin)


@functools.lru_cache(maxsize=1024)
def _op_url(runtime_url: str, op: str, path: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    """``(method, URL)`` of ``op`` on a runtime (cached: a client calls the same few again and again)."""
    method, route = wire.route_path(op, **dict(path))
    return method, wire.join_url(runtime_url, route)


class RuntimeHttp:
    """Sends runtime operations for one person and applies the retry table."""

    def __init__(
        self,
        *,
        runtime_url: str,
        client: httpx.AsyncClient,
        auth: TokenSource,
        sleep: Sleep,
        max_retries: int = 2,
    ) -> None:
        self.runtime_url = runtime_url.rstrip("/")
        self.client = client
        self.auth = auth
        self.sleep = sleep
        self.max_retries = max_retries

    def _url(self, op: str, path: dict[str, str] | None) -> tuple[str, str]:
        return _op_url(self.runtime_url, op, tuple(path.items()) if path else ())

    def _headers(self, token: str, idempotency_key: str | None) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {token}",
            wire.MIN_RUNTIME_HEADER: wire.SDK_MIN_RUNTIME_VERSION,
            "Accept": "application/json",
        }
        if idempotency_key is not None:
            headers[wire.IDEMPOTENCY_KEY] = idempotency_key
        return headers

    async def call(
        self,
        op: str,
        *,
        path: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        body: object = None,
        idempotency_key: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send ``op`` and return its decoded JSON answer (None for an empty body)."""
        retries = self.max_retries if max_retries is None else max(0, max_retries)
        if op in wire.KEYED_SENDS and idempotency_key is None:
            idempotency_key = uuid.uuid4().hex
        method, url = self._url(op, path)
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        token = await self.auth.token()
        try:
            return await self._attempts(op, method, url, clean, body, token, idempotency_key, retries, timeout)
        except AuthenticationError:
            if not self.auth.refreshable:
                raise
        token = await self.auth.refresh(token)
        return await self._attempts(op, method, url, clean, body, token, idempotency_key, retries, timeout)

    async def _attempts(
        self,
        op: str,
        method: str,
        url: str,
        params: dict[str, Any],
        body: object,
        token: str,
        idempotency_key: str | None,
        retries: int,
        timeout: float | None,
    ) -> Any:
        if op in wire.RETRYABLE_READS:
            retryable, delay = _read_retryable, read_delay
        elif op in wire.KEYED_SENDS:
            retryable, delay = _send_retryable, send_delay
        else:
            retryable, delay, retries = _read_retryable, read_delay, 0
        headers = self._headers(token, idempotency_key)
        attempt = 0
        while True:
            try:
                return await self._send(method, url, params, body, headers, timeout)
            except CrouterError as error:
                if isinstance(error, AuthenticationError) or attempt >= retries or not retryable(error):
                    raise
                await self.sleep(delay(attempt, error))
                attempt += 1

    async def _send(
        self,
        method: str,
        url: str,
        params: dict[str, Any],
        body: object,
        headers: dict[str, str],
        timeout: float | None,
    ) -> Any:
        try:
            response = await self.client.request(
                method, url, params=params or None, json=body, headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.TransportError as exc:
            raise APIConnectionError(
                f"{method} {url}: no answer ({type(exc).__name__}: {exc})", code="connection_error", retryable=True
            ) from exc
        content = response.content
        if response.status_code >= 300:
            raise decode_error(response, content)
        if not content:
            return None
        try:
            return json.loads(content)
        except ValueError as exc:
            raise CrouterError(
                f"{method} {url}: answer is not JSON", status=response.status_code, code="invalid_response"
            ) from exc

    def open_stream(
        self, op: str, *, path: dict[str, str], params: dict[str, Any], headers: dict[str, str] | None = None
    ) -> "OpenStream":
        """Open a streaming GET (``async with``); a non-2xx answer raises its error (a 401 refreshes once first)."""
        return OpenStream(lambda: self._send_stream(op, path, params, headers))

    async def _send_stream(self, op: str, path: dict[str, str], params: dict[str, Any],
                           headers: dict[str, str] | None) -> httpx.Response:
        """The streaming response of a 2xx answer (the caller closes it); an error answer raises, closed."""
        method, url = self._url(op, path)
        token = await self.auth.token()
        for round_ in (0, 1):
            all_headers = self._headers(token, None)
            all_headers["Accept"] = "text/event-stream"
            all_headers.update(headers or {})
            request = self.client.build_request(
                method, url, params={k: v for k, v in params.items() if v is not None} or None,
                headers=all_headers, timeout=httpx.Timeout(30.0, read=None),
            )
            try:
                response = await self.client.send(request, stream=True)
            except httpx.TransportError as exc:
                raise APIConnectionError(
                    f"{method} {url}: no answer ({type(exc).__name__}: {exc})",
                    code="connection_error",
                    retryable=True,
                ) from exc
            if response.status_code < 300:
                return response
            try:
                try:
                    body = await response.aread()
                except httpx.TransportError:
                    body = b""
                error = decode_error(response, body)
            finally:
                await response.aclose()
            if isinstance(error, AuthenticationError) and round_ == 0 and self.auth.refreshable:
                token = await self.auth.refresh(token)
                continue
            raise error
        raise AssertionError("unreachable: the second round returns or raises")


class OpenStream:
    """A streaming response inside ``async with``, closed on the way out (``RuntimeHttp.open_stream``, the
    attached window's change feed).

    A class, not an ``asynccontextmanager`` generator: a reader that stops early (``break`` out of
    ``async for``) leaves the stream to be closed when its generator is finalised, and asyncio then
    closes every suspended generator at once; a second generator inside the first was closed on its
    own and the first's exit failed (``generator didn't stop after athrow()``). Closing here is one
    awaited ``aclose`` whose failure to reach a dropped connection is not news."""

    def __init__(self, send: Callable[[], Awaitable[httpx.Response]]) -> None:
        self._send = send
        """Sends the request and answers the streaming response (``httpx.AsyncClient.send(..., stream=True)``)."""
        self._response: httpx.Response | None = None

    async def __aenter__(self) -> httpx.Response:
        self._response = await self._send()
        return self._response

    async def __aexit__(self, *exc: object) -> None:
        response, self._response = self._response, None
        if response is None:
            return
        try:
            await response.aclose()
        except httpx.TransportError:  # the connection is gone already: nothing is left to close
            pass
