"""The three recall tools as service calls: search, chat and remember.

Each one resolves the calling conversation's owner (ownerless conversations are ``"user"``),
awaits ``engine.establish(conversation, owner)`` first, and turns every memory-service failure
into ``RecallToolError("memory-honcho: Honcho unavailable (<message>)")``. ``remember`` sends no
session id: a remembered fact is a user-level conclusion, visible across the owner's
conversations. A query or fact holding text that cannot be sent (a lone surrogate, NUL) is
refused with ``OutboxError`` naming where; the caller wrote it and can fix it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from services.changes import ChangeFeed
from services.text import text_problem

from .delivery import DeliveryEngine
from .honcho_client import HonchoClient
from ...honcho_wire import Conclusion
from .models import HonchoError, Ledger, OutboxError, OutboxSettings, RecallToolError, check_conversation_id

__all__ = ["RecallTools", "unavailable"]

OwnerResolver = Callable[[str], Awaitable[str]]


def _check_text(tool: str, what: str, value: str) -> None:
    problem = text_problem(value)
    if problem is not None:
        raise OutboxError(f"{tool}: the {what} holds a {problem}")


def unavailable(exc: Exception) -> RecallToolError:
    """The seed's tool error for a memory-service failure."""
    return RecallToolError(f"memory-honcho: Honcho unavailable ({exc})")


class RecallTools:
    """``search``, ``chat`` and ``remember`` over the memory service, scoped to a conversation's owner."""

    def __init__(self, engine: DeliveryEngine, client: HonchoClient, settings: OutboxSettings,
                 changes: ChangeFeed, resolve_owner: OwnerResolver) -> None:
        self._engine = engine
        self._client = client
        self._settings = settings
        self._changes = changes
        self._resolve_owner = resolve_owner

    async def _establish(self, conversation_id: str) -> tuple[str, Ledger]:
        conv = check_conversation_id(conversation_id)
        owner = await self._resolve_owner(conv)
        try:
            ledger = await self._engine.establish(conv, owner)
        except HonchoError as exc:
            raise unavailable(exc) from exc
        return conv, ledger

    async def search(self, conversation_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Stored messages of the owner that match ``query``, best first."""
        if not isinstance(query, str) or not query.strip():
            raise OutboxError("search: the query is empty")
        _check_text("search", "query", query)
        if not 1 <= int(limit) <= 100:
            raise OutboxError(f"search: limit {limit} must be 1..100")
        _, ledger = await self._establish(conversation_id)
        try:
            found = await self._client.peer_search(ledger["peerIds"]["user"], query, int(limit))
        except HonchoError as exc:
            raise unavailable(exc) from exc
        return [{"content": m.get("content", ""), "peer_id": m.get("peer_id"), "session_id": m.get("session_id"),
                 "created_at": m.get("created_at"),
                 "conversation": (m.get("metadata") or {}).get("conversation")} for m in found]

    async def chat(self, conversation_id: str, query: str) -> str:
        """Ask the memory service about the owner; its answer text."""
        if not isinstance(query, str) or not query.strip():
            raise OutboxError("chat: the question is empty")
        _check_text("chat", "question", query)
        _, ledger = await self._establish(conversation_id)
        try:
            return await self._client.peer_chat(ledger["peerIds"]["user"], query)
        except HonchoError as exc:
            raise unavailable(exc) from exc

    async def remember(self, conversation_id: str, fact: str) -> Conclusion:
        """Store ``fact`` as a user-level conclusion (no session); the created conclusion."""
        if not isinstance(fact, str) or not fact.strip():
            raise OutboxError("remember: the fact is empty")
        _check_text("remember", "fact", fact)
        if len(fact) > 65535:
            raise OutboxError(f"remember: the fact has {len(fact)} characters, at most 65535 fit")
        conv, ledger = await self._establish(conversation_id)
        conclusion = {"content": fact, "observer_id": ledger["peerIds"]["assistant"],
                      "observed_id": ledger["peerIds"]["user"]}
        try:
            created = await self._client.create_conclusions([conclusion])
        except HonchoError as exc:
            raise unavailable(exc) from exc
        self._changes.announce("outbox", "memory.remembered", conv, conclusion_id=created[0].get("id"))
        return created[0]
