"""verify_run_notice: the forge matrix, the claims matrix and the per-(issuer, transport) key cache."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from services import wire
from services.clock import FakeClock
from services.sdk import RunNoticeError, verify_run_notice

from .wirefake import ISSUER, MiniWire

NOTICE_URL = "https://app.test/run-notices"
GRANTEE = "app:chat"


def public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


def claims(clock: FakeClock, **overrides: Any) -> dict[str, Any]:
    now = int(clock.time())
    body = {
        "iss": ISSUER,
        "aud": NOTICE_URL,
        "sub": "user:o1",
        "grantee": GRANTEE,
        "run_id": "run_1",
        "runtime_id": "runtime:test",
        "seq": 4,
        "iat": now,
        "exp": now + 300,
        "jti": "n1",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def sign(key: Any, payload: dict[str, Any], *, kid: str = "k1", typ: str = wire.NOTICE_TOKEN_TYPE) -> str:
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid, "typ": typ})


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge_hmac(secret: bytes, payload: dict[str, Any], kid: str = "k1") -> str:
    header = b64(json.dumps({"alg": "HS256", "typ": wire.NOTICE_TOKEN_TYPE, "kid": kid}).encode())
    body = b64(json.dumps(payload).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64(signature)}"


def notice(token: str | None, body: dict[str, Any] | None = None) -> httpx.Request:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.Request("POST", NOTICE_URL, headers=headers, json=body or {"run_id": "run_1", "seq": 4})


@pytest.fixture
def keyed(mini: MiniWire, rsa_key: rsa.RSAPrivateKey) -> MiniWire:
    mini.jwks = {"keys": [public_jwk(rsa_key, "k1")]}
    return mini


async def verify(request: httpx.Request, mini: MiniWire, clock: FakeClock) -> dict[str, Any]:
    return await verify_run_notice(
        request, run_notice_url=NOTICE_URL, issuer=ISSUER, grantee=GRANTEE, transport=mini.transport, clock=clock
    )


async def test_a_valid_notice_verifies_and_returns_its_claims(keyed, rsa_key, clock) -> None:
    result = await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    assert result["run_id"] == "run_1" and result["grantee"] == GRANTEE and result["seq"] == 4


def _public_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


FORGERIES = {
    "alg none": lambda key, c: b64(json.dumps({"alg": "none", "typ": wire.NOTICE_TOKEN_TYPE, "kid": "k1"}).encode())
    + "."
    + b64(json.dumps(c).encode())
    + ".",
    "HS256 with the public PEM": lambda key, c: forge_hmac(_public_pem(key), c),
    "HS256 with the JWK JSON": lambda key, c: forge_hmac(json.dumps(public_jwk(key, "k1")).encode(), c),
    "tampered payload": lambda key, c: (lambda t: t.split(".")[0] + "." + b64(json.dumps({**c, "sub": "user:evil"}).encode()) + "." + t.split(".")[2])(sign(key, c)),
    "truncated signature": lambda key, c: sign(key, c)[:-12],
    "not a JWT": lambda key, c: "garbage",
    "signed by another key with a known kid": lambda key, c: sign(rsa.generate_private_key(public_exponent=65537, key_size=2048), c),
    "access token type": lambda key, c: sign(key, c, typ=wire.ACCESS_TOKEN_TYPE),
    "no typ": lambda key, c: jwt.encode(c, key, algorithm="RS256", headers={"kid": "k1"}),
    "no kid": lambda key, c: jwt.encode(c, key, algorithm="RS256", headers={"typ": wire.NOTICE_TOKEN_TYPE}),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
async def test_forged_tokens_are_refused(forgery, keyed, rsa_key, clock) -> None:
    token = FORGERIES[forgery](rsa_key, claims(clock))
    with pytest.raises(RunNoticeError) as caught:
        await verify(notice(token), keyed, clock)
    assert caught.value.status == 401


CLAIM_CASES = {
    "wrong iss": {"iss": "https://evil.test"},
    "iss prefix": {"iss": "https"},
    "wrong aud": {"aud": "https://app.test/other"},
    "aud list": {"aud": ["https://app.test/other", NOTICE_URL]},
    "wrong grantee": {"grantee": "app:other"},
    "missing grantee": {"grantee": None},
    "missing exp": {"exp": None},
    "missing iat": {"iat": None},
    "missing sub": {"sub": None},
    "missing aud": {"aud": None},
    "expired": {"exp": 1_800_000_000 - 60},
    "issued in the future": {"iat": 1_800_000_000 + 600},
    "not valid yet": {"nbf": 1_800_000_000 + 600},
}


@pytest.mark.parametrize("case", sorted(CLAIM_CASES))
async def test_wrong_claims_are_refused(case, keyed, rsa_key, clock) -> None:
    with pytest.raises(RunNoticeError):
        await verify(notice(sign(rsa_key, claims(clock, **CLAIM_CASES[case]))), keyed, clock)


async def test_a_token_expired_by_the_clock_is_refused(keyed, rsa_key, clock) -> None:
    token = sign(rsa_key, claims(clock))
    await verify(notice(token), keyed, clock)
    clock.advance(400)
    with pytest.raises(RunNoticeError) as caught:
        await verify(notice(token), keyed, clock)
    assert caught.value.code == "expired"


async def test_a_missing_bearer_and_a_body_for_another_run_are_refused(keyed, rsa_key, clock) -> None:
    with pytest.raises(RunNoticeError):
        await verify(notice(None), keyed, clock)
    with pytest.raises(RunNoticeError):
        await verify(notice(sign(rsa_key, claims(clock)), {"run_id": "run_2", "seq": 4}), keyed, clock)


async def test_unreachable_keys_are_a_run_notice_error(keyed, rsa_key, clock) -> None:
    keyed.script("directory.jwks", "unreachable")
    with pytest.raises(RunNoticeError) as caught:
        await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    assert caught.value.code == "jwks_unavailable"


# -- the key cache ---------------------------------------------------------------------------------


async def test_keys_are_cached_per_issuer_and_transport(keyed, rsa_key, clock) -> None:
    for _ in range(5):
        await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    assert keyed.jwks_fetches() == 1


async def test_an_unknown_kid_makes_one_throttled_refetch(keyed, rsa_key, clock) -> None:
    await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    for i in range(100):
        with pytest.raises(RunNoticeError) as caught:
            await verify(notice(sign(rsa_key, claims(clock), kid=f"unknown-{i}")), keyed, clock)
        assert caught.value.code == "unknown_kid"
    assert keyed.jwks_fetches() == 2
    clock.advance(31)
    with pytest.raises(RunNoticeError):
        await verify(notice(sign(rsa_key, claims(clock), kid="unknown-x")), keyed, clock)
    assert keyed.jwks_fetches() == 3


async def test_a_rotated_key_is_picked_up_with_one_refetch(keyed, rsa_key, clock) -> None:
    await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    second = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keyed.jwks = {"keys": [public_jwk(rsa_key, "k1"), public_jwk(second, "k2")]}
    result = await verify(notice(sign(second, claims(clock), kid="k2")), keyed, clock)
    assert result["sub"] == "user:o1" and keyed.jwks_fetches() == 2


async def test_a_removed_key_stops_verifying_once_the_cache_ages_out(keyed, rsa_key, clock) -> None:
    await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)
    keyed.jwks = {"keys": []}
    clock.advance(301)
    with pytest.raises(RunNoticeError):
        await verify(notice(sign(rsa_key, claims(clock))), keyed, clock)


async def test_two_clouds_on_one_issuer_verify_independently(keyed, rsa_key, clock) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = MiniWire()
    other.jwks = {"keys": [public_jwk(other_key, "k1")]}
    assert (await verify(notice(sign(rsa_key, claims(clock))), keyed, clock))["jti"] == "n1"
    assert (await verify(notice(sign(other_key, claims(clock))), other, clock))["jti"] == "n1"
    with pytest.raises(RunNoticeError):
        await verify(notice(sign(other_key, claims(clock))), keyed, clock)
