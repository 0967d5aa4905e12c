"""Seed section "Asserting" (call records) and the bad-input cases of the issue."""

from __future__ import annotations

import httpx
import jwt
import pytest

from services.cloud import FakeCloud, generate_private_key_pem
from services.sdk import BadRequestError, NotFoundError

from .conftest import USER


async def test_call_records_carry_every_field(cloud: FakeCloud, client) -> None:
    run = await client.runs.start(prompt="p", idempotency_key="k1")
    question = cloud.runs.all[0].ask(title="q")
    await client.runs.get(run.id)
    await client.questions.get(question)
    await client.runs.list(status="waiting_on_user")
    start, get, qget, listed = [c for c in cloud.calls if c.op in ("run.start", "run.get", "question.get", "run.list")]
    assert (start.user_id, start.op, start.method, start.path) == (USER, "run.start", "POST", "/v1/runs")
    assert (start.body, start.idempotency_key, start.status, start.run_id) == ({"prompt": "p"}, "k1", 201, None)
    assert (get.run_id, get.question_id, get.status) == (run.id, None, 200)
    assert (qget.run_id, qget.question_id) == (run.id, question)
    assert listed.query == {"status": "waiting_on_user"}
    assert all(isinstance(c.at, float) for c in cloud.calls)
    assert cloud.directory_calls[0].op == "directory.discovery"


async def test_run_id_as_sent_even_when_unknown(cloud: FakeCloud, client) -> None:
    with pytest.raises(NotFoundError):
        await client.runs.get("run_nope")
    with pytest.raises(NotFoundError):
        await client.questions.get("q_nope")
    get, qget = cloud.calls[-2:]
    assert (get.run_id, get.status) == ("run_nope", 404)
    assert (qget.run_id, qget.question_id) == (None, "q_nope")


async def _raw(cloud: FakeCloud, method: str, path: str, token: str | None, *, headers: dict[str, str] | None = None,
               **kwargs) -> httpx.Response:
    headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    async with httpx.AsyncClient(transport=cloud.transport, base_url="https://runtime.test") as http:
        return await http.request(method, path, headers=headers, **kwargs)


async def test_malformed_json_and_wrong_types_name_param(cloud: FakeCloud, client) -> None:
    token, _ = cloud.state.mint_access(cloud.user(USER))
    bad = await _raw(cloud, "POST", "/v1/runs", token, content=b'{"prompt": ')
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "body"
    assert bad.json()["error"]["code"] == "invalid_request"
    wrong = await _raw(cloud, "POST", "/v1/runs", token, json={"prompt": 5})
    assert wrong.json()["error"]["param"] == "prompt"
    run = await client.runs.start(prompt="p")
    for body, param in (({"text": 1}, "text"), ({"text": "x", "start_turn": "yes"}, "start_turn")):
        answer = await _raw(cloud, "POST", f"/v1/runs/{run.id}/messages", token, json=body)
        assert (answer.status_code, answer.json()["error"]["param"]) == (400, param)
    with pytest.raises(BadRequestError):
        await client.runs.rename(run.id, "")
    assert len(cloud.runs.all) == 1 and cloud.runs.all[0].messages == []  # nothing half written


async def test_bearer_token_faults(cloud: FakeCloud, client) -> None:
    user = cloud.user(USER)
    kept = len(cloud.calls)
    missing = await _raw(cloud, "GET", "/v1/runs", None)
    assert missing.status_code == 401
    garbage = await _raw(cloud, "GET", "/v1/runs", "not-a-jwt")
    assert garbage.status_code == 401
    assert len(cloud.calls) == kept  # a call that fails authentication leaves no record (nor its body)
    expired, _ = cloud.state.mint_access(user, expired=True)
    answer = await _raw(cloud, "GET", "/v1/runs", expired)
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "token_expired")
    assert cloud.calls[-1].user_id == USER  # a token this directory signed: the call is the person's
    kept = len(cloud.calls)
    forged = jwt.encode(
        {"iss": cloud.issuer, "sub": USER, "aud": cloud.runtime_id, "exp": 4_000_000_000},
        generate_private_key_pem(), algorithm="RS256", headers={"kid": cloud.state.key.kid},
    )
    answer = await _raw(cloud, "GET", "/v1/runs", forged)
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "invalid_token")
    hmac = jwt.encode({"iss": cloud.issuer, "sub": USER, "aud": cloud.runtime_id, "exp": 4_000_000_000}, "s" * 32, algorithm="HS256")
    assert (await _raw(cloud, "GET", "/v1/runs", hmac)).status_code == 401
    stranger = jwt.encode({"sub": "user:nobody"}, "k" * 32, algorithm="HS256")
    await _raw(cloud, "GET", "/v1/runs", stranger)
    assert len(cloud.calls) == kept  # a forged token names nobody


async def test_unknown_route_is_404(cloud: FakeCloud) -> None:
    token, _ = cloud.state.mint_access(cloud.user(USER))
    answer = await _raw(cloud, "GET", "/v1/nothing", token)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_an_empty_idempotency_key_is_refused_and_starts_nothing(cloud: FakeCloud, client) -> None:
    token, _ = cloud.state.mint_access(cloud.user(USER))
    for blank in ("", "   "):
        answer = await _raw(cloud, "POST", "/v1/runs", token, json={"prompt": "p"}, headers={"Idempotency-Key": blank})
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["param"]) == (400, "invalid_request", "Idempotency-Key")
        assert "must not be empty" in error["message"]
    run = await client.runs.start(prompt="p")
    answer = await _raw(cloud, "POST", f"/v1/runs/{run.id}/messages", token, json={"text": "x"},
                        headers={"Idempotency-Key": ""})
    assert answer.status_code == 400
    assert len(cloud.runs.all) == 1 and cloud.runs.all[0].messages == []  # nothing was started or sent
    keyed = await _raw(cloud, "POST", "/v1/runs", token, json={"prompt": "p"}, headers={"Idempotency-Key": "k"})
    assert keyed.status_code == 201  # a real key is still welcome
