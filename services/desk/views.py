"""The one way each read model is built: from a run's DTO (the control API's ``run_dto`` shape, the
wire DTO plus ``deleted`` and ``seq``) or a person's DTO (the control API's ``/people`` shape).

Both desks build their models here, from the same DTO shapes, so a run or a grant reads the same in an
embedded window and in one attached to a server. Wire times (ISO strings, or seconds) become float
seconds here, once; a run's events are converted once each by the window's ``RunMirror``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ..times import parse_time
from .forks import lineage
from .models import GrantView, RunDetail, RunView

__all__ = ["run_view", "run_detail", "run_seq", "grant_view"]


def _question(question: object) -> dict[str, object] | None:
    if not isinstance(question, dict):
        return None
    return {**question, "created_at": parse_time(question.get("created_at"))} if "created_at" in question else question


def run_seq(dto: Mapping[str, Any]) -> int:
    """A run DTO's newest event's sequence number (``seq``, or an older wire's ``last_event_id``)."""
    return int(dto.get("seq", dto.get("last_event_id", 0)) or 0)


def run_view(dto: Mapping[str, Any]) -> RunView:
    """A run as the runs pane lists it."""
    outcome = dto.get("outcome") or None
    error = dto.get("last_turn_error")
    fork = lineage(dto.get("params"))
    return RunView(
        id=dto["id"], user_id=dto["user_id"], name=dto.get("name") or "",
        status="deleted" if dto.get("deleted") else dto["status"], activity=dto.get("activity"),
        prompt=str((dto.get("params") or {}).get("prompt", "")),
        created_at=parse_time(dto.get("created_at")), updated_at=parse_time(dto.get("updated_at")),
        events=run_seq(dto), pending=len(dto.get("pending") or ()),
        outcome=outcome.get("outcome") if isinstance(outcome, dict) else None,
        question=(dto.get("question") or {}).get("title"),
        last_turn_error=f"{error['code']}: {error['message']}" if error else None,
        deleted=bool(dto.get("deleted")),
        forked_from=fork.parent_id if fork else None, forked_at_turn=fork.turn if fork else None,
    )


def run_detail(dto: Mapping[str, Any], events: tuple[dict[str, object], ...]) -> RunDetail:
    """A run with its event log; its and its question's times as float seconds (``events`` are read
    models already, as the window's ``RunMirror`` holds them)."""
    return RunDetail(
        id=dto["id"], user_id=dto["user_id"], name=dto.get("name"),
        status="deleted" if dto.get("deleted") else dto["status"],
        created_at=parse_time(dto.get("created_at")), updated_at=parse_time(dto.get("updated_at")),
        deleted=bool(dto.get("deleted")), params=copy.deepcopy(dict(dto.get("params") or {})),
        events=events,
        settled=dto["status"] == "settled", seq=run_seq(dto), activity=dto.get("activity"),
        pending=tuple(copy.deepcopy(list(dto.get("pending") or ()))),
        question=_question(copy.deepcopy(dto.get("question"))),
        last_turn_error=copy.deepcopy(dto.get("last_turn_error")), outcome=copy.deepcopy(dto.get("outcome")),
    )


def grant_view(person: Mapping[str, Any], runs: int) -> GrantView | None:
    """A person's grant (None when they have none), with how many live runs they have."""
    state = person.get("grant")
    if state is None:
        return None
    cap = state.get("spend_cap")
    return GrantView(
        user_id=person["id"], state=state["state"], rev=state["rev"], version=state["version"],
        scopes=tuple(state["resolved_scopes"]),
        dependencies=tuple((d["provider"], d["state"], d.get("message")) for d in state["dependencies"]),
        spend_cap=f"{cap['amount']} {cap.get('currency', '')}/{cap.get('period', '')}" if cap else "none",
        refusal=person.get("refusal"), revoked_code=state.get("revoked_code"),
        holding=int(person.get("holding") or 0), reads=int(person.get("reads") or 0), runs=runs,
    )


def live_runs_by_person(runs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many live (not deleted) runs each person has."""
    counts: dict[str, int] = {}
    for dto in runs:
        if not dto.get("deleted"):
            counts[dto["user_id"]] = counts.get(dto["user_id"], 0) + 1
    return counts
