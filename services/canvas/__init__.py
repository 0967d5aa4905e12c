"""The canvas: one object graph (documents, nodes, jobs, owners, custom objects) in SQLite or PostgreSQL via SQLModel.

``Canvas.open(path_or_url, changes=ChangeFeed())`` is the entry point. Who may read what is decided
in ``eligibility`` (every read path takes a reader's ``view``); what a node loads, and why not, in
``delivery``; profiles in ``profiles``; ``url``/``argv`` receivers in ``receivers``. Its its async methods return
frozen read models (``services.canvas.views``). ``RunBridge`` keeps run nodes in step with the
fake cloud. ``make_engine(url)`` builds the engine with per-connection pragmas and
``BEGIN IMMEDIATE`` for writers. Errors are ``CanvasError`` subclasses (``ServiceError``), each
with a stable ``code``. Text with a lone surrogate or NUL is refused at every entry point
(``TextRefusedError``); run text reaching the canvas through ``RunBridge`` is repaired and flagged.
"""

from .bridge import BridgeInputError, RunBridge
from .engine import make_engine
from .errors import (AmbiguousNameError, CanvasBusyError, CanvasError, CanvasSchemaError, CanvasUnavailableError, DocumentInvalidError, NameRefusedError,
                     NameTakenError, NameTextRefusedError, ObjectNotFoundError, OwnerInUseError, StaleRevisionError,
                     TextRefusedError, UndeclaredEventError, WatchPatternError)
from .names import ReaderView
from .service import Canvas
from .delivery import DELIVERY_EVENTS, REASONS
from .eligibility import OPERATOR, Access
from .profiles import PROFILE_LIMITS
from .receivers import LOOPBACK_HOSTS, ReceiverDispatcher
from .views import (BootContext, BootItem, CustomObjectView, DocumentView, EdgeView, EventView, InboxEntryView, InboxPage,
                    JobView, LintFinding, LoadVerdict, MessageReceipt, Neighbourhood, NodeView, NotLoaded, ObjectDetail,
                    ObjectPage, ObjectSummary, ProfileView, ReceiverAttempt, RevisionView, SearchHit, WatchView)

__all__ = [
    "Canvas",
    "RunBridge",
    "make_engine",
    "ReaderView",
    "Access",
    "OPERATOR",
    "REASONS",
    "DELIVERY_EVENTS",
    "PROFILE_LIMITS",
    "LOOPBACK_HOSTS",
    "ReceiverDispatcher",
    "BootContext",
    "BootItem",
    "NotLoaded",
    "LoadVerdict",
    "ProfileView",
    "ReceiverAttempt",
    "CanvasError",
    "AmbiguousNameError",
    "BridgeInputError",
    "CanvasBusyError",
    "CanvasSchemaError",
    "CanvasUnavailableError",
    "DocumentInvalidError",
    "NameRefusedError",
    "NameTakenError",
    "NameTextRefusedError",
    "ObjectNotFoundError",
    "OwnerInUseError",
    "StaleRevisionError",
    "TextRefusedError",
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
