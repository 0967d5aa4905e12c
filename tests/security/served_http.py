"""Talking to a ``workbench serve`` process from a test: the operator's and an app's headers."""

from __future__ import annotations

from typing import Any

import httpx

from services.cloud import generate_private_key_pem
from services.control_wire import CONTROL_PREFIX
from services.sdk import Connection, MemoryConnectionStore, OAuth2Client

_KEYS: list[str] = []
FIELDS = ("user_id", "access_token", "refresh_token", "expires_at", "scope", "runtime_url", "runtime_id")


async def app_token(url: str, control: str, user_id: str) -> str:
    """A fresh access token for ``user_id``: connected through the control API, refreshed by the SDK
    (a real client assertion over HTTP)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        answer = await http.post(f"{CONTROL_PREFIX}/people/{user_id}/connect",
                                 headers={"authorization": f"Bearer {control}"}, json={"scopes": ["crtr:llm"]})
        answer.raise_for_status()
        conn: dict[str, Any] = answer.json()
    store = MemoryConnectionStore()
    await store.save(Connection(**{k: conn[k] for k in FIELDS}))
    oauth = OAuth2Client(client_id=conn["client_id"], issuer=conn["issuer"], private_key=_app_key(),
                         store=store, max_retries=0)
    client = await oauth.client(user_id)
    await client.grant.get()
    await client.aclose()
    saved = await store.get(user_id)
    assert saved is not None
    return saved.access_token


def _app_key() -> str:
    """One app key for the whole test process (the directory holds an app to its first key)."""
    if not _KEYS:
        _KEYS.append(generate_private_key_pem("ec"))
    return _KEYS[0]


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": "application/json"}
