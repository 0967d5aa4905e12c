"""The fake directory: discovery, token refresh with rotating refresh tokens, JWKS.

Client authentication is a signed client assertion (``private_key_jwt``). The directory learns
the client's public key from the ``jwk`` header of its first valid assertion and holds the client
to that key afterwards, as app registration would. As OpenID Connect Core (9) and RFC 7523 (3)
ask, an assertion is used once: its ``jti`` is remembered until its ``exp`` and a replay is
refused; it may live at most ``MAX_ASSERTION_LIFETIME_S`` (the SDK makes them for 300 s), and its
time claims must be finite numbers.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any
from urllib.parse import parse_qs

import httpx
import jwt
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from ..wire import (
    CLIENT_ASSERTION_TYPE,
    DIRECTORY_DISCOVERY_PATH,
    DIRECTORY_JWKS_PATH,
    DIRECTORY_TOKEN_PATH,
    join_url,
)
from .errors import CloudError
from .failures import InterceptContext
from .host import CloudHost
from .records import DirectoryCall
from .users import FakeUser

__all__ = ["DirectoryCall", "Directory", "MAX_ASSERTION_LIFETIME_S"]

MAX_ASSERTION_LIFETIME_S = 300
"""The longest a client assertion may be valid (``exp - iat``)."""
CLOCK_SKEW_S = 30
"""How far the app's clock may be from the cloud's."""


_PATHS = {
    ("GET", DIRECTORY_DISCOVERY_PATH): "directory.discovery",
    ("POST", DIRECTORY_TOKEN_PATH): "directory.token",
    ("GET", DIRECTORY_JWKS_PATH): "directory.jwks",
}


def _directory_error(status: int, code: str, message: str) -> CloudError:
    return CloudError(status, code, message, origin="directory", retryable=False)


class Directory:
    """Answers the directory's three operations for one cloud (the pinned client key is
    ``CloudState.client_jwk``)."""

    def __init__(self, cloud: CloudHost) -> None:
        self.cloud = cloud
        self.state = cloud.state
        self.trusted: list[dict[str, Any]] = []
        """Client keys accepted besides the pinned one, never pinned (``trust_client_key``)."""
        self.used_jtis: dict[str, float] = {}
        """The ``jti`` of every client assertion accepted, until it expires (a replay is refused)."""

    def _forget_used(self, now: float) -> None:
        if len(self.used_jtis) > 1024:
            self.used_jtis = {jti: until for jti, until in self.used_jtis.items() if until >= now}

    def trust_client_key(self, private_key_pem: str) -> None:
        """Accept assertions signed with this key as well (a served workspace's own app side, so an
        app's first key is still the one the directory pins)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        algorithm = ECAlgorithm if isinstance(key, ec.EllipticCurvePrivateKey) else RSAAlgorithm
        jwk = json.loads(algorithm.to_jwk(key.public_key()))  # type: ignore[arg-type]
        self.trusted.append({k: v for k, v in jwk.items() if k in ("kty", "n", "e", "crv", "x", "y")})

    def discovery(self) -> dict[str, Any]:
        issuer = self.cloud.issuer
        return {
            "issuer": issuer,
            "authorization_endpoint": join_url(issuer, "/oauth/authorize"),
            "token_endpoint": join_url(issuer, DIRECTORY_TOKEN_PATH),
            "jwks_uri": join_url(issuer, DIRECTORY_JWKS_PATH),
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        }

    async def handle(self, request: httpx.Request, raw: bytes, route: str) -> httpx.Response:
        """Answer a request whose path below the issuer is ``route``."""
        cloud = self.cloud
        op = _PATHS.get((request.method, route))
        if op is None:
            return _directory_error(404, "not_found", f"no directory route {request.method} {request.url}").response()
        form = _form(raw) if op == "directory.token" else {}
        user = self._user_for(form.get("refresh_token")) if op == "directory.token" else None
        record = DirectoryCall(op, request.method, route, user.id if user else None, "", None, cloud.clock.time())
        cap = cloud.limits.calls
        for kept in (cloud.directory_calls, cloud.refreshes) if op == "directory.token" else (cloud.directory_calls,):
            kept.append(record)
            if len(kept) > cap + cap // 8:  # bounded like ``cloud.calls``: the oldest go
                del kept[: len(kept) - cap]
        ctx = InterceptContext(op, record.user_id, request.method, route, dict(request.url.params), form, None)
        answer = await self.state.failures.run(ctx)
        if answer == "unreachable":
            record.answer = "unreachable"
            raise httpx.ConnectError(f"{cloud.issuer} is unreachable", request=request)
        if isinstance(answer, CloudError):
            answer.origin = "directory"
            record.answer, record.status = str(answer.status), answer.status
            return answer.response()
        try:
            if op == "directory.discovery":
                response = httpx.Response(200, json=self.discovery())
            elif op == "directory.jwks":
                response = httpx.Response(200, json={"keys": [self.state.key.jwk()]})
            else:
                response = self._token(form, user, record)
        except CloudError as exc:
            response = exc.response()
            if record.answer == "":
                record.answer = exc.code if exc.status == 400 else str(exc.status)
        record.status = response.status_code
        if record.answer == "":
            record.answer = "ok"
        return response

    # -- token ---------------------------------------------------------------------------------

    def _user_for(self, refresh_token: str | None) -> "FakeUser | None":
        if not refresh_token:
            return None
        user_id = self.state.refresh_tokens.get(refresh_token)
        return self.state.users.get(user_id) if user_id else None

    def _token(self, form: dict[str, str], user: "FakeUser | None", record: DirectoryCall) -> httpx.Response:
        cloud = self.cloud
        if form.get("grant_type") != "refresh_token":
            raise _directory_error(400, "unsupported_grant_type", "only grant_type=refresh_token is supported")
        self._check_client(form)
        token = form.get("refresh_token", "")
        if user is None:
            raise _directory_error(400, "invalid_grant", "unknown refresh token")
        refusal = self._refusal(user, token)
        if refusal is not None:
            record.answer = refusal
            raise _directory_error(400, refusal, f"refresh refused: {refusal}")
        user.superseded.add(token)
        new_refresh = "rt_" + secrets.token_urlsafe(24)
        user.refresh_token = new_refresh
        self.state.refresh_tokens[new_refresh] = user.id
        access, ttl = self.state.mint_access(user)
        return httpx.Response(
            200,
            json={
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": ttl,
                "refresh_token": new_refresh,
                "scope": " ".join(user.grant.scopes),
                "user_id": user.id,
                "runtime_url": cloud.runtime_url_for(user.id),
                "runtime_id": cloud.runtime_id,
            },
        )

    @staticmethod
    def _refusal(user: FakeUser, token: str) -> str | None:
        if user.family_revoked:
            return "refresh_token_reused"
        if token in user.superseded:
            user.family_revoked = True  # reuse detection revokes the whole family
            return "refresh_token_reused"
        if user.refusal is not None:
            return user.refusal
        if not user.grant.active:
            state = user.grant.state
            return (state or {}).get("revoked_code") or "grant_removed"
        return None

    def _check_client(self, form: dict[str, str]) -> None:
        client_id = self.cloud.client_id
        if form.get("client_id") != client_id:
            raise _directory_error(401, "invalid_client", f"unknown client {form.get('client_id')!r}")
        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
            raise _directory_error(401, "invalid_client", "a signed client assertion is required")
        assertion = form.get("client_assertion", "")
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError as exc:
            raise _directory_error(401, "invalid_client", f"malformed client assertion: {exc}") from None
        jwk = header.get("jwk")
        alg = header.get("alg")
        if not isinstance(jwk, dict) or alg not in ("RS256", "ES256"):
            raise _directory_error(401, "invalid_client", "the assertion must be RS256/ES256 with a jwk header")
        pinned = self.state.client_jwk
        public = {k: v for k, v in jwk.items() if k in ("kty", "n", "e", "crv", "x", "y")}
        if pinned is not None and public != pinned and public not in self.trusted:
            raise _directory_error(401, "invalid_client", "the assertion is signed with a key this client does not hold")
        try:
            algorithm = RSAAlgorithm if alg == "RS256" else ECAlgorithm
            key = algorithm.from_jwk(json.dumps(public))
            claims = jwt.decode(
                assertion,
                key,  # type: ignore[arg-type]
                algorithms=[alg],
                audience=join_url(self.cloud.issuer, DIRECTORY_TOKEN_PATH),
                issuer=client_id,
                options={
                    "require": ["exp", "iat", "iss", "sub", "aud", "jti"],
                    "verify_exp": False,  # checked below against the cloud's clock
                    "verify_iat": False,
                },
            )
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise _directory_error(401, "invalid_client", f"client assertion refused: {exc}") from None
        if claims.get("sub") != client_id:
            raise _directory_error(401, "invalid_client", "client assertion sub must be the client id")
        exp, iat = claims["exp"], claims["iat"]
        for name, value in (("exp", exp), ("iat", iat), ("nbf", claims.get("nbf", 0))):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise _directory_error(401, "invalid_client", f"client assertion {name} must be a number of seconds")
        now = self.cloud.clock.time()
        if exp < now - CLOCK_SKEW_S:
            raise _directory_error(401, "invalid_client", "client assertion expired")
        if exp - iat > MAX_ASSERTION_LIFETIME_S or exp > now + MAX_ASSERTION_LIFETIME_S + CLOCK_SKEW_S:
            raise _directory_error(401, "invalid_client",
                                   f"client assertion lives longer than {MAX_ASSERTION_LIFETIME_S} s")
        if claims.get("nbf", 0) > now + CLOCK_SKEW_S:
            raise _directory_error(401, "invalid_client", "client assertion is not valid yet")
        jti = claims["jti"]
        if not isinstance(jti, str) or not jti:
            raise _directory_error(401, "invalid_client", "client assertion jti must be a string")
        self._forget_used(now)
        if jti in self.used_jtis:
            raise _directory_error(401, "invalid_client", "client assertion was already used (jti replayed)")
        self.used_jtis[jti] = float(exp) + CLOCK_SKEW_S
        if pinned is None and public not in self.trusted:
            self.state.client_jwk = public


def _form(raw: bytes) -> dict[str, str]:
    try:
        parsed = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}
    return {k: v[-1] for k, v in parsed.items()}
