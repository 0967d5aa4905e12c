"""The directory's signing key: JWKS, access tokens and run-notice tokens (RS256).

Each ``FakeCloud`` has its own key and ``kid``, so several clouds on one issuer verify apart.
Access tokens are minted only on refresh and verified once per token string (the verified
claims are cached), so a call costs no RSA work after the first.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

__all__ = ["SigningKey", "generate_private_key_pem"]


def generate_private_key_pem(kind: str = "rsa") -> str:
    """A new private key as PEM text (``rsa`` 2048-bit or ``ec`` P-256), e.g. for an app's client key."""
    if kind == "ec":
        from cryptography.hazmat.primitives.asymmetric import ec

        key: Any = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class SigningKey:
    """One RSA key pair with a key id; signs and verifies RS256 tokens."""

    def __init__(self, private_pem: str | None = None, kid: str | None = None) -> None:
        if private_pem is None:
            self._private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            loaded = serialization.load_pem_private_key(private_pem.encode(), password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise ValueError("a signing key must be an RSA private key")
            self._private = loaded
        self.public = self._private.public_key()
        self.kid = kid or "k-" + secrets.token_hex(6)
        self._verified: dict[str, dict[str, Any]] = {}

    def private_pem(self) -> str:
        """The private key as PEM text, for a cloud whose state is kept on disk (a secret)."""
        return self._private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK with ``kid``, ``use`` and ``alg``."""
        data = json.loads(RSAAlgorithm.to_jwk(self.public))
        data.update({"kid": self.kid, "use": "sig", "alg": "RS256"})
        return data

    def sign(self, claims: dict[str, Any], *, typ: str) -> str:
        """An RS256 token over ``claims`` with this key's ``kid`` and the given ``typ``."""
        return jwt.encode(claims, self._private, algorithm="RS256", headers={"kid": self.kid, "typ": typ})

    def claims_of(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this key signed, or None for anything else (forged, foreign, garbage).

        Expiry is not checked here: callers compare ``exp`` with their own clock.
        """
        cached = self._verified.get(token)
        if cached is not None:
            return cached
        try:
            header = jwt.get_unverified_header(token)
            if header.get("kid") != self.kid:
                return None
            claims = jwt.decode(
                token,
                self.public,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_aud": False, "verify_iat": False},
            )
        except jwt.PyJWTError:
            return None
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[token] = claims
        return claims

    @staticmethod
    def unverified_claims(token: str) -> dict[str, Any] | None:
        """A token's claims without any check, for records only (``cloud.calls`` user ids)."""
        try:
            return jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
