"""The app's client assertion: a JWT signed with its private key that authenticates a refresh.

Claims (``services.wire``): ``iss`` = ``sub`` = the client id, ``aud`` = the token endpoint,
``iat``, ``exp``, ``jti``; the header carries the public key as ``jwk``. An RSA key signs RS256, an
EC P-256 key ES256; any other key is refused when the client is built.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from .errors import CrouterError

__all__ = ["SigningKey", "load_signing_key", "ASSERTION_LIFETIME_S"]

ASSERTION_LIFETIME_S = 300
"""How long a client assertion stays valid."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A loaded private key, its JWS algorithm and its public JWK."""

    key: Any
    algorithm: str
    public_jwk: dict[str, Any]

    def assertion(self, *, client_id: str, audience: str, now: float) -> str:
        """A fresh client assertion for ``audience`` (the token endpoint)."""
        issued = int(now)
        claims = {
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": issued,
            "exp": issued + ASSERTION_LIFETIME_S,
            "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, self.key, algorithm=self.algorithm, headers={"jwk": self.public_jwk})


def load_signing_key(private_key: Any) -> SigningKey:
    """Load a PEM (str or bytes) or a ``cryptography`` private key; RSA or EC P-256 only."""
    key = private_key
    if isinstance(key, str):
        key = key.encode()
    if isinstance(key, (bytes, bytearray)):
        try:
            key = serialization.load_pem_private_key(bytes(key), password=None)
        except (ValueError, TypeError) as exc:
            raise CrouterError(f"private_key is not a PEM private key: {exc}", code="invalid_key") from exc
    if isinstance(key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        return SigningKey(key, "RS256", jwk)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise CrouterError(f"private_key uses curve {key.curve.name}; only P-256 is supported", code="invalid_key")
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
        return SigningKey(key, "ES256", jwk)
    raise CrouterError(f"private_key must be an RSA or EC P-256 key, not {type(key).__name__}", code="invalid_key")
