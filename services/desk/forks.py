"""A run's turns, and the conversation a fork at one of them carries.

A run's turns are its root ``node.turn.started`` events, numbered from 1 in the order of its log;
a turn's message is its input text (the prompt, or the messages it delivered). A fork at turn ``n``
is a new run whose messages are the parent's up to that turn: each earlier turn's message and the
model's text of that turn (``node.output_text.done`` on the root), then turn ``n``'s message, as
given or edited. That last message is the fork's prompt, so the fork's first turn answers it anew.

``forked_from`` and ``forked_at_turn`` travel as the new run's parameters (``run.start`` keeps its
body as ``params``), beside the carried ``history``; ``lineage`` reads them back, whatever wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..text import TITLE_CHARS, run_title
from .models import OperatorError

__all__ = ["Turn", "Lineage", "turns_of", "fork_history", "fork_name", "lineage"]


@dataclass(frozen=True)
class Turn:
    """One root turn of a run."""

    number: int
    """From 1, in the order of the run's log."""
    seq: int
    """The sequence number of its ``node.turn.started`` event."""
    text: str
    """Its message: the input the turn started with (empty when it started without one)."""
    at: float
    """When it started (float seconds; 0.0 when the event has no time)."""


@dataclass(frozen=True)
class Lineage:
    """Where a fork came from: the parent run and, when the fork named it, the turn."""

    parent_id: str
    turn: int | None


def _obj(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _is_root(event: Mapping[str, object], run_id: str) -> bool:
    return event.get("node_id", run_id) == run_id


def turns_of(run_id: str, events: Sequence[Mapping[str, object]]) -> list[Turn]:
    """The run's root turns, oldest first."""
    turns: list[Turn] = []
    for event in events:
        if event.get("type") == "node.turn.started" and _is_root(event, run_id):
            seq, at = event.get("seq"), event.get("at")
            turns.append(Turn(len(turns) + 1, seq if isinstance(seq, int) else 0,
                              str(_obj(event.get("input")).get("text") or ""),
                              float(at) if isinstance(at, (int, float)) else 0.0))
    return turns


def fork_history(run_id: str, events: Sequence[Mapping[str, object]], turn: int,
                 text: str | None = None) -> list[dict[str, str]]:
    """The messages of a fork of ``run_id`` at ``turn``: every earlier turn's message and the model's
    text, then turn ``turn``'s message (``text`` when given: the operator's edit). ``OperatorError``
    for a turn the run does not have, or a last message that is empty."""
    if isinstance(turn, bool) or not isinstance(turn, int):
        raise OperatorError(f"a fork's turn is a whole number, not {turn!r}")
    turns = turns_of(run_id, events)
    if not turns:
        raise OperatorError(f"run {run_id} has no turns yet: there is nothing to fork")
    if not 1 <= turn <= len(turns):
        raise OperatorError(f"run {run_id} has turns 1 to {len(turns)}; there is no turn {turn} to fork at")
    last = turns[turn - 1].text if text is None else text
    if not last.strip():
        raise OperatorError(f"turn {turn} has no message: type the message the fork starts with")
    messages: list[dict[str, str]] = []
    number = 0
    for event in events:
        if not _is_root(event, run_id):
            continue
        kind = event.get("type")
        if kind == "node.turn.started":
            number += 1
            if number == turn:
                break
            said = str(_obj(event.get("input")).get("text") or "")
            if said:
                messages.append({"role": "user", "text": said})
        elif kind == "node.output_text.done" and number and event.get("text"):
            messages.append({"role": "assistant", "text": str(event["text"])})
    messages.append({"role": "user", "text": last})
    return messages


def fork_name(parent_name: object, parent_prompt: object, parent_id: str, turn: int) -> str:
    """The fork's name, which says where it came from: ``fork of “garden plan” at turn 2``."""
    title = run_title(parent_name, parent_prompt, parent_id)
    if len(title) > TITLE_CHARS:
        title = title[:TITLE_CHARS - 1].rstrip() + "…"
    return f"fork of “{title}” at turn {turn}"


def lineage(params: Mapping[str, object] | None) -> Lineage | None:
    """The run's parent and turn as its parameters carry them (None for a run that is no fork)."""
    parent = (params or {}).get("forked_from")
    if not isinstance(parent, str) or not parent:
        return None
    turn = (params or {}).get("forked_at_turn")
    return Lineage(parent, turn if isinstance(turn, int) and not isinstance(turn, bool) and turn >= 1 else None)
