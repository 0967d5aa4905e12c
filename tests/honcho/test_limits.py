"""The real server's limits and refusals, each with Honcho's status and error body: ids up to 512
characters, metadata depth 5 and 100 keys, chat queries up to 10,000 characters, JSON bodies only,
never a 500 for a body that is not UTF-8 JSON or nests too deep; nothing refused is stored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from services.honcho import FakeHonchoService


def call(service: FakeHonchoService, method: str, path: str, body: Any = None, *, content: bytes | None = None,
         content_type: str = "application/json") -> httpx.Response:
    with httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake") as http:
        if content is not None:
            return http.request(method, path, content=content, headers={"content-type": content_type})
        return http.request(method, path, json=body)


@pytest.fixture
def service() -> FakeHonchoService:
    fake = FakeHonchoService()
    assert call(fake, "POST", "/v3/workspaces", {"id": "w"}).status_code == 201
    return fake


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


@pytest.mark.parametrize(("path", "body", "status", "needle"), [
    ("/v3/workspaces/w/peers", {"id": "p" * 512}, 201, None),
    ("/v3/workspaces/w/peers", {"id": "p" * 513}, 422, "at most 512 characters"),
    ("/v3/workspaces/w/sessions", {"id": "bad id"}, 422, "should match pattern"),
    ("/v3/workspaces/w/peers", {"id": "m5", "metadata": deep(5)}, 201, None),
    ("/v3/workspaces/w/peers", {"id": "b", "metadata": deep(6)}, 422, "maximum depth of 5"),
    ("/v3/workspaces/w/sessions", {"id": "s", "metadata": {f"k{i}": i for i in range(101)}}, 422,
     "maximum of 100 top-level keys"),
    ("/v3/workspaces/w/peers/a/chat", {"query": "q" * 10_000}, 200, None),
    ("/v3/workspaces/w/peers/a/chat", {"query": "q" * 10_001}, 422, "at most 10000"),
    ("/v3/workspaces/w/peers/a/chat", {"query": ""}, 422, "at least 1"),
    ("/v3/workspaces/w/peers/a/chat", {"query": "x", "reasoning_level": "huge"}, 422, "'minimal'"),
    ("/v3/workspaces/w/peers/a/chat", {"query": "x", "filters": {"peer_id": "a"}}, 422, "Only 'session_id'"),
    ("/v3/workspaces/w/peers/a/search", {"query": "x", "limit": 101}, 422, "less than or equal to 100"),
    ("/v3/workspaces/w/sessions/s/messages", {"messages": []}, 422, "at least 1 item"),
    ("/v3/workspaces/w/sessions/s/messages",
     {"messages": [{"peer_id": "a", "content": "x", "created_at": "yesterday"}]}, 422, "valid datetime"),
    ("/v3/workspaces/w/sessions/s/messages/list", {}, 200, None),
    ("/v3/workspaces/w/conclusions", {"conclusions": [{"content": "", "observer_id": "a", "observed_id": "a"}]},
     422, "1..65535"),
])
def test_limits(service: FakeHonchoService, path: str, body: Any, status: int, needle: str | None) -> None:
    call(service, "POST", "/v3/workspaces/w/peers", {"id": "a"})
    answer = call(service, "POST", path, body)
    assert answer.status_code == status, answer.text
    if needle is not None:
        assert needle in str(answer.json()["detail"])


def test_too_many_observers_is_400(service: FakeHonchoService) -> None:
    peers = {f"p{i}": {"observe_others": True} for i in range(11)}
    answer = call(service, "POST", "/v3/workspaces/w/sessions", {"id": "crowd", "peers": peers})
    assert answer.status_code == 400 and "Maximum allowed is 10 observers" in answer.json()["detail"]


@pytest.mark.parametrize(("content", "content_type", "status"), [
    (b'{"id": "x"}', "text/plain", 415),
    (b"id=x", "application/x-www-form-urlencoded", 415),
    (b'{"id": "\xff\xfe"}', "application/json", 422),
    (b"{not json", "application/json", 422),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", 422),
    (b'{"id": ' + b'{"a": ' * 80 + b"1" + b"}" * 80 + b"}", "application/json", 422),
])
def test_bodies_other_than_json_are_refused_with_a_4xx(service: FakeHonchoService, content: bytes,
                                                       content_type: str, status: int) -> None:
    answer = call(service, "POST", "/v3/workspaces/w/peers", content=content, content_type=content_type)
    assert answer.status_code == status and "detail" in answer.json()
    assert service.peer_ids("w") == []


def test_unknown_routes_and_methods(service: FakeHonchoService) -> None:
    assert call(service, "POST", "/v3/nowhere", {}).json() == {"detail": "Not Found"}
    wrong = call(service, "GET", "/v3/workspaces/w/conclusions/c1")  # the SDK's conclusions.get: no such route
    assert wrong.status_code == 405 and wrong.json() == {"detail": "Method Not Allowed"}
    assert call(service, "PUT", "/v3/workspaces/w/sessions/nope/messages/m1", {"metadata": {}}).status_code == 404


def test_a_deleted_session_answers_404_and_lists_no_more(service: FakeHonchoService) -> None:
    call(service, "POST", "/v3/workspaces/w/sessions/s/messages", {"messages": [{"peer_id": "a", "content": "hi"}]})
    assert call(service, "DELETE", "/v3/workspaces/w/sessions/s").status_code == 202
    assert call(service, "POST", "/v3/workspaces/w/sessions", {"id": "s"}).status_code == 404
    assert call(service, "PUT", "/v3/workspaces/w/sessions/s", {"metadata": {}}).status_code == 404
    assert call(service, "POST", "/v3/workspaces/w/sessions/list", {}).json()["items"] == []
    assert call(service, "POST", "/v3/workspaces/w/sessions/s/messages/list", {}).json()["items"] == []


def test_answers_can_be_scripted(service: FakeHonchoService) -> None:
    call(service, "POST", "/v3/workspaces/w/peers", {"id": "a"})
    service.respond("chat", lambda ask: f"scripted: {ask.query} ({len(ask.messages)} messages)")
    service.respond("card", lambda ask: ["scripted card"])
    assert call(service, "POST", "/v3/workspaces/w/peers/a/chat", {"query": "hi"}).json() == {
        "content": "scripted: hi (0 messages)"}
    assert call(service, "GET", "/v3/workspaces/w/peers/a/card").json() == {"peer_card": ["scripted card"]}
    service.respond("chat", None)
    assert "deterministic" in call(service, "POST", "/v3/workspaces/w/peers/a/chat", {"query": "hi"}).json()["content"]


@pytest.mark.parametrize(("files", "data", "status", "needle"), [
    ({"file": ("a.pdf", b"%PDF-1.4", "application/pdf")}, {"peer_id": "a"}, 415, "Unsupported file type"),
    ({"file": ("big.txt", b"x" * 5_242_881, "text/plain")}, {"peer_id": "a"}, 413, "exceeds maximum"),
    ({"file": ("a.txt", b"hello", "text/plain")}, {}, 422, "Field required"),
    ({"file": ("a.json", b"{broken", "application/json")}, {"peer_id": "a"}, 422, "Uploaded JSON is invalid"),
    ({"file": ("a.json", b'{"k": [1, 2]}', "application/json")}, {"peer_id": "a"}, 201, None),
])
def test_uploads(service: FakeHonchoService, files: dict[str, Any], data: dict[str, str], status: int,
                 needle: str | None) -> None:
    with httpx.Client(transport=httpx.MockTransport(service.handle), base_url="http://honcho.fake") as http:
        answer = http.post("/v3/workspaces/w/sessions/up/messages/upload", files=files, data=data)
    assert answer.status_code == status, answer.text
    if needle is not None:
        assert needle in str(answer.json()["detail"]) and service.session_messages("up", "w") == []
    else:
        assert [m["content"] for m in service.session_messages("up", "w")] == ['{"k": [1, 2]}']


def test_keyless_requests_are_counted_not_kept_and_the_call_record_is_a_ring() -> None:
    fake = FakeHonchoService(api_key="s3cret", calls_kept=50)
    with httpx.Client(transport=httpx.MockTransport(fake.handle), base_url="http://honcho.fake") as http:
        for number in range(3000):
            wrong = {} if number % 2 else {"authorization": "Bearer not-the-key"}
            answer = http.post(f"/v3/workspaces/w{number}/peers/list" + "x" * 1000, json={}, headers=wrong)
            assert answer.status_code == 401
        assert len(fake.calls) == 0 and fake.refused_calls == 3000
        assert fake.authorization is None  # a refused request's header is not kept either
        keyed = {"authorization": "Bearer s3cret"}
        for number in range(120):
            assert http.post("/v3/workspaces", json={"id": f"w{number}"}, headers=keyed).status_code == 201
    assert len(fake.calls) == 50 and fake.calls[-1] == ("POST", "/v3/workspaces")
    assert fake.refused_calls == 3000 and fake.authorization == "Bearer s3cret"

