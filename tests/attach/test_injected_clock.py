"""Every service takes the injected clock: the Honcho fake's ``created_at`` and a new OKF base's log
date come from it, never from the wall clock; the read models carry one time type (seconds)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx

from services.desk import run_detail
from services.times import parse_time
from services.clock import FakeClock, iso
from services.knowledge.okf import init_directory_base
from services.honcho import FakeHonchoService

PAST = 1_000_000_000.0  # 2001-09-09: far from today, so a wall-clock read shows


async def test_the_honcho_fake_stamps_created_at_from_the_injected_clock() -> None:
    service = FakeHonchoService(clock=FakeClock(PAST))
    async with httpx.AsyncClient(transport=service.transport, base_url="https://honcho.fake") as http:
        answer = (await http.post("/v3/workspaces", json={"id": "w1"})).json()
    assert datetime.fromisoformat(answer["created_at"]) == datetime.fromtimestamp(PAST, UTC)


def test_a_new_okf_base_dates_its_log_from_the_injected_clock(tmp_path: Path) -> None:
    init_directory_base(tmp_path / "kb", "team", {"eng": {"path": "eng", "owner": "ada"}}, clock=FakeClock(PAST))
    assert "## 2001-09-09" in (tmp_path / "kb" / "log.md").read_text()


def test_read_models_carry_seconds_whatever_the_wire_sent() -> None:
    assert parse_time(iso(PAST)) == PAST and parse_time(PAST) == PAST and parse_time(None) == 0.0
    dto = {"id": "run_1", "user_id": "user:a", "status": "idle", "created_at": iso(PAST), "updated_at": iso(PAST + 1)}
    detail = run_detail(dto, ())
    assert (detail.created_at, detail.updated_at) == (PAST, PAST + 1)
