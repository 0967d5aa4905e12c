"""The canvas: one object graph (documents, nodes, jobs, owners, custom objects) in SQLite via SQLModel.

``Canvas.open(path_or_url, changes=ChangeFeed())`` is the entry point; its async methods return
frozen read models (``services.canvas.views``). ``RunBridge`` keeps run nodes in step with the
fake cloud. ``make_engine(url)`` builds the engine with per-connection pragmas and
``BEGIN IMMEDIATE`` for writers. Errors are ``CanvasError`` subclasses (``ServiceError``).
"""

from .bridge import BridgeInputError, RunBridge
from .engine import make_engine
from .errors import (CanvasBusyError, CanvasError, DocumentInvalidError, NameRefusedError, NameTakenError,
                     ObjectNotFoundError, OwnerInUseError, StaleRevisionError, UndeclaredEventError,
                     WatchPatternError)
from .names import ReaderView
from .service import Canvas
from .views import (CustomObjectView, DocumentView, EdgeView, EventView, InboxEntryView, InboxPage, JobView,
                    LintFinding, MessageReceipt, Neighbourhood, NodeView, ObjectDetail, ObjectPage, ObjectSummary,
                    RevisionView, SearchHit, WatchView)

__all__ = [
    "Canvas",
    "RunBridge",
    "make_engine",
    "ReaderView",
    "CanvasError",
    "BridgeInputError",
    "CanvasBusyError",
    "DocumentInvalidError",
    "NameRefusedError",
    "NameTakenError",
    "ObjectNotFoundError",
    "OwnerInUseError",
    "StaleRevisionError",
    "UndeclaredEventError",
    "WatchPatternError",
    "CustomObjectView",
    "DocumentView",
    "EdgeView",
    "EventView",
    "InboxEntryView",
    "InboxPage",
    "JobView",
    "LintFinding",
    "MessageReceipt",
    "Neighbourhood",
    "NodeView",
    "ObjectDetail",
    "ObjectPage",
    "ObjectSummary",
    "RevisionView",
    "SearchHit",
    "WatchView",
]
