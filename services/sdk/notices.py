"""Verifying run notices: ``verify_run_notice`` checks the bearer token a runtime sends to the app.

The token must be an RS256 JWT from the directory's key (``alg`` is fixed, never taken from the
token: no ``none``, no HMAC), typed ``wire.NOTICE_TOKEN_TYPE``, with ``exp``, ``iat``, ``iss``,
``aud`` and ``sub`` present, ``iss`` equal to the issuer, ``aud`` exactly the notice URL and
``grantee`` the app. When the body names a ``run_id`` it must be the token's. Any failure raises
``RunNoticeError`` (status 401, so a route can answer it as is).

Keys come from the directory's JWKS (found through discovery) over the given transport and are
cached per ``(issuer, transport)``. An unknown ``kid`` triggers at most one refetch per
``JWKS_REFETCH_COOLDOWN_S``; the set is refetched anyway after ``JWKS_LIFESPAN_S``.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from services import wire
from services.clock import Clock

from .errors import RunNoticeError

__all__ = ["verify_run_notice", "JWKS_REFETCH_COOLDOWN_S", "JWKS_LIFESPAN_S", "NOTICE_LEEWAY_S"]

JWKS_REFETCH_COOLDOWN_S = 30.0
"""At most one refetch for unknown key ids within this many seconds."""
JWKS_LIFESPAN_S = 300.0
"""A cached key set older than this is fetched again (a removed key stops verifying)."""
NOTICE_LEEWAY_S = 5.0
"""Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""
_REQUIRED = ["exp", "iat", "iss", "aud", "sub"]


@dataclass
class _KeySet:
    keys: dict[str, RSAPublicKey] = field(default_factory=dict)
    fetched_at: float | None = None
    refetched_at: float | None = None
    fetches: int = 0


class _NoTransport:
    """Stands for "the default transport" as a cache key."""


_DEFAULT_TRANSPORT = _NoTransport()
_CACHE: "weakref.WeakKeyDictionary[object, dict[str, _KeySet]]" = weakref.WeakKeyDictionary()


_STRONG_CACHE: dict[object, dict[str, _KeySet]] = {}
"""For transports that cannot be weakly referenced (kept for the life of the process)."""


def _key_set(issuer: str, transport: object) -> _KeySet:
    try:
        per_transport = _CACHE.get(transport)
        if per_transport is None:
            per_transport = _CACHE[transport] = {}
    except TypeError:
        per_transport = _STRONG_CACHE.setdefault(transport, {})
    return per_transport.setdefault(issuer, _KeySet())


def _fail(message: str, code: str = "invalid_notice") -> RunNoticeError:
    return RunNoticeError(message, status=401, code=code, origin="runtime", retryable=False)


async def _fetch_keys(issuer: str, transport: httpx.AsyncBaseTransport | None) -> dict[str, RSAPublicKey]:
    try:
        async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(10.0)) as http:
            discovery = await http.get(wire.join_url(issuer, wire.DIRECTORY_DISCOVERY_PATH))
            discovery.raise_for_status()
            jwks_uri = discovery.json().get("jwks_uri") or wire.join_url(issuer, wire.DIRECTORY_JWKS_PATH)
            answer = await http.get(str(jwks_uri))
            answer.raise_for_status()
            document = answer.json()
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise _fail(f"the directory's keys could not be fetched: {exc}", "jwks_unavailable") from exc
    keys: dict[str, RSAPublicKey] = {}
    for jwk in document.get("keys", []) if isinstance(document, dict) else []:
        if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or jwk.get("alg") not in (None, "RS256"):
            continue
        kid = jwk.get("kid")
        if not isinstance(kid, str):
            continue
        try:
            key = jwt.PyJWK(jwk, algorithm="RS256").key
        except jwt.PyJWTError:
            continue
        if isinstance(key, RSAPublicKey):
            keys[kid] = key
    return keys


async def _key_for(kid: str, issuer: str, transport: httpx.AsyncBaseTransport | None, now: float) -> RSAPublicKey:
    cache_key = transport if transport is not None else _DEFAULT_TRANSPORT
    entry = _key_set(issuer, cache_key)
    fetched_now = False
    if entry.fetched_at is None or now - entry.fetched_at >= JWKS_LIFESPAN_S:
        entry.keys = await _fetch_keys(issuer, transport)
        entry.fetched_at, fetched_now = now, True
        entry.fetches += 1
    key = entry.keys.get(kid)
    cooled = entry.refetched_at is None or now - entry.refetched_at >= JWKS_REFETCH_COOLDOWN_S
    if key is None and not fetched_now and cooled:
        entry.refetched_at = now
        entry.keys = await _fetch_keys(issuer, transport)
        entry.fetched_at = now
        entry.fetches += 1
        key = entry.keys.get(kid)
    if key is None:
        raise _fail(f"the notice token's key id {kid!r} is not one of the directory's keys", "unknown_kid")
    return key


def _bearer(request: httpx.Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _fail("the notice has no bearer token", "missing_token")
    return token.strip()


async def verify_run_notice(
    request: httpx.Request,
    *,
    run_notice_url: str,
    issuer: str,
    grantee: str,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Clock | None = None,
) -> dict[str, Any]:
    """Verify a run notice request; return its token's claims or raise ``RunNoticeError``."""
    now = (clock or Clock()).time()
    issuer = issuer.rstrip("/")
    token = _bearer(request)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise _fail(f"the notice token is not a JWT: {exc}") from exc
    if header.get("alg") != "RS256":
        raise _fail(f"the notice token's algorithm {header.get('alg')!r} is not RS256", "bad_algorithm")
    if header.get("typ") != wire.NOTICE_TOKEN_TYPE:
        raise _fail(f"the token's type {header.get('typ')!r} is not {wire.NOTICE_TOKEN_TYPE}", "bad_type")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise _fail("the notice token has no key id", "unknown_kid")
    key = await _key_for(kid, issuer, transport, now)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=["RS256"],
            audience=run_notice_url,
            issuer=issuer,
            options={
                "require": _REQUIRED,
                "strict_aud": True,
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise _fail(f"the notice token was refused: {exc}") from exc
    _check_times(claims, now)
    if claims.get("grantee") != grantee:
        raise _fail(f"the notice is for {claims.get('grantee')!r}, not {grantee!r}", "wrong_grantee")
    await _check_body(request, claims)
    return claims


def _number(claims: dict[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(f"the notice token's {name} is not a number")
    return float(value)


def _check_times(claims: dict[str, Any], now: float) -> None:
    if _number(claims, "exp") + NOTICE_LEEWAY_S <= now:
        raise _fail("the notice token has expired", "expired")
    if _number(claims, "iat") - NOTICE_LEEWAY_S > now:
        raise _fail("the notice token was issued in the future", "not_yet_valid")
    if "nbf" in claims and _number(claims, "nbf") - NOTICE_LEEWAY_S > now:
        raise _fail("the notice token is not valid yet", "not_yet_valid")


async def _check_body(request: httpx.Request, claims: dict[str, Any]) -> None:
    body = await request.aread()
    if not body:
        return
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise _fail("the notice body is not JSON", "invalid_body") from exc
    if isinstance(payload, dict) and "run_id" in payload and "run_id" in claims:
        if payload["run_id"] != claims["run_id"]:
            raise _fail("the notice body names another run than its token", "invalid_body")
