"""How a run's log reads as lines: raw events or the assembled conversation, plus operator actions.

Every line is built from sanitised, clipped text; the stream renders it with markup off.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from services.desk import OperatorAction, RefusalRecord

from .text import LINE_CAP, safe, short_time

__all__ = ["STATUS_GLYPHS", "Attribution", "FOLDED", "FORK_GLYPH", "raw_line", "conversation_lines", "conversation_of", "action_line", "refusal_line", "event_fields", "merge_lines", "carried_lines", "turn_line", "lineage_phrase"]

STATUS_GLYPHS = {"running": "▶", "idle": "◦", "waiting_on_user": "?", "settled": "■", "deleted": "✗"}
"""One glyph per run status, shown in the runs list."""

FORK_GLYPH = "↳"
"""Marks what a fork carries from its parent, and its lineage."""
_ENVELOPE = ("id", "seq", "run_id", "node_id", "type", "at")


def event_fields(event: Mapping[str, object]) -> dict[str, object]:
    """An event without its envelope (``id, seq, run_id, node_id, type, at``)."""
    return {k: v for k, v in event.items() if k not in _ENVELOPE}


def _obj(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else an empty one (a field's shape is never trusted)."""
    return value if isinstance(value, dict) else {}


def _node(event: Mapping[str, object]) -> str:
    return "root" if event.get("node_id") == event.get("run_id") else safe(event.get("node_id"), 40)


_QUIET = frozenset({"node.output_text.delta", "node.activity"})
"""Event types the conversation does not show (text deltas: the done text is shown whole)."""
_last_hms: tuple[float, str] = (0.0, " " * 8)
"""The last stamp formatted (a burst of events shares its second: it is formatted once)."""


def _hms(at: object) -> str:
    """``HH:MM:SS`` of an event's ``at`` (float seconds in the read model); blank when it has none."""
    global _last_hms
    if not isinstance(at, (int, float)) or not at:
        return " " * 8
    if int(at) != int(_last_hms[0]):
        _last_hms = (float(at), short_time(at))
    return _last_hms[1]


FOLDED: dict[str, str] = {"reply": "node.output_text.done", "message": "node.message.received"}
"""Operator and app actions whose event always follows and says the same thing: in the conversation the
action has no line of its own, its event's line carries the attribution (``model ⚙ operator: hello``).
A start is not one: a run may start without a turn, so its action line stays."""


def _said(event: Mapping[str, object]) -> str | None:
    """What a root event of a folded kind says (the text an action of that kind carries), else None."""
    kind = event.get("type")
    if event.get("node_id") != event.get("run_id"):
        return None
    if kind == "node.output_text.done":
        return str(event.get("text") or "")
    if kind == "node.message.received":
        return str(_obj(event.get("message")).get("text") or "")
    return None


class Attribution:
    """The folded actions of one run not yet matched to their event, oldest first: each event of a
    folded kind takes the first waiting action of its kind that says the same text."""

    def __init__(self, actions: Iterable[OperatorAction] = ()) -> None:
        self.waiting: list[OperatorAction] = []
        """Folded actions whose event has not been drawn yet."""
        self.add(actions)

    def add(self, actions: Iterable[OperatorAction]) -> None:
        """Wait for the events of these actions (actions of other kinds are ignored)."""
        self.waiting.extend(a for a in actions if a.action in FOLDED)

    def take(self, event: Mapping[str, object]) -> OperatorAction | None:
        """The action this event shows, no longer waiting; None when it shows none."""
        if not self.waiting:
            return None
        said = _said(event)
        if said is None:
            return None
        for i, action in enumerate(self.waiting):
            if FOLDED[action.action] == event.get("type") and action.detail == said:
                return self.waiting.pop(i)
        return None


def raw_line(event: Mapping[str, object]) -> str:
    """One event as one raw line: ``seq time node type {fields}``."""
    fields = json.dumps(event_fields(event), ensure_ascii=False, default=str)
    return safe(f"{event.get('seq', 0):>5} {_hms(event.get('at'))} {_node(event)} {event.get('type', '')} {fields}", LINE_CAP)


def conversation_of(events: Iterable[Mapping[str, object]], attribution: Attribution | None = None) -> list[str]:
    """The lines a run of events adds to the conversation (the quiet ones are passed over unread); an
    event that shows one of ``attribution``'s waiting actions carries who did it."""
    quiet = _QUIET
    if attribution is None or not attribution.waiting:
        return [line for event in events if event.get("type") not in quiet for line in conversation_lines(event)]
    return [line for event in events if event.get("type") not in quiet
            for line in conversation_lines(event, attribution.take(event))]


def conversation_lines(event: Mapping[str, object], by: OperatorAction | None = None) -> list[str]:
    """The lines one event adds to the assembled conversation (often none); ``by`` is the action it
    shows, named on its line (``model ⚙ operator: hello``)."""
    kind = event.get("type", "")
    if kind in _QUIET:
        return []
    who = "" if _node(event) == "root" else f"[{_node(event)}] "
    at = _hms(event.get("at"))
    mark = f" ⚙ {safe(by.by, 20)}" if by is not None else ""
    if kind == "node.turn.started":
        text = _obj(event.get("input")).get("text") or ""
        return [f"{at} {who}» turn: {safe(text)}"] if text else [f"{at} {who}» turn"]
    if kind == "node.output_text.done":
        return [f"{at} {who}model{mark}: {safe(event.get('text'))}"]
    if kind == "node.turn.completed":
        error = event.get("error")
        if event.get("stop_reason") == "error" and isinstance(error, dict):
            return [f"{at} {who}✗ turn failed: {safe(error.get('code'), 80)}: {safe(error.get('message'))}"]
        return []
    if kind == "node.message.received":
        message = _obj(event.get("message"))
        sender = "app" if by is None or by.by == "app" else f"app{mark}"
        return [f"{at} {who}{sender} → message: {safe(message.get('text'))}"]
    if kind == "node.question.opened":
        return [f"{at} {who}? question: {safe(_obj(event.get('question')).get('title'))}"]
    if kind == "node.question.answered":
        return [f"{at} {who}! answered: {safe(json.dumps(event.get('answers'), ensure_ascii=False, default=str))}"]
    if kind == "node.settled":
        outcome = event.get("outcome")
        detail = event.get("result") or event.get("runtime_error") or event.get("failure") or \
            _obj(event.get("declined")).get("reason") or ""
        return [f"{at} {who}■ settled {safe(outcome, 40)}{': ' + safe(detail) if detail else ''}"]
    if kind == "node.idle":
        return [f"{at} {who}· idle"]
    if kind == "node.reopened":
        return [f"{at} {who}↺ reopened"]
    fields = json.dumps(event_fields(event), ensure_ascii=False, default=str)
    return [f"{at} {who}• {safe(kind, 80)} {safe(fields)}"]


def action_line(action: OperatorAction) -> str:
    """An operator (or app) action on the run, attributed: ``⚙ operator · reply: hello``."""
    detail = f": {safe(action.detail)}" if action.detail else ""
    return f"{short_time(action.at)} ⚙ {safe(action.by, 20)} · {safe(action.action, 60)}{detail}"


def refusal_line(refusal: RefusalRecord) -> str:
    """A refusal the app met, linked to the grant revision that caused it (``g`` opens the grant)."""
    rev = f"rev {refusal.rev}" if refusal.rev is not None else "unknown rev"
    message = f" ({safe(refusal.message, 200)})" if refusal.message else ""
    return (f"{short_time(refusal.at)} ‼ refused {safe(refusal.code, 60)}{message} ← grant of "
            f"{safe(refusal.user_id, 80)} at {rev}; press g to open it")


def merge_lines(events: Sequence[Mapping[str, object]], actions: Sequence[OperatorAction],
                refusals: Sequence[RefusalRecord], *, raw: bool) -> tuple[list[str], Attribution]:
    """A whole run's lines in time order: events, then the actions and refusals stamped at the same time.
    In the conversation an action whose event says the same (a reply, a message, a start) has no line of
    its own: its event's line names who did it. Returns the lines and the folded actions still waiting
    for their event (``Attribution``)."""
    items: list[tuple[float, int, int, list[str]]] = []
    attribution = Attribution(() if raw else actions)
    for i, event in enumerate(events):
        lines = [raw_line(event)] if raw else conversation_lines(event, attribution.take(event))
        if lines:
            at = event.get("at")
            items.append((float(at) if isinstance(at, (int, float)) else 0.0, 0, i, lines))
    for i, action in enumerate(actions):
        if raw or action.action not in FOLDED:
            items.append((action.at, 1, i, [action_line(action)]))
    for i, refusal in enumerate(refusals):
        items.append((refusal.at, 2, i, [refusal_line(refusal)]))
    items.sort(key=lambda item: item[:3])
    return [line for item in items for line in item[3]], attribution


def lineage_phrase(parent_title: str, turn: int | None) -> str:
    """How a fork names where it came from: ``fork of “garden plan” at turn 2`` (``parent_title`` already safe)."""
    return f"fork of “{parent_title}”" + (f" at turn {turn}" if turn is not None else "")


def carried_lines(history: object, phrase: str) -> list[str]:
    """The messages a fork carries from its parent, each on its line under one that names the parent
    and turn (``phrase``, already safe); none for a run that carries none."""
    if not isinstance(history, list) or not history:
        return []
    lines = [f"{' ' * 8} {FORK_GLYPH} {phrase}: carries {len(history)} message{'s' if len(history) != 1 else ''}"]
    for message in history:
        message = _obj(message)
        who = "model" if message.get("role") == "assistant" else safe(message.get("role") or "user", 20)
        lines.append(f"{' ' * 8} {FORK_GLYPH} {who}: {safe(message.get('text'))}")
    return lines


def turn_line(event: Mapping[str, object], *, raw: bool) -> str:
    """The line a turn's ``node.turn.started`` event is drawn as (the turn cursor finds it by it)."""
    return raw_line(event) if raw else conversation_lines(event)[0]
