"""Runs and people as the control API shows them: the wire DTO plus what only the fake knows."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cloud.runs import FakeRun
    from ..cloud.users import FakeUser

__all__ = ["run_dto", "person_dto"]


def run_dto(run: "FakeRun", *, events: bool = True) -> dict[str, object]:
    """A run as the control API shows it: its wire DTO plus what only the fake knows."""
    dto = run.to_dto()
    dto.update(
        deleted=run.deleted,
        idempotency_key=run.idempotency_key,
        turns=run.turns,
        seq=run.seq,
        first_seq=run.first_seq,
        streams=len(run.streams),
    )
    if events:
        dto["events"] = list(run.events)  # a served run's log reads its older events from the store
    return dto


def person_dto(user: "FakeUser") -> dict[str, object]:
    return {
        "id": user.id,
        "grant": user.grant.state,
        "refusal": user.refusal,
        "tokens_valid_from": user.tokens_valid_from,
        "holding": user.holding,
        "reads": len(user.reads),
        "memory": [{k: v for k, v in d.items() if k != "body"} for d in user.memory.documents.values()],
    }
