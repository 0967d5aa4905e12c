"""Text the cloud cannot read back is never stored: every route that keeps text refuses a lone
surrogate or NUL with a 400 naming the field, before anything is written; a state that already holds
such text (written by an older server) reads without error, before and after a restart."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from services.cloud import FakeCloud
from services.served.persist import CLOUD_DB, CloudStore
from services.control_wire import CONTROL_PREFIX
from services.sdk import MemoryConnectionStore

from .served_http import app_token, bearer

BAD = ("\ud800", "\udc00x", "nul \x00 here")


def _raw(value: object) -> bytes:
    return json.dumps(value).encode()  # ASCII escapes: "\ud800" goes over the wire as JSON allows


def _read_everything(http: httpx.Client, app: dict[str, str], operator: dict[str, str], run_id: str) -> None:
    for path, headers in (("/v1/runs", app), (f"/v1/runs/{run_id}", app), (f"/v1/runs/{run_id}/trace", app),
                          (f"{CONTROL_PREFIX}/state", operator), (f"{CONTROL_PREFIX}/runs?events=1", operator),
                          (f"{CONTROL_PREFIX}/people", operator), (f"{CONTROL_PREFIX}/runs/{run_id}", operator)):
        answer = http.get(path, headers=headers)
        assert answer.status_code == 200, (path, answer.text)
        answer.json()
    with http.stream("GET", f"/v1/runs/{run_id}/events", headers=app) as stream:
        assert stream.status_code == 200
        first = next(stream.iter_text())
        assert first.startswith("id: 1\n"), first


async def test_every_text_storing_route_refuses_unstorable_text_and_everything_reads_back(serve, tmp_path: Path
                                                                                          ) -> None:
    served = serve(tmp_path / "ws")
    operator = bearer(served.info["token"])
    token = await app_token(served.url, served.info["token"], "user:t")
    app = bearer(token)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        run_id = http.post("/v1/runs", headers=app, json={"prompt": "clean"}).json()["id"]
        asked = http.post(f"{CONTROL_PREFIX}/runs/{run_id}/ask", headers=operator, json={"title": "which?"})
        question_id = asked.json()["question_id"]
        for bad in BAD:
            attempts = [
                ("/v1/runs", app, {"prompt": bad}, "prompt"),
                ("/v1/runs", app, {"prompt": "ok", "name": bad}, "name"),
                ("/v1/runs", app, {"prompt": "ok", "profile": bad}, "profile"),
                ("/v1/runs", app, {"prompt": "ok", "extra": {"deep": [bad]}}, "extra.deep[0]"),
                ("/v1/runs", app, {"prompt": "ok", bad: 1}, "body"),
                (f"/v1/runs/{run_id}/messages", app, {"text": bad}, "text"),
                (f"/v1/runs/{run_id}/rename", app, {"name": bad}, "name"),
                (f"/v1/questions/{question_id}/answer", app, {"answers": {"pick": bad}}, "answers.pick"),
                (f"{CONTROL_PREFIX}/people/user:t/memory", operator, {"name": "n", "body": bad}, "body"),
                (f"{CONTROL_PREFIX}/people/user:t/memory", operator, {"name": bad, "body": "b"}, "name"),
                (f"{CONTROL_PREFIX}/people/user:t/refuse", operator, {"code": bad}, "code"),
                (f"{CONTROL_PREFIX}/people/user:t/grant/set", operator, {"spend_cap": {"note": bad}},
                 "spend_cap.note"),
                (f"{CONTROL_PREFIX}/people/user:t/runs", operator, {"prompt": bad}, "prompt"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/message", operator, {"text": bad}, "text"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/reply", operator, {"text": bad}, "text"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/emit", operator, {"type": "node.activity", "fields": {"a": bad}},
                 "fields.a"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/emit", operator,
                 {"events": [{"type": "node.activity", "fields": {"a": bad}}]}, "events[0].fields.a"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/ask", operator, {"title": bad}, "title"),
                (f"{CONTROL_PREFIX}/runs/{run_id}/settle", operator, {"result": bad}, "result"),
                (f"{CONTROL_PREFIX}/changes", operator, {"source": "w", "kind": "k", "data": {"x": bad}}, "data.x"),
            ]
            for path, headers, body, field in attempts:
                answer = http.post(path, headers=headers, content=_raw(body))
                assert answer.status_code == 400, (path, body, answer.text)
                assert answer.json()["error"]["param"] == field, (path, answer.json())
        state = http.get(f"{CONTROL_PREFIX}/state", headers=operator).json()
        state["runs"][0]["name"] = "\ud800"
        replaced = http.put(f"{CONTROL_PREFIX}/state", headers=operator, content=_raw(state))
        assert replaced.status_code == 400 and replaced.json()["error"]["param"] == "runs[0].name"
        nul_person = http.post(f"{CONTROL_PREFIX}/people/user%00t/connect", headers=operator, json={})
        assert nul_person.status_code == 400
        _read_everything(http, app, operator, run_id)
    served.proc.stop()
    again = serve(tmp_path / "ws")  # a new port: a new issuer, so a new token
    token = await app_token(again.url, again.info["token"], "user:t")
    with httpx.Client(base_url=again.url, timeout=30) as http:
        _read_everything(http, bearer(token), bearer(again.info["token"]), run_id)


async def test_a_state_already_holding_such_text_reads_without_error_across_a_restart(serve, tmp_path: Path
                                                                                      ) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    url = "http://127.0.0.1:9"
    cloud = FakeCloud("workbench", issuer=url, runtime_url=url)
    store = CloudStore(folder / CLOUD_DB)
    await store.load(cloud)
    await cloud.connect(MemoryConnectionStore(), "user:t", scopes=["crtr:llm"])
    client = cloud.crouter("user:t")
    run = await client.runs.start(prompt="fine", name="x")
    fake = cloud.runs.get(run.id)
    fake.reply("split \ud83d emoji and \x00 nul")  # what an older server stored from a run rename or reply
    fake.emit("run.renamed", {"name": "\udc00"})
    cloud.user("user:t").memory.put("doc\ud800", "body \x00")
    await store.flush()
    await client.aclose()
    await store.close()
    for _ in range(2):  # before and after a restart
        served = serve(folder)
        token = await app_token(served.url, served.info["token"], "user:t")
        with httpx.Client(base_url=served.url, timeout=30) as http:
            _read_everything(http, bearer(token), bearer(served.info["token"]), run.id)
            got = http.get(f"/v1/runs/{run.id}", headers=bearer(token)).json()
            assert got["name"] == "\ufffd"
            listed = http.get("/v1/memory", headers=bearer(token))
            assert listed.status_code == 200, listed.text
        served.proc.stop()
