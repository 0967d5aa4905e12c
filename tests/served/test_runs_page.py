"""``GET /runs?limit=``: a page of the runs in start order (the newest before ``before``), with how
many runs there are and where the page starts; ``counts=1`` adds what the runs before the page count,
by person and by status (deleted ones left out). Stored runs are read as the store keeps
them; every run appears in exactly one page; a bad parameter is a 400 that names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.cloud import FakeCloud
from services.control_wire import MAX_RUNS_PAGE
from services.sdk import MemoryConnectionStore
from services.served.control import ControlApp
from services.served.persist import CloudStore
from tests.served.test_run_events_page import URL, _get



async def _cloud(path: Path) -> tuple[FakeCloud, CloudStore]:
    """25 runs of two people, started in order: every third settled, the 5th and 11th deleted, the
    rest live; read by a server started again, so each is only stored until read."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL, clock=FakeClock(1_800_000_000.0))
    store = CloudStore(path)
    await store.load(cloud)
    for user in ("user:a", "user:b"):
        await cloud.connect(MemoryConnectionStore(), user, scopes=["crtr:llm"])
    for n in range(25):
        run = await cloud.crouter("user:a" if n % 2 else "user:b").runs.start(prompt=f"run {n}")
        fake = cloud.runs.get(run.id)
        if n % 3 == 0:
            fake.settle(result=f"done {n}")
        if n in (5, 11):
            fake.delete()
    await store.close()
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL, clock=FakeClock(1_800_000_000.0))
    store = CloudStore(path)
    await store.load(cloud)  # a restarted server: every run only stored until read
    return cloud, store


async def test_pages_walk_every_run_once_in_start_order_with_counts_of_the_rest(tmp_path: Path) -> None:
    cloud, store = await _cloud(tmp_path / "cloud.db")
    try:
        app = ControlApp(cloud, "t", change_log=False, store=store)
        assert all(slot.run is None for slot in cloud.state.run_log.slots)
        every = (await _get(app, "/runs")).json()["runs"]
        assert len(every) == 25 and [r["params"]["prompt"] for r in every] == [f"run {n}" for n in range(25)]

        first = (await _get(app, "/runs", {"limit": 10, "counts": 1})).json()
        assert first["total"] == 25 and first["from"] == 15
        assert first["runs"] == every[15:]  # the newest ten, in start order, as the whole list has them
        people: dict[str, int] = {}
        statuses: dict[str, int] = {}
        for r in every[:15]:
            if not r["deleted"]:
                people[r["user_id"]] = people.get(r["user_id"], 0) + 1
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        assert first["counts_before"] == {"people": people, "statuses": statuses}
        assert sum(people.values()) == 13 and statuses["settled"] == 5

        walked, before = list(first["runs"]), first["from"]
        while before:
            page = (await _get(app, "/runs", {"limit": 4, "before": before})).json()
            assert page["total"] == 25 and "counts_before" not in page and len(page["runs"]) <= 4
            walked[:0] = page["runs"]
            before = page["from"]
        assert walked == every  # each run once, in start order
        assert all(slot.run is None for slot in cloud.state.run_log.slots)  # read as stored: none held

        past = (await _get(app, "/runs", {"limit": 5, "before": 99})).json()  # clamped to the newest
        assert past["runs"] == every[20:] and past["from"] == 20
        none = (await _get(app, "/runs", {"before": 0})).json()
        assert none == {"runs": [], "total": 25, "from": 0}
        mine = (await _get(app, "/runs", {"limit": 3, "user": "user:a"})).json()
        theirs = [r for r in every if r["user_id"] == "user:a"]
        assert mine["runs"] == theirs[-3:] and mine["total"] == len(theirs)
    finally:
        await store.close()


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": MAX_RUNS_PAGE + 1}, {"limit": "ten"},
                                    {"before": -1}, {"before": "x"}])
async def test_a_bad_page_is_a_400_naming_its_parameter(tmp_path: Path, params: dict[str, Any]) -> None:
    cloud, store = await _cloud(tmp_path / "cloud.db")
    try:
        answer = await _get(ControlApp(cloud, "t", change_log=False, store=store), "/runs", params)
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == next(iter(params))
    finally:
        await store.close()
