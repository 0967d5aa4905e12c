"""Crouter's resources: what each call sends, how answers are read, and bad answers."""

from __future__ import annotations

import json

import httpx
import pytest

from services import wire
from services.sdk import CrouterError, Crouter, Run, RuntimeVersionError

from .wirefake import RUNTIME, MiniWire, envelope, run_dto


@pytest.fixture
async def client(mini: MiniWire, sleeps) -> Crouter:
    crouter = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleeps)
    yield crouter
    await crouter.aclose()


def last(mini: MiniWire) -> httpx.Request:
    return mini.calls[-1][1]


async def test_start_sends_the_body_and_a_fresh_key_per_call(client, mini) -> None:
    run = await client.runs.start(prompt="hello", isolated=True, cwd="/apps/doppel/nodes/x", name="n", profile="p")
    assert isinstance(run, Run) and run.id == "run_1" and run.params == {"prompt": "hello"}
    assert run.raw["created_at"] == "2026-11-30T03:00:00.000Z"
    request = last(mini)
    assert json.loads(request.content) == {
        "prompt": "hello",
        "isolated": True,
        "cwd": "/apps/doppel/nodes/x",
        "name": "n",
        "profile": "p",
    }
    await client.runs.start(prompt="hello")
    keys = [req.headers[wire.IDEMPOTENCY_KEY] for _, req in mini.calls]
    assert len(set(keys)) == 2
    assert all(req.headers[wire.MIN_RUNTIME_HEADER] == wire.SDK_MIN_RUNTIME_VERSION for _, req in mini.calls)


async def test_reads_send_their_query_and_paths(client, mini) -> None:
    await client.runs.list(status="idle", limit=5)
    assert dict(last(mini).url.params) == {"status": "idle", "limit": "5"}
    await client.runs.list()
    assert dict(last(mini).url.params) == {}
    await client.memory.get("o1/notes/a b.md")
    assert last(mini).url.raw_path == b"/v1/memory/o1/notes/a%20b.md"
    await client.memory.list(kind="knowledge")
    assert dict(last(mini).url.params) == {"kind": "knowledge"}
    await client.questions.get("q 1")
    assert last(mini).url.raw_path == b"/v1/questions/q%201"
    await client.grant.get(wait=2.5, since=3)
    assert dict(last(mini).url.params) == {"wait": "2.5", "since": "3"}


async def test_posts_send_their_bodies(client, mini) -> None:
    answer = await client.runs.message("run_1", "hi", start_turn=False, idempotency_key="k")
    assert answer["cursor"] == 0 and answer["run"]["id"] == "run_1"
    assert json.loads(last(mini).content) == {"text": "hi", "start_turn": False}
    assert last(mini).headers[wire.IDEMPOTENCY_KEY] == "k"
    await client.runs.rename("run_1", "better")
    assert json.loads(last(mini).content) == {"name": "better"}
    await client.questions.answer("q_1", {"slot": "yes"})
    assert json.loads(last(mini).content) == {"answers": {"slot": "yes"}}
    await client.providers.call("sms", "send", {"to": "+1"})
    assert last(mini).url.path == "/v1/providers/sms/tools/send/call"
    assert json.loads(last(mini).content) == {"arguments": {"to": "+1"}}
    await client.runs.interrupt("run_1")
    await client.runs.cancel("run_1")
    await client.runs.delete("run_1")
    assert mini.ops()[-3:] == ["run.interrupt", "run.cancel", "run.delete"]
    assert wire.IDEMPOTENCY_KEY not in last(mini).headers


async def test_list_answers_are_read_as_lists(client, mini) -> None:
    assert [r.id for r in await client.runs.list()] == ["run_1", "run_2"]
    mini.handlers["memory.list"] = lambda request, params: {"documents": [{"name": "a"}]}
    assert await client.memory.list() == [{"name": "a"}]
    assert await client.profiles.list() == [{"name": "default", "description": "the default profile"}]


async def test_an_old_runtime_raises_runtime_version_error(client, mini) -> None:
    mini.script("run.get", envelope(426, "runtime_version_unsupported"))
    with pytest.raises(RuntimeVersionError) as caught:
        await client.runs.get("run_1")
    assert caught.value.status == 426 and mini.ops() == ["run.get"]


async def test_a_non_json_answer_is_a_clear_error(client, mini) -> None:
    mini.handlers["run.get"] = lambda request, params: httpx.Response(200, content=b"<html>")
    with pytest.raises(CrouterError) as caught:
        await client.runs.get("run_1")
    assert caught.value.code == "invalid_response" and "not JSON" in str(caught.value)


async def test_an_error_without_an_envelope_still_maps_by_status(client, mini) -> None:
    mini.script("run.cancel", httpx.Response(409, content=b"conflict"))
    with pytest.raises(CrouterError) as caught:
        await client.runs.cancel("run_1")
    assert caught.value.status == 409 and caught.value.code == "http_409"


async def test_a_run_answer_without_a_run_is_refused(client, mini) -> None:
    mini.handlers["run.get"] = lambda request, params: {"nope": 1}
    with pytest.raises(CrouterError):
        await client.runs.get("run_1")
    mini.handlers["run.get"] = lambda request, params: run_dto("run_7", status="idle", pending=None)
    run = await client.runs.get("run_7")
    assert run.status == "idle" and run.pending == []


def test_a_crouter_needs_a_token() -> None:
    with pytest.raises(CrouterError):
        Crouter(runtime_url=RUNTIME)
