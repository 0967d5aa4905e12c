"""A large control answer (the attach read ``GET /runs?events=1``, ``GET /runs/{id}``, ``GET /state``)
is written a run, or a slice of a run's events, at a time, with the same JSON as before; and while it
is written the server answers every other client (an app's emits land in the very answer)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from services.clock import FakeClock
from services.cloud import FakeCloud
from services.cloud.state import export_state
from services.sdk import MemoryConnectionStore
from services.served.asgi import CONTROL_PREFIX, CloudApp
from services.served.chunked import EVENT_SLICE
from services.served.control import ControlApp
from services.served.dtos import run_dto


async def _cloud() -> FakeCloud:
    cloud = FakeCloud(client_id="app", clock=FakeClock(1_800_000_000.0))
    for person, count in (("user:ada", 0), ("user:ada", 1), ("user:bo", 3 * EVENT_SLICE + 7), ("user:bo", EVENT_SLICE)):
        await cloud.connect(MemoryConnectionStore(), person, scopes=["crtr:llm"])
        started = await cloud.crouter(person).runs.start(prompt="hello")
        cloud.state.runs[started.id].emit_many(
            [("node.output_text.delta", {"delta": f"part {i} \u00e9\u2028\"", "entry_id": "e0"}) for i in range(count)])
    return cloud


async def _get(app: ControlApp, path: str, params: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=CloudApp(app.cloud, control=app))
    async with httpx.AsyncClient(transport=transport, base_url=app.cloud.issuer + CONTROL_PREFIX,
                                 headers={"Authorization": "Bearer t"}) as client:
        return await client.get(path, params=params)


async def test_a_large_read_answers_the_same_json_written_in_pieces() -> None:
    cloud = await _cloud()
    app = ControlApp(cloud, "t", change_log=False)
    runs = list(cloud.state.runs.values())
    for params, expected in (
        ({"events": "1"}, {"runs": [run_dto(r) for r in runs]}),
        (None, {"runs": [run_dto(r, events=False) for r in runs]}),
        ({"user": "user:bo", "events": "1"}, {"runs": [run_dto(r) for r in runs if r.user_id == "user:bo"]}),
        ({"user": "user:nobody"}, {"runs": []}),
    ):
        answer = await _get(app, "/runs", params)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        assert answer.content == json.dumps(expected).encode()
    long = runs[2]
    assert (await _get(app, f"/runs/{long.id}")).content == json.dumps(run_dto(long)).encode()
    assert (await _get(app, f"/runs/{long.id}", {"events": "0"})).json() == run_dto(long, events=False)
    missing = await _get(app, "/runs/run_nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
    state = await _get(app, "/state")
    assert state.content == json.dumps(export_state(cloud)).encode()
    assert state.json()["runs"][2]["events"] == long.events


# -- over a real server ----------------------------------------------------------------------------

RUNS, PER_RUN = 100, 1000
"""The served workspace of the slow test: 100 runs of 1,000 events (100k events)."""


async def _build(remote: httpx.AsyncClient) -> list[str]:
    """``RUNS`` runs of ``PER_RUN`` events each, made as an app makes them: a run started as the app,
    its events emitted through the control API in batches of 1,000."""
    batch = [{"type": "node.output_text.delta", "fields": {"delta": "some streamed text " * 6, "entry_id": "e0"}}
             for _ in range(PER_RUN - 1)] + [{"type": "node.output_text.done", "fields": {"text": "done", "entry_id": "e0"}}]
    run_ids = []
    for number in range(RUNS):
        started = (await remote.post("/people/user:ada/runs", json={"prompt": f"run {number}"})).json()
        run_ids.append(started["run_id"])
        answer = await remote.post(f"/runs/{started['run_id']}/emit", json={"events": batch})
        assert answer.status_code == 200, answer.text
    return run_ids


@pytest.mark.slow
async def test_other_clients_are_answered_while_a_large_attach_read_is_written(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    served = serve(tmp_path / "ws")
    headers = {"Authorization": f"Bearer {served.info['token']}"}
    base = served.url + CONTROL_PREFIX
    timeout = httpx.Timeout(120.0)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as app, \
            httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as window:
        run_ids = await _build(app)
        last = run_ids[-1]  # the last run started: the last one the attach read writes
        answered: dict[int, bool] = {}
        """The seq of each event the app emitted meanwhile: True when emitted after the window had
        the attach answer's first bytes (then the server had begun writing it)."""
        begun = asyncio.Event()
        done = asyncio.Event()
        body: dict[str, Any] = {}

        async def attach() -> None:
            async with window.stream("GET", "/runs", params={"events": "1"}) as response:
                assert response.status_code == 200
                begun.set()
                body.update(json.loads(await response.aread()))
            done.set()

        async def emit() -> None:
            while not done.is_set():
                after_begun = begun.is_set()
                answer = await app.post(f"/runs/{last}/emit", json={"type": "custom.tick", "fields": {"n": 1}})
                assert answer.status_code == 200
                answered[int(answer.json()["event"]["seq"])] = after_begun
                await asyncio.sleep(0)  # the window's reads run between two emits

        await asyncio.gather(attach(), emit())
    runs = {run["id"]: run for run in body["runs"]}
    assert len(runs) >= RUNS and all(len(runs[run_id]["events"]) >= PER_RUN for run_id in run_ids)
    sent = {event["seq"] for event in runs[last]["events"]}
    during = [seq for seq, after_begun in answered.items() if after_begun and seq in sent]
    # emitted after the answer had begun and yet in it: answered while the server was writing it
    assert len(during) >= 3, (len(during), len(answered))
