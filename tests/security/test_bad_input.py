"""Every bad input gets a 4xx in the wire's error envelope, never a 500: deep JSON, digits ``int``
cannot read (``²``), bytes that are not UTF-8, control calls missing a field, sizes over the limits."""

from __future__ import annotations

import pytest

from services.control_wire import CONTROL_PREFIX

from .conftest import Guarded, envelope_of


async def _run(served: Guarded) -> str:
    started = await served.http.post("/v1/runs", headers=served.as_app(), json={"prompt": "hi"})
    assert started.status_code == 201, started.text
    return str(started.json()["id"])


@pytest.mark.parametrize("path", ["/v1/runs", CONTROL_PREFIX + "/changes", CONTROL_PREFIX + "/fail_next"])
async def test_deeply_nested_json_is_a_400_naming_the_body(guarded: Guarded, path: str) -> None:
    for depth in (40, 100_000):
        body = b"[" * depth + b"]" * depth
        answer = await guarded.http.post(path, headers=guarded.as_operator() if "_workbench" in path
                                         else guarded.as_app(), content=body)
        assert answer.status_code == 400, (path, depth, answer.text[:200])
        assert "nested deeper" in str(envelope_of(answer)["message"])


async def test_superscript_digits_in_cursors_and_counts_are_a_400(guarded: Guarded) -> None:
    run_id = await _run(guarded)
    cases = [("GET", f"/v1/runs/{run_id}/events?after=%C2%B2", {}, "after"),
             ("GET", f"/v1/runs/{run_id}/events", {"last-event-id": "²".encode()}, "after"),
             ("GET", "/v1/runs?limit=%C2%B2", {}, "limit"),
             ("GET", "/v1/grant?wait=1&since=%C2%B2", {}, "since"),
             ("GET", "/v1/grant?wait=inf&since=1", {}, "wait"),
             ("GET", "/v1/grant?wait=nan&since=1", {}, "wait"),
             ("GET", "/v1/runs?limit=-1", {}, "limit")]
    for method, path, headers, param in cases:
        answer = await guarded.http.request(method, path, headers={**guarded.as_app(), **headers})
        assert answer.status_code == 400, (path, answer.text)
        assert envelope_of(answer)["param"] == param


async def test_a_change_stream_resumed_from_a_superscript_id_starts_over(guarded: Guarded) -> None:
    async with guarded.http.stream("GET", CONTROL_PREFIX + "/changes",
                                   headers={**guarded.as_operator(), "last-event-id": "x-²".encode()}) as answer:
        assert answer.status_code == 200
        async for chunk in answer.aiter_text():
            if "reset" in chunk:
                break


async def test_bytes_that_are_not_utf8_are_a_400(guarded: Guarded) -> None:
    for path, headers in (("/v1/runs", guarded.as_app()), (CONTROL_PREFIX + "/changes", guarded.as_operator())):
        answer = await guarded.http.post(path, headers=headers, content=b'{"prompt": "\xff\xfe"}')
        assert answer.status_code == 400, answer.text
        assert envelope_of(answer)["code"] == "invalid_request"


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/fail_next", {"answer": 503}, "op"),
    ("/fail_next", {"op": "run.start"}, "answer"),
    ("/fail_next", {"op": "run.start", "answer": {"code": "x"}}, "answer"),
    ("/fail_next", {"op": "run.start", "answer": 200}, "answer"),
    ("/fail_next", {"op": "run.start", "answer": 503, "times": "three"}, "times"),
    ("/gates", {}, "op"),
    ("/people/user:a/memory", {"body": "x"}, "name"),
    ("/people/user:a/connect", {"scopes": "crtr:llm"}, "scopes"),
    ("/changes", {"kind": "x"}, "source"),
    ("/people/user:a/runs", {}, "prompt"),
])
async def test_control_calls_missing_or_mistyping_a_field_are_a_400_naming_it(
        guarded: Guarded, path: str, body: dict[str, object], field: str) -> None:
    answer = await guarded.http.post(CONTROL_PREFIX + path, headers=guarded.as_operator(), json=body)
    assert answer.status_code == 400, answer.text
    error = envelope_of(answer)
    assert error["param"] == field or field in str(error["message"]), error


async def test_run_actions_with_unknown_or_missing_arguments_are_a_400(guarded: Guarded) -> None:
    run_id = await _run(guarded)
    for action, body in (("emit", {}), ("emit", {"events": [{"fields": {}}]}), ("reply", {"txt": "x"}),
                         ("settle", {"nonsense": 1}), ("ask", {}), ("emit", {"events": ["x"]})):
        answer = await guarded.http.post(f"{CONTROL_PREFIX}/runs/{run_id}/{action}", headers=guarded.as_operator(),
                                         json=body)
        assert answer.status_code == 400, (action, body, answer.text)
        envelope_of(answer)


async def test_a_nul_in_a_path_is_a_400(guarded: Guarded) -> None:
    answer = await guarded.http.post(CONTROL_PREFIX + "/people/user%00x/connect", headers=guarded.as_operator(),
                                     json={})
    assert answer.status_code == 400, answer.text
    assert "user\x00x" not in guarded.cloud.state.users
