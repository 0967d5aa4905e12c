"""Where a desk reads runs and people: the ``RunBook`` protocol (the live cloud's, or a served
window's copy of the change stream). A run's events are read from the window's ``RunMirror``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

__all__ = ["RunBook"]


class RunBook(Protocol):
    """Where a desk reads runs (without their events) and people, as the control API's DTOs (times as
    wire strings or seconds)."""

    def run_dtos(self) -> Iterable[Mapping[str, Any]]:
        """Every run's DTO, deleted ones included, without events."""
        ...

    def run_dto(self, run_id: str) -> Mapping[str, Any] | None:
        """One run's DTO (None when unknown)."""
        ...

    def people(self) -> Iterable[Mapping[str, Any]]:
        """Every person's DTO (``id``, ``grant``, ``refusal``, ``holding``, ``reads``)."""
        ...

    def person(self, user_id: str) -> Mapping[str, Any] | None:
        """One person's DTO (None when unknown)."""
        ...

    def absorb_run(self, dto: Mapping[str, Any]) -> None:
        """A run as an action's answer showed it (kept by a book that caches; ignored by a live one)."""
        ...

    async def refresh_people(self) -> None:
        """Read the people again after a grant action (a live book has nothing to do)."""
        ...
