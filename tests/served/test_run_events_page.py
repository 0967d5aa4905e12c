"""``GET /runs/{id}/events``: a page of a run's log (``after < seq <= upto``, at most ``limit``, none of
the types ``exclude`` names), read from memory or the store as far as it reaches, so a window reads
what it shows and never a whole log at once; a bad parameter is a 400 that names it, an unknown run a 404."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from services.clock import FakeClock
from services.cloud import FakeCloud
from services.control_wire import EVENTS_PAGE, MAX_EVENTS_PAGE, MAX_EXCLUDED
from services.sdk import MemoryConnectionStore
from services.served.asgi import CONTROL_PREFIX, CloudApp
from services.served.control import ControlApp
from services.served.persist import CloudStore

URL = "http://127.0.0.1:9"


async def _get(app: ControlApp, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=CloudApp(app.cloud, control=app))
    async with httpx.AsyncClient(transport=transport, base_url=app.cloud.issuer + CONTROL_PREFIX,
                                 headers={"Authorization": "Bearer t"}) as client:
        return await client.get(path, params=params)


async def _stored_cloud(path: Path, events: int) -> tuple[FakeCloud, CloudStore, str]:
    """A cloud whose one run holds ``events`` events, all but the newest 16 only in the store."""
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL, clock=FakeClock(1_800_000_000.0))
    store = CloudStore(path, keep_events=16)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    run = await cloud.crouter("user:a").runs.start(prompt="a long one")
    fake = cloud.runs.get(run.id)
    fake.emit_many([("node.output_text.delta", {"delta": f"d{n}"}) for n in range(events - fake.seq)])
    await store.flush()
    return cloud, store, run.id


async def test_pages_walk_a_stored_log_exactly_and_say_when_more_remain(tmp_path: Path) -> None:
    cloud, store, run_id = await _stored_cloud(tmp_path / "cloud.db", 2_500)
    try:
        app = ControlApp(cloud, "t", change_log=False)
        whole = list(cloud.runs.get(run_id).events)
        assert len(whole) == 2_500 and cloud.runs.get(run_id).events.in_memory < 100  # the rest is stored
        walked: list[dict[str, Any]] = []
        after = 0
        pages = 0
        while True:
            answer = (await _get(app, f"/runs/{run_id}/events", {"after": after})).json()
            pages += 1
            assert answer["run_id"] == run_id and answer["seq"] == 2_500 and answer["first_seq"] == 1
            walked.extend(answer["events"])
            if not answer["more"]:
                break
            after = answer["events"][-1]["seq"]
        assert walked == whole and pages == 3  # EVENTS_PAGE at a time
        assert EVENTS_PAGE == 1000

        middle = (await _get(app, f"/runs/{run_id}/events", {"after": 100, "upto": 140, "limit": 10})).json()
        assert [e["seq"] for e in middle["events"]] == list(range(101, 111)) and middle["more"] is True
        last = (await _get(app, f"/runs/{run_id}/events", {"after": 130, "upto": 140, "limit": 10})).json()
        assert [e["seq"] for e in last["events"]] == list(range(131, 141)) and last["more"] is False
        tail = (await _get(app, f"/runs/{run_id}/events", {"after": 2_495})).json()
        assert tail["events"] == whole[-5:] and tail["more"] is False
        beyond = (await _get(app, f"/runs/{run_id}/events", {"after": 9_999})).json()
        assert beyond["events"] == [] and beyond["more"] is False
    finally:
        await store.close()


async def test_excluded_types_are_left_out_of_stored_and_held_events_and_pages_count_what_is_answered(
        tmp_path: Path) -> None:
    cloud, store, run_id = await _stored_cloud(tmp_path / "cloud.db", 40)
    try:
        fake = cloud.runs.get(run_id)
        # steps among the deltas: in the store, and in the tail still held in memory
        for round_ in range(3):
            fake.emit_many([("custom.step", {"step": round_})] + [("node.output_text.delta", {"delta": "x"})] * 30)
            await store.flush()
        fake.emit_many([("custom.step", {"step": 3}), ("node.activity", {"activity": "thinking"})])
        assert fake.events.in_memory < len(fake.events)
        whole = list(fake.events)
        quiet = {"node.output_text.delta", "node.activity"}
        wanted = [e for e in whole if e["type"] not in quiet]
        app = ControlApp(cloud, "t", change_log=False)
        exclude = ",".join(sorted(quiet))
        answer = (await _get(app, f"/runs/{run_id}/events", {"exclude": exclude})).json()
        assert answer["events"] == wanted and answer["more"] is False and answer["seq"] == whole[-1]["seq"]
        assert [e["type"] for e in answer["events"]].count("custom.step") == 4

        walked: list[dict[str, Any]] = []  # pages of two: a limit counts the events answered
        after = 0
        while True:
            page = (await _get(app, f"/runs/{run_id}/events",
                               {"after": after, "limit": 2, "exclude": exclude})).json()
            walked.extend(page["events"])
            assert len(page["events"]) <= 2
            if not page["more"]:
                break
            after = page["events"][-1]["seq"]
        assert walked == wanted
        ranged = (await _get(app, f"/runs/{run_id}/events", {"after": wanted[1]["seq"], "upto": wanted[-2]["seq"],
                                                            "exclude": exclude})).json()
        assert ranged["events"] == wanted[2:-1]
        nothing_left = (await _get(app, f"/runs/{run_id}/events", {"after": wanted[-1]["seq"],
                                                                  "exclude": exclude})).json()
        assert nothing_left["events"] == [] and nothing_left["more"] is False
        unfiltered = (await _get(app, f"/runs/{run_id}/events", {"limit": MAX_EVENTS_PAGE, "exclude": ""})).json()
        assert unfiltered["events"] == whole
    finally:
        await store.close()


async def test_an_expired_start_is_not_answered_and_first_seq_says_where_the_log_starts(tmp_path: Path) -> None:
    cloud, store, run_id = await _stored_cloud(tmp_path / "cloud.db", 300)
    try:
        cloud.runs.get(run_id).expire_events(120)
        app = ControlApp(cloud, "t", change_log=False)
        answer = (await _get(app, f"/runs/{run_id}/events", {"limit": 5})).json()
        assert answer["first_seq"] == 121 and [e["seq"] for e in answer["events"]] == [121, 122, 123, 124, 125]
    finally:
        await store.close()


async def test_a_bad_parameter_is_a_400_that_names_it_and_an_unknown_run_a_404() -> None:
    cloud = FakeCloud("app", issuer=URL, runtime_url=URL)
    await cloud.connect(MemoryConnectionStore(), "user:a", scopes=["crtr:llm"])
    run = await cloud.crouter("user:a").runs.start(prompt="short")
    app = ControlApp(cloud, "t", change_log=False)
    for params, name in (({"after": "-1"}, "after"), ({"after": "1.5"}, "after"), ({"upto": "x"}, "upto"),
                         ({"limit": "0"}, "limit"), ({"limit": str(MAX_EVENTS_PAGE + 1)}, "limit"),
                         ({"after": "9" * 40}, "after"), ({"exclude": "a,,b"}, "exclude"),
                         ({"exclude": ","}, "exclude"),
                         ({"exclude": ",".join(f"t{n}" for n in range(MAX_EXCLUDED + 1))}, "exclude")):
        answer = await _get(app, f"/runs/{run.id}/events", params)
        assert answer.status_code == 400, params
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and error["param"] == name and name in error["message"]
    missing = await _get(app, "/runs/run_nope/events")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
    fine = (await _get(app, f"/runs/{run.id}/events", {"after": "", "limit": str(MAX_EVENTS_PAGE)})).json()
    assert fine["events"] == list(cloud.runs.get(run.id).events)
    # a run held only in memory (no store) leaves out the excluded types too
    cloud.runs.get(run.id).emit_many([("node.output_text.delta", {"delta": "x"}), ("custom.step", {"step": 1})])
    kept = (await _get(app, f"/runs/{run.id}/events", {"exclude": "node.output_text.delta"})).json()
    assert kept["events"] == [e for e in cloud.runs.get(run.id).events if e["type"] != "node.output_text.delta"]
    assert kept["events"][-1]["type"] == "custom.step"


async def test_stored_events_go_out_as_stored_and_text_an_older_server_kept_goes_out_repaired(tmp_path: Path) -> None:
    """Over HTTP a page carries each stored event as the text the store holds (nothing parsed and
    encoded again): the answer reads as the run's events do in process, and an event whose stored
    text holds a lone surrogate or a NUL (kept by an older server) goes out repaired, never as an
    escape a client would refuse. In process (the serving window's desk) the same read answers dicts."""
    cloud, store, run_id = await _stored_cloud(tmp_path / "cloud.db", 60)
    try:
        fake = cloud.runs.get(run_id)
        fake.reply("hi \ud800 and \x00", chunks=1)  # scripted in process: no served route takes it
        fake.emit_many([("node.output_text.delta", {"delta": "after"})] * 40)
        await store.flush()
        assert fake.events.in_memory < len(fake.events)
        app = ControlApp(cloud, "t", change_log=False)
        answer = await _get(app, f"/runs/{run_id}/events", {"after": 0, "limit": 5000})
        assert "\\ud800" not in answer.text and "\\u0000" not in answer.text
        events = answer.json()["events"]
        assert [e["seq"] for e in events] == [e["seq"] for e in fake.events]
        done = [e for e in events if e["type"] == "node.output_text.done"]
        assert done and done[0]["text"] == "hi \ufffd and "
        plain = [e for e in events if e["type"] == "node.output_text.delta"]
        assert plain == [e for e in fake.events if e["type"] == "node.output_text.delta"]
        status, direct = await app.dispatch("GET", f"/runs/{run_id}/events", b"", {"limit": "5000"})
        assert status == 200 and all(isinstance(e, dict) for e in direct["events"])
        assert direct["events"] == events
    finally:
        await store.close()
