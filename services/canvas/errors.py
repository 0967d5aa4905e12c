"""The canvas's clear errors: each names the object, field or name that was refused."""

from __future__ import annotations

from services.errors import ServiceError

__all__ = [
    "CanvasError",
    "ObjectNotFoundError",
    "NameRefusedError",
    "NameTakenError",
    "DocumentInvalidError",
    "StaleRevisionError",
    "UndeclaredEventError",
    "WatchPatternError",
    "CanvasBusyError",
    "OwnerInUseError",
]


class CanvasError(ServiceError):
    """Base of every refusal the canvas explains in words."""


class ObjectNotFoundError(CanvasError):
    """No object answers to the given id or name."""


class NameRefusedError(CanvasError):
    """A name that does not parse or escapes its owner's namespace (``..``, absolute, empty part)."""


class NameTakenError(CanvasError):
    """Another object under the same owner already holds the name."""


class DocumentInvalidError(CanvasError):
    """A document field is missing or malformed (no preview, unknown kind, a bad rule, privacy)."""


class StaleRevisionError(CanvasError):
    """An edit made from a revision the document has moved past; carries the refused text."""

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


class WatchPatternError(CanvasError):
    """A watch pattern or minimum level that does not parse."""


class CanvasBusyError(CanvasError):
    """Another writer held the database past the busy timeout; nothing was written."""


class OwnerInUseError(CanvasError):
    """An owner object still owns other objects and cannot be deleted."""
