"""What Honcho holds, as a person looks for it: frozen read models for the memory view.

``read_memory(client, ...)`` reads through the same ``HonchoClient`` the outbox delivers with (so
the view shows what the memory service really holds, embedded fake, served fake or a real Honcho):
the newest sessions and the peers with their metadata, the messages of one session with their
times, one peer's representation, and the messages matching a search. A failure is reported in
``error`` instead of raising, so the view shows it and keeps what it could read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

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


def _item(raw: Mapping[str, object]) -> HonchoItem:
    meta = raw.get("metadata") or {}
    return HonchoItem(str(raw.get("id", "")), json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else "",
                      str(raw.get("created_at", "")))


def _message(raw: Mapping[str, object]) -> HonchoMessage:
    return HonchoMessage(str(raw.get("id", "")), str(raw.get("session_id", "")), str(raw.get("peer_id", "")),
                         str(raw.get("content", "")), str(raw.get("created_at", "")))


async def read_memory(client: HonchoClient, *, session_id: str | None = None, peer_id: str | None = None,
                      query: str | None = None, size: int = 50) -> HonchoSnapshot:
    """Read sessions, peers, one session's newest messages, one peer's representation and a search."""
    sessions: list[HonchoItem] = []
    sessions_total = 0
    peers: list[HonchoItem] = []
    messages: list[HonchoMessage] = []
    messages_total = 0
    representation: str | None = None
    found: list[HonchoMessage] = []
    error: str | None = None
    try:
        page = await client.list_page("sessions", "sessions", size=size, reverse=True)
        sessions = [_item(s) for s in page.get("items", [])]
        sessions_total = int(page.get("total") or 0)
        peers = [_item(p) for p in (await client.list_page("peers", "peers", size=size)).get("items", [])]
        session_id = session_id or (sessions[0].id if sessions else None)
        if session_id:
            page = await client.list_page(f"session {session_id} messages", "sessions", session_id, "messages",
                                          size=size, reverse=True)
            messages = [_message(m) for m in reversed(page.get("items", []))]
            messages_total = int(page.get("total") or 0)
        peer_id = peer_id or (peers[0].id if peers else None)
        if peer_id:
            representation = await client.peer_representation(peer_id)
        if query and query.strip():
            found = [_message(m) for m in await client.search(query.strip())]
    except ServiceError as exc:
        error = str(exc)
    return HonchoSnapshot(sessions=sessions, sessions_total=sessions_total, peers=peers, session_id=session_id,
                          messages=messages, messages_total=messages_total, peer_id=peer_id,
                          representation=representation, query=query or None, found=found, error=error)
