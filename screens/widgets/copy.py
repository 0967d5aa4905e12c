"""What ``Y`` copies: the focused item as its id, as JSON, and as the SDK call or ``curl`` that reads it.

``copy_choices(pane)`` returns ``(label, text)`` pairs for the pane's selection (empty when nothing is
selected). The text goes to the terminal's clipboard through OSC 52 (``App.copy_to_clipboard``), so it
works over ssh and in tmux with ``set-clipboard on``. The texts are plain data: an untrusted id is
quoted as a JSON string in the SDK call and shell-quoted in the ``curl`` line.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from typing import TYPE_CHECKING

from services.errors import ServiceError

if TYPE_CHECKING:
    from .pane import Pane

__all__ = ["as_json", "copy_choices"]


def as_json(value: object) -> str:
    """``value`` (a dataclass, a mapping, a list...) as indented JSON; anything else as its text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value), indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def copy_choices(pane: "Pane") -> list[tuple[str, str]]:
    """``(label, text)`` of what can be copied from ``pane``'s selection."""
    selected = getattr(pane, "selected", None)
    if not selected or getattr(pane, "workspace", None) is None:
        return []
    pane_id = pane.id
    if pane_id == "runs":
        return _run(pane, selected)
    if pane_id == "grants":
        return _grant(pane, selected)
    item = getattr(pane, "items", {}).get(selected) if isinstance(getattr(pane, "items", None), dict) else None
    choices = [("id", selected.partition(":")[2] or selected if pane_id == "judgments" else selected)]
    if item is not None:
        choices.append(("JSON", as_json(item)))
    return choices


def _run(pane: "Pane", run_id: str) -> list[tuple[str, str]]:
    choices = [("run id", run_id)]
    try:
        detail = pane.desk.detail(run_id)
    except ServiceError:  # a run deleted since: the id is still worth copying
        detail = None
    if detail is not None:
        whole = pane.desk.holds(run_id)
        choices.append(("run as JSON" if whole else f"run as JSON (its newest {len(detail.events):,} events)",
                        as_json(detail)))
    choices.append(("SDK call (Python)", f"run = await client.runs.get({json.dumps(run_id)})"))
    choices.append(("curl", ('curl -H "Authorization: Bearer $CROUTER_TOKEN" '
                             f'"$CROUTER_RUNTIME_URL"/v1/runs/{shlex.quote(run_id)}')))
    return choices


def _grant(pane: "Pane", user_id: str) -> list[tuple[str, str]]:
    choices = [("person id", user_id)]
    view = next((g for g in pane.desk.grants() if g.user_id == user_id), None)
    if view is not None:
        choices.append(("grant as JSON", as_json(view)))
    choices.append(("SDK call (Python)", (f"client = await oauth.client({json.dumps(user_id)})\n"
                                          "grant = await client.grant.get()")))
    choices.append(("curl", 'curl -H "Authorization: Bearer $CROUTER_TOKEN" "$CROUTER_RUNTIME_URL"/v1/grant'))
    return choices
