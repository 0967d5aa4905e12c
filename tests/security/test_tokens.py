"""Client assertions as OpenID Connect Core (9) and RFC 7523 (3) ask: used once (the ``jti`` is
remembered until ``exp``), short-lived, with time claims that are finite numbers; the SDK's own
assertions pass."""

from __future__ import annotations

import time
import uuid
from typing import Any

import jwt

from services.cloud import generate_private_key_pem
from services.sdk import MemoryConnectionStore
from services.sdk.assertion import ASSERTION_LIFETIME_S, load_signing_key
from services.wire import CLIENT_ASSERTION_TYPE

from .conftest import Guarded, envelope_of

KEY = load_signing_key(generate_private_key_pem("ec"))


def _assertion(served: Guarded, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": "app", "sub": "app", "aud": served.url + "/oauth/token", "iat": now,
            "exp": now + 60, "jti": uuid.uuid4().hex, **claims}
    return jwt.encode(body, KEY.key, algorithm=KEY.algorithm, headers={"jwk": KEY.public_jwk})


async def _refresh(served: Guarded, assertion: str) -> Any:
    conn = await served.cloud.connect(MemoryConnectionStore(), "user:r" + uuid.uuid4().hex[:6])
    return await served.http.post("/oauth/token", data={
        "grant_type": "refresh_token", "refresh_token": conn.refresh_token, "client_id": "app",
        "client_assertion_type": CLIENT_ASSERTION_TYPE, "client_assertion": assertion})


async def test_an_assertion_is_used_once(guarded: Guarded) -> None:
    assertion = _assertion(guarded)
    first = await _refresh(guarded, assertion)
    assert first.status_code == 200, first.text
    replayed = await _refresh(guarded, assertion)
    assert replayed.status_code == 401
    assert "already used" in str(envelope_of(replayed)["message"])


async def test_long_lived_assertions_and_odd_time_claims_are_refused(guarded: Guarded) -> None:
    now = int(time.time())
    for claims in ({"exp": now + 10 * 365 * 86400}, {"iat": now - 3600, "exp": now + 3600},
                   {"exp": "nan"}, {"exp": float("nan")}, {"exp": float("inf")}, {"iat": "yesterday"},
                   {"exp": True}, {"nbf": now + 3600}, {"jti": 12}):
        answer = await _refresh(guarded, _assertion(guarded, **claims))
        assert answer.status_code == 401, (claims, answer.text)
        assert envelope_of(answer)["code"] == "invalid_client"


async def test_the_sdk_s_own_assertions_are_accepted_every_time(guarded: Guarded) -> None:
    for _ in range(3):  # each refresh makes a new jti
        answer = await _refresh(guarded, KEY.assertion(client_id="app", audience=guarded.url + "/oauth/token",
                                                       now=time.time()))
        assert answer.status_code == 200, answer.text
    assert ASSERTION_LIFETIME_S <= 300
