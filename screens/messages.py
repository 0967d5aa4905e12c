"""Messages the services' results arrive as: past tense, posted by workers and the change forwarder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # the first frame imports this module: the desk and its read models come after it
    from services.changes import Change
    from services.desk import WorkspaceView

__all__ = ["WorkspaceOpened", "ServicesChanged", "ActionDone", "JumpRequested", "SelectionMoved"]


@dataclass
class WorkspaceOpened(Message):
    """The Workspace finished opening; panes may load."""

    workspace: WorkspaceView


@dataclass
class ServicesChanged(Message):
    """A batch of changes the services published since the last batch (in order; a run's ``run.event``
    changes only the first of the batch: a pane reads the run's new events from the desk)."""

    changes: tuple[Change, ...]


@dataclass
class ActionDone(Message):
    """An operator action finished; ``summary`` is a short plain sentence for a toast."""

    summary: str


@dataclass
class JumpRequested(Message):
    """Bring ``pane`` forward and select ``key`` in it (a run id, person, object id, judgment id)."""

    pane: str
    key: str


@dataclass
class SelectionMoved(Message):
    """The operator selected ``key`` in ``pane`` (back and forward go through these)."""

    pane: str
    key: str
