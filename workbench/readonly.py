"""Read-only mode: every action that changes state is refused with a one-line reason.

The refusal is decided by binding id (so a remapped key is refused just the same) where the App
dispatches actions: keys, the command palette and clicks all pass there. Views, filters, copies,
help and moving around stay available.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.dom import DOMNode

__all__ = ["CHANGING_BINDINGS", "refusal"]

CHANGING_BINDINGS = frozenset({
    "workbench.runs.reply", "workbench.runs.fail_turn", "workbench.runs.settle", "workbench.runs.ask",
    "workbench.runs.go_idle", "workbench.runs.emit_event", "workbench.runs.delete_run",
    "workbench.runs.start_run", "workbench.runs.send_message", "workbench.runs.cancel_run", "workbench.runs.fork_run",
    "workbench.grants.revoke", "workbench.grants.restore", "workbench.grants.refuse",
    "workbench.grants.expire_tokens", "workbench.grants.edit_scopes",
    "workbench.inbox.message_node", "workbench.inbox.mark_read", "workbench.inbox.mark_all_read",
    "workbench.judgments.approve", "workbench.judgments.reject", "workbench.judgments.rejudge",
    "workbench.memory.sweep", "workbench.memory.retry", "workbench.memory.drop",
})
"""The binding ids whose actions change the workspace."""


def refusal(namespace: DOMNode, action_name: str) -> str | None:
    """The one-line reason ``action_name`` on ``namespace`` is refused in read-only mode, or None."""
    bindings = getattr(namespace, "_bindings", None)  # the node's merged BINDINGS
    if bindings is None:
        return None
    for _key, binding in bindings:
        if binding.id in CHANGING_BINDINGS and binding.action.split("(", 1)[0] == action_name:
            what = binding.description or action_name.replace("_", " ")
            return f"Read-only: {what} would change the workspace (start without --read-only to allow it)."
    return None
