"""Forking a conversation at a turn.

``ForkPlanner.fork(parent, owner, at_turn, start_child)`` gathers the parent's messages up to
that turn (delivered turns from the memory service, where their metadata names turn, position and
part; pending turns from the outbox), asks the injected ``start_child(parent_id, messages)`` to
create the child conversation (a new run on the cloud), then writes the pending-fork record
``state/forks/pending/<childId>.json``. The child's next ``establish`` clones the parent's memory
session at the anchor message of that turn and stamps the record resolved.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from services.changes import ChangeFeed
from services.clock import Clock

from .delivery import DeliveryEngine
from .honcho_client import HonchoClient
from ...honcho_wire import Message
from .models import ForkError, ForkRecord, HonchoError, Ledger, OutboxError, OutboxRecord, check_conversation_id
from .stores import OutboxStores

__all__ = ["ForkPlanner"]

_PART = re.compile(r"^\[Part \d+/\d+\] ")

StartChild = Callable[[str, list[dict[str, Any]]], Awaitable[str]]


class ForkPlanner:
    """Creates child conversations and their pending-fork records."""

    def __init__(self, stores: OutboxStores, client: HonchoClient, engine: DeliveryEngine, changes: ChangeFeed,
                 clock: Clock) -> None:
        self._stores = stores
        self._client = client
        self._engine = engine
        self._changes = changes
        self._clock = clock

    async def fork(self, parent_id: str, owner: str, at_turn: int, start_child: StartChild | None) -> str:
        """Create the child conversation and its pending fork; returns the child's id."""
        if start_child is None:
            raise ForkError("forking needs a start_child callable that creates the child conversation")
        if isinstance(at_turn, bool) or not isinstance(at_turn, int) or at_turn < 1:
            raise ForkError(f"fork of {parent_id}: at_turn must be a whole number from 1, got {at_turn!r}")
        ledger, pending = await self._stores.locked(lambda: self._read(parent_id))
        delivered_turns = int(ledger.get("turnCount", 0)) if ledger else 0
        known = delivered_turns + len(pending)
        if at_turn > known:
            raise ForkError(f"conversation {parent_id} has {known} captured turns; cannot fork at turn {at_turn}")
        messages: list[dict[str, Any]] = []
        if ledger is not None and delivered_turns:
            try:
                stored = await self._client.list_messages(ledger["sessionId"])
            except HonchoError as exc:
                raise ForkError(f"fork of {parent_id}: cannot read its delivered turns ({exc})") from exc
            messages.extend(_rebuild(stored, min(at_turn, delivered_turns)))
        for offset, record in enumerate(pending):
            if delivered_turns + offset + 1 > at_turn:
                break
            messages.extend({"role": m.get("role", "user"), "peer": m["peerId"], "text": m["content"]}
                            for m in record["messages"])
        child = check_conversation_id(await start_child(parent_id, messages))
        if child == parent_id:
            raise ForkError(f"start_child returned the parent's own id {parent_id}")
        fork: ForkRecord = {"childId": child, "parentId": parent_id, "atTurn": at_turn,
                            "createdAt": int(self._clock.time() * 1000), "owner": owner}

        def write() -> None:
            if self._stores.read_pending_fork(child) is not None or self._stores.read_ledger(child) is not None:
                raise ForkError(f"conversation {child} already exists in memory; it cannot become a fork child")
            self._stores.write_pending_fork(fork)

        await self._stores.locked(write)
        self._changes.announce("outbox", "fork.created", child, parent_id=parent_id, at_turn=at_turn,
                           messages=len(messages))
        try:
            await self._engine.establish(child, owner)
        except (OutboxError, OSError):
            pass  # stays pending: the next sweep or tool call establishes it
        return child

    def _read(self, parent_id: str) -> tuple[Ledger | None, list[OutboxRecord]]:
        ledger = self._stores.read_ledger(parent_id)
        window = set(ledger.get("deliveredBatchIds", [])) if ledger else set()
        pending = [r for r in self._stores.read_outbox().records
                   if r["conversationId"] == parent_id and r.get("status") != "delivered"
                   and r["batchId"] not in window]
        return ledger, pending


def _rebuild(stored: list[Message], up_to_turn: int) -> list[dict[str, Any]]:
    """Delivered messages of turns ``<= up_to_turn`` as captured messages, parts joined again."""
    grouped: dict[tuple[int, int], list[tuple[int, Message]]] = {}
    order: list[tuple[int, int]] = []
    for message in stored:
        meta = message.get("metadata") or {}
        turn = meta.get("turn")
        if not isinstance(turn, int) or turn > up_to_turn:
            continue
        key = (turn, int(meta.get("index", 0)))
        if key not in grouped:
            grouped[key] = []
            order.append(key)
        grouped[key].append((int(meta.get("part", 1)), message))
    out = []
    for key in sorted(order):
        parts = sorted(grouped[key], key=lambda p: p[0])
        first = parts[0][1]
        many = len(parts) > 1
        text = "".join(_PART.sub("", m["content"]) if many else m["content"] for _, m in parts)
        out.append({"role": (first.get("metadata") or {}).get("role", "user"), "peer": first["peer_id"],
                    "text": text})
    return out
