"""What Honcho holds, as a person looks for it: frozen read models for the memory view.

``read_memory(client, ...)`` reads through the same ``HonchoClient`` the outbox delivers with (so
the view shows what the memory service really holds, embedded fake, served fake or a real Honcho):
the newest sessions and the peers with their metadata, the messages of one session with their
times, one peer's representation, and the messages matching a search. A failure is reported in
``error`` instead of raising, so the view shows it and keeps what it could read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...errors import ServiceError
from .honcho_client import HonchoClient

__all__ = ["HonchoItem", "HonchoMessage", "HonchoSnapshot", "read_memory"]


@dataclass(frozen=True)
class HonchoItem:
    """A session or a peer: its id, metadata (as compact JSON) and creation time."""

    id: str
    metadata: str
    created_at: str


@dataclass(frozen=True)
class HonchoMessage:
    """One stored message."""

    id: str
    session_id: str
    peer_id: str
    content: str
    created_at: str


@dataclass(frozen=True)
class HonchoSnapshot:
    """One read of the memory service."""

    sessions: list[HonchoItem] = field(default_factory=list)
    sessions_total: int = 0
    peers: list[HonchoItem] = field(default_factory=list)
    session_id: str | None = None
    messages: list[HonchoMessage] = field(default_factory=list)
    messages_total: int = 0
    peer_id: str | None = None
    representation: str | None = None
    query: str | None = None
    found: list[HonchoMessage] = field(default_factory=list)
    error: str | None = None


def _item(raw: dict[str, Any]) -> HonchoItem:
    meta = raw.get("metadata") or {}
    return HonchoItem(str(raw.get("id", "")), json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else "",
                      str(raw.get("created_at", "")))


def _message(raw: dict[str, Any]) -> HonchoMessage:
    return HonchoMessage(str(raw.get("id", "")), str(raw.get("session_id", "")), str(raw.get("peer_id", "")),
                         str(raw.get("content", "")), str(raw.get("created_at", "")))


async def read_memory(client: HonchoClient, *, session_id: str | None = None, peer_id: str | None = None,
                      query: str | None = None, size: int = 50) -> HonchoSnapshot:
    """Read sessions, peers, one session's newest messages, one peer's representation and a search."""
    parts: dict[str, Any] = {"session_id": session_id, "peer_id": peer_id, "query": query or None}
    try:
        sessions = await client.list_page("sessions", "sessions", size=size, reverse=True)
        parts["sessions"] = [_item(s) for s in sessions.get("items", [])]
        parts["sessions_total"] = int(sessions.get("total") or 0)
        parts["peers"] = [_item(p) for p in (await client.list_page("peers", "peers", size=size)).get("items", [])]
        chosen = session_id or (parts["sessions"][0].id if parts["sessions"] else None)
        parts["session_id"] = chosen
        if chosen:
            page = await client.list_page(f"session {chosen} messages", "sessions", chosen, "messages", size=size,
                                          reverse=True)
            parts["messages"] = [_message(m) for m in reversed(page.get("items", []))]
            parts["messages_total"] = int(page.get("total") or 0)
        who = peer_id or (parts["peers"][0].id if parts["peers"] else None)
        parts["peer_id"] = who
        if who:
            parts["representation"] = await client.peer_representation(who)
        if query and query.strip():
            parts["found"] = [_message(m) for m in await client.search(query.strip())]
    except ServiceError as exc:
        parts["error"] = str(exc)
    return HonchoSnapshot(**parts)
