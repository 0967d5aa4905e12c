"""What the Honcho fake answers where real Honcho asks a model: deterministic, and scriptable.

Real Honcho derives a peer's representation, peer card, session summaries and dialectic (chat)
answers with a model. The fake runs no model: each answer is built by rule from the stored
messages and conclusions, in the real response shape, and says it is the fake's:

- ``representation``: ``"[fake Honcho representation] {peer}: N messages; recent: ...;
  conclusions: ..."`` (the peer's last three messages, its last five conclusions);
- ``card``: a stored card (``PUT .../card``) when there is one, else None (as a real server
  before its first dream);
- ``summary``: ``"[fake Honcho summary] N messages from P peers: ..."`` (the first words of the
  last messages) for both the short and the long summary;
- ``chat``: the three stored messages and conclusions sharing most words with the query.

An operator scripts any of them, as the cloud fake scripts replies:
``service.respond("chat", lambda ask: f"scripted: {ask.query}")``. The function gets a
``HonchoAsk`` and returns the answer (a string; a list of strings for ``card``, where a single
string is a one-line card); ``None`` falls back to the rule. ``service.respond(kind, None)``
removes the script.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from ..honcho_wire import Message

__all__ = ["Answer", "AnswerKind", "HonchoAsk", "Responder", "default_answer", "rank"]

AnswerKind = Literal["chat", "representation", "card", "summary"]

Answer = str | list[str] | None
"""A model-made answer: text, a peer card's lines, or None (no answer)."""

Item = TypeVar("Item", bound=Mapping[str, object])


@dataclass(frozen=True)
class HonchoAsk:
    """What a model-made answer is asked about."""

    kind: AnswerKind
    workspace_id: str
    peer_id: str | None
    target: str | None = None
    session_id: str | None = None
    query: str | None = None
    messages: list[Message] = field(default_factory=list)
    """The stored messages in scope (oldest first)."""
    conclusions: list[str] = field(default_factory=list)
    """The stored conclusions about the observed peer."""
    card: list[str] | None = None
    """The stored peer card, if any."""


Responder = Callable[[HonchoAsk], Answer]


def rank(items: list[Item], query: str) -> list[Item]:
    """``items`` sharing words with ``query``, most shared first (ties keep their order)."""
    words = [w for w in re.findall(r"\w+", query.lower()) if len(w) > 2] or [query.lower()]
    scored = []
    for order, item in enumerate(items):
        text = str(item.get("content", "")).lower()
        score = sum(text.count(w) for w in words)
        if score:
            scored.append((-score, order, item))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [item for _, _, item in scored]


def _count(number: int, noun: str) -> str:
    """``1 message``, ``3 messages``: a count with its noun in the right number."""
    return f"{number} {noun if number == 1 else noun + 's'}"


def default_answer(ask: HonchoAsk) -> Answer:
    """The rule-made answer for ``ask`` (see the module's docstring)."""
    who = ask.target or ask.peer_id or "the session"
    if ask.kind == "card":
        return ask.card
    if ask.kind == "representation":
        recent = " | ".join(m["content"][:80] for m in ask.messages[-3:])
        return (f"[fake Honcho representation] {who}: {_count(len(ask.messages), 'message')}"
                + (f"; recent: {recent}" if recent else "")
                + (f"; conclusions: {' | '.join(ask.conclusions[-5:])}" if ask.conclusions else ""))
    if ask.kind == "summary":
        peers = sorted({m["peer_id"] for m in ask.messages})
        gist = " | ".join(" ".join(m["content"].split()[:8]) for m in ask.messages[-3:])
        return f"[fake Honcho summary] {_count(len(ask.messages), 'message')} from {_count(len(peers), 'peer')}: {gist}"
    texts = [m["content"] for m in ask.messages] + ask.conclusions
    hits = rank([{"content": text} for text in texts], ask.query or "")[:3]
    lines = "; ".join(h["content"][:200] for h in hits) or "nothing stored matches the question"
    return (f"[fake Honcho: a deterministic answer, no model] About {who}, from "
            f"{_count(len(ask.messages), 'stored message')} and {_count(len(ask.conclusions), 'conclusion')}: {lines}")
