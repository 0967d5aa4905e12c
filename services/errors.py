"""The common base of every clear error a service raises.

A ``ServiceError`` carries a message meant for a person; the UI shows ``str(error)`` in a toast
after sanitising it. Services subclass it for their own failures (a stale revision, a path that
escapes its base, a refused judgment, ...), so callers can catch one type.
"""

from __future__ import annotations

__all__ = ["ServiceError"]


class ServiceError(Exception):
    """A failure a service explains in words: shown to the operator, never a crash."""
