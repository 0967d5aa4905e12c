"""``POST /runs/events``: pages of several runs' events in one read (each run's ``after < seq <=
upto``, none of the types ``exclude`` names, at most ``limit`` events in all, in the order asked), so
a reader of many runs (a catch-up) waits on a few round trips, not one a run. Walking the answers
gives each run's log exactly as ``GET /runs/{id}/events`` does; a run past the limit answers an empty
page that says whether it has more; an unknown run is named in ``missing``; a bad body is a 400 naming
the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from services.clock import FakeClock
from services.cloud import FakeCloud
from services.control_wire import MAX_EVENTS_PAGE, MAX_EXCLUDED, MAX_RUNS_READ
from services.sdk import MemoryConnectionStore
from services.served.asgi import CONTROL_PREFIX, CloudApp
from services.served.control import ControlApp
from services.served.persist import CloudStore

URL = "http://127.0.0.1:9"
QUIET = ["node.activity", "node.output_text.delta"]


async def _post(app: ControlApp, body: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=CloudApp(app.cloud, control=app))
    async with httpx.AsyncClient(transport=transport, base_url=app.cloud.issuer + CONTROL_PREFIX,
                                 headers={"Authorization": "Bearer t"}) as client:
        return await client.post("/runs/events", json=body)


async def _cloud(path: Path) -> tuple[FakeCloud, CloudStore, list[str]]:
    """Three runs: a long one mostly in the store, a short one, and one of deltas alone."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL, clock=FakeClock(1_800_000_000.0))
    store = CloudStore(path, keep_events=16)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    ids = []
    for prompt, steps, deltas in (("long", 300, 3), ("short", 4, 1), ("quiet", 0, 50)):
        run = await cloud.crouter("user:a").runs.start(prompt=prompt)
        fake = cloud.runs.get(run.id)
        for step in range(steps):
            fake.emit_many([("custom.step", {"step": step})] + [("node.output_text.delta", {"delta": "x"})] * deltas)
        if not steps:
            fake.emit_many([("node.output_text.delta", {"delta": "x"})] * deltas)
        await store.flush()
        ids.append(run.id)
    return cloud, store, ids


def _wanted(cloud: FakeCloud, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    return [e for e in cloud.runs.get(run_id).events if e["seq"] > after and e["type"] not in QUIET]


async def test_walking_the_answers_gives_each_run_its_log_and_a_limit_counts_every_run(tmp_path: Path) -> None:
    cloud, store, ids = await _cloud(tmp_path / "cloud.db")
    try:
        app = ControlApp(cloud, "t", change_log=False)
        assert cloud.runs.get(ids[0]).events.in_memory < len(cloud.runs.get(ids[0]).events)  # mostly stored
        asked = {run_id: 0 for run_id in ids}
        walked: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in ids}
        requests = 0
        while asked:
            answer = (await _post(app, {"runs": [{"run_id": r, "after": a} for r, a in asked.items()],
                                        "exclude": QUIET, "limit": 100})).json()
            requests += 1
            assert answer["missing"] == [] and [p["run_id"] for p in answer["runs"]] == list(asked)
            assert sum(len(p["events"]) for p in answer["runs"]) <= 100
            for page in answer["runs"]:
                run = cloud.runs.get(page["run_id"])
                assert page["seq"] == run.seq and page["first_seq"] == run.first_seq
                walked[page["run_id"]].extend(page["events"])
                if page["more"]:
                    if page["events"]:
                        asked[page["run_id"]] = page["events"][-1]["seq"]
                else:
                    del asked[page["run_id"]]
        assert all(walked[run_id] == _wanted(cloud, run_id) for run_id in ids)
        assert len(walked[ids[0]]) == 300 and len(walked[ids[1]]) == 4 and walked[ids[2]] == []  # deltas alone
        assert requests == 4  # 300 events 100 at a time, then the end: the short runs wait in the first answers

        # the first answer: the long run takes the whole limit, the others say they have more
        first = (await _post(app, {"runs": [{"run_id": r} for r in ids], "exclude": QUIET, "limit": 10})).json()
        assert [len(p["events"]) for p in first["runs"]] == [10, 0, 0]
        assert [p["more"] for p in first["runs"]] == [True, True, True]
        # ranges, the default limit, and nothing excluded
        ranged = (await _post(app, {"runs": [{"run_id": ids[0], "after": 20, "upto": 40},
                                             {"run_id": ids[1], "after": 0, "upto": None}]})).json()
        assert ranged["runs"][0]["events"] == [e for e in cloud.runs.get(ids[0]).events if 20 < e["seq"] <= 40]
        assert ranged["runs"][1]["events"] == list(cloud.runs.get(ids[1]).events)
        assert [p["more"] for p in ranged["runs"]] == [False, False]
        done = (await _post(app, {"runs": [{"run_id": ids[1], "after": cloud.runs.get(ids[1]).seq}]})).json()
        assert done["runs"][0]["events"] == [] and done["runs"][0]["more"] is False
    finally:
        await store.close()


async def test_an_unknown_run_is_named_in_missing_and_the_others_are_answered(tmp_path: Path) -> None:
    cloud, store, ids = await _cloud(tmp_path / "cloud.db")
    try:
        app = ControlApp(cloud, "t", change_log=False)
        answer = (await _post(app, {"runs": [{"run_id": "run_nope"}, {"run_id": ids[1]}],
                                    "exclude": QUIET})).json()
        assert answer["missing"] == ["run_nope"]
        assert [p["run_id"] for p in answer["runs"]] == [ids[1]]
        assert answer["runs"][0]["events"] == _wanted(cloud, ids[1])
    finally:
        await store.close()


async def test_a_bad_body_is_a_400_that_names_the_field() -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    run = await cloud.crouter("user:a").runs.start(prompt="short")
    app = ControlApp(cloud, "t", change_log=False)
    one = {"run_id": run.id}
    cases: list[tuple[object, str]] = [
        ({}, "runs"),
        ({"runs": "all"}, "runs"),
        ({"runs": [one] * (MAX_RUNS_READ + 1)}, "runs"),
        ({"runs": [one, "run_x"]}, "runs[1]"),
        ({"runs": [one, {"after": 3}]}, "runs[1].run_id"),
        ({"runs": [{"run_id": 7}]}, "runs[0].run_id"),
        ({"runs": [{"run_id": run.id, "after": "3"}]}, "runs[0].after"),
        ({"runs": [{"run_id": run.id, "after": -1}]}, "runs[0].after"),
        ({"runs": [{"run_id": run.id, "upto": 10 ** 20}]}, "runs[0].upto"),
        ({"runs": [one], "limit": 0}, "limit"),
        ({"runs": [one], "limit": MAX_EVENTS_PAGE + 1}, "limit"),
        ({"runs": [one], "limit": True}, "limit"),
        ({"runs": [one], "exclude": "node.activity"}, "exclude"),
        ({"runs": [one], "exclude": [""]}, "exclude"),
        ({"runs": [one], "exclude": [3]}, "exclude"),
        ({"runs": [one], "exclude": [f"t{n}" for n in range(MAX_EXCLUDED + 1)]}, "exclude"),
    ]
    for body, name in cases:
        answer = await _post(app, body)
        assert answer.status_code == 400, body
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and error["param"] == name and name in error["message"], (body, error)
    fine = (await _post(app, {"runs": [one] * MAX_RUNS_READ, "limit": MAX_EVENTS_PAGE})).json()
    assert len(fine["runs"]) == MAX_RUNS_READ and fine["runs"][0]["events"] == list(cloud.runs.get(run.id).events)


async def test_one_read_of_many_stored_runs_answers_what_each_runs_own_read_gives(tmp_path: Path) -> None:
    """The stored parts of every run asked are read in one statement: each page is what that run's
    own read (``EventLog.between``) answers with the limit left, for ranges inside the store, across
    its edge and inside the tail held in memory, with and without types left out; the same run asked
    twice answers twice, and a store letting go of runs' tails (``hold_events``) changes nothing."""
    from services.cloud.event_log import events_between

    cloud = FakeCloud("app", issuer=URL, runtime_url=URL, clock=FakeClock(1_800_000_000.0))
    store = CloudStore(tmp_path / "cloud.db", keep_events=8, hold_events=40)
    await store.load(cloud)
    try:
        await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
        ids = []
        for index in range(6):
            run = await cloud.crouter("user:a").runs.start(prompt=f"run {index}")
            fake = cloud.runs.get(run.id)
            for step in range(5 + 7 * index):
                fake.emit_many([("custom.step", {"step": step}), ("node.output_text.delta", {"delta": "x"})])
            await store.flush()
            ids.append(run.id)
        cloud.runs.get(ids[-1]).emit("custom.step", {"step": "not written yet"})
        app = ControlApp(cloud, "t", change_log=False)
        asked = [{"run_id": ids[0]}, {"run_id": ids[1], "after": 3}, {"run_id": ids[2], "after": 2, "upto": 9},
                 {"run_id": ids[3], "upto": 40}, {"run_id": ids[1], "after": 20}, {"run_id": ids[4], "after": 30},
                 {"run_id": ids[5], "after": 60}, {"run_id": ids[5]}]
        for exclude in ([], QUIET):
            for limit in (1, 7, 25, 60, 1000):
                answer = (await _post(app, {"runs": asked, "exclude": exclude, "limit": limit})).json()
                left = limit
                for item, page in zip(asked, answer["runs"], strict=True):
                    run = cloud.runs.get(item["run_id"])
                    after, upto = item.get("after", 0), item.get("upto")
                    want = events_between(run.events, after, upto, left, exclude=exclude) if left else []
                    assert page["run_id"] == run.id and page["events"] == want, (item, exclude, limit)
                    left -= len(want)
                assert answer["missing"] == []
        held = [cloud.runs.get(run_id).events.in_memory for run_id in ids]
        assert 0 in held and any(held)  # some runs' tails let go of, some held
    finally:
        await store.close()
