"""The canvas's clear errors: each names the object, field or name that was refused.

Every class carries a stable ``code`` (snake_case, like the wire's error codes) so callers and
tests can tell the classes of failure apart without matching on the words.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.errors import ServiceError

__all__ = [
    "CanvasError",
    "ObjectNotFoundError",
    "AmbiguousNameError",
    "NameRefusedError",
    "NameTakenError",
    "TextRefusedError",
    "NameTextRefusedError",
    "DocumentInvalidError",
    "StaleRevisionError",
    "UndeclaredEventError",
    "WatchPatternError",
    "CanvasBusyError",
    "OwnerInUseError",
    "CanvasSchemaError",
    "CanvasUnavailableError",
]


class CanvasError(ServiceError):
    """Base of every refusal the canvas explains in words."""

    code: str = "canvas_error"
    """The stable code of this class of failure."""


class ObjectNotFoundError(CanvasError):
    """No object answers to the given id or name."""

    code = "object_not_found"


class AmbiguousNameError(CanvasError):
    """A name that several objects answer to; ``candidates`` lists the unambiguous name of each."""

    code = "ambiguous_name"

    def __init__(self, ref: str, candidates: Sequence[str]) -> None:
        self.ref = ref
        """The name as given."""
        self.candidates = tuple(candidates)
        """The full name of every object ``ref`` could mean; each resolves to exactly one."""
        listed = ", ".join(repr(c) for c in self.candidates)
        super().__init__(f"the name {ref!r} is ambiguous: it could mean {listed}; use one of those names")


class NameRefusedError(CanvasError):
    """A name that does not parse or escapes its owner's namespace (``..``, absolute, empty part)."""

    code = "name_refused"


class NameTakenError(CanvasError):
    """Another object under the same owner already holds the name."""

    code = "name_taken"


class TextRefusedError(CanvasError):
    """Text the canvas cannot store faithfully (a lone surrogate or NUL); nothing was written."""

    code = "text_refused"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field
        """The argument (and place inside it) that holds the bad text."""


class NameTextRefusedError(TextRefusedError, NameRefusedError):
    """A name or reference holding a lone surrogate or NUL: refused text, and a refused name."""

    code = "text_refused"


class DocumentInvalidError(CanvasError):
    """A document field is missing or malformed (no preview, unknown kind, a bad rule, privacy)."""

    code = "document_invalid"


class StaleRevisionError(CanvasError):
    """An edit made from a revision the document has moved past; carries the refused text."""

    code = "stale_revision"

    def __init__(self, message: str, *, name: str, base_revision: int, current_revision: int,
                 body: str | None) -> None:
        super().__init__(message)
        self.name = name
        """The document's full name."""
        self.base_revision = base_revision
        """The revision the edit was made from."""
        self.current_revision = current_revision
        """The document's revision when the edit was refused."""
        self.body = body
        """The body the caller tried to save, handed back so nothing typed is lost."""


class UndeclaredEventError(CanvasError):
    """A custom object published an event its catalog does not declare."""

    code = "undeclared_event"


class WatchPatternError(CanvasError):
    """A watch pattern or minimum level that does not parse."""

    code = "watch_pattern_invalid"


class CanvasBusyError(CanvasError):
    """Another writer held the database past the busy timeout; nothing was written."""

    code = "canvas_busy"


class OwnerInUseError(CanvasError):
    """An owner object still owns other objects and cannot be deleted."""

    code = "owner_in_use"


class CanvasSchemaError(CanvasError):
    """The database holds a canvas schema this version cannot use (too old to migrate, or newer)."""

    code = "canvas_schema"


class CanvasUnavailableError(CanvasError):
    """The database server could not be reached or dropped the connection; the change was not confirmed."""

    code = "canvas_unavailable"
