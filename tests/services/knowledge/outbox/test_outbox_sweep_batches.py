"""The sweep's batching boundaries: one ledger write for every conversation before the sends,
batches refused or crashed in the middle, and the in-process calls to the fake."""

from __future__ import annotations

import httpx
import pytest

from services.clock import FakeClock
from services.honcho import FakeHonchoService
from services.knowledge.outbox import HonchoRequestError, HonchoUnavailableError, MemoryOutbox
from services.knowledge.outbox.honcho_client import HonchoClient

from .conftest import contents, turn


class Crash(BaseException):
    """Stands for the process dying at a step (not an Exception, so nothing handles it)."""


def many(prefix: str, count: int) -> list[dict[str, str]]:
    """One record of ``count`` user messages (more than 100 go out in several batches)."""
    return [{"role": "user", "text": f"{prefix} {i}"} for i in range(count)]


def lists_of(fake: FakeHonchoService, session_id: str) -> int:
    """How many times the sweep asked the fake which messages of a session had landed."""
    return sum(1 for method, path in fake.calls if method == "POST" and path.endswith(f"/{session_id}/messages/list"))


async def test_one_sweep_writes_each_ledger_once_before_any_send(root, feed, fake, clock) -> None:
    """New conversations: established and named in flight by one write, then sent without asking Honcho."""
    written: list[str] = []
    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock,
                                  step_hook=lambda step, conv: written.append(f"{step}:{conv}"))
    try:
        for conv in ("run_1", "run_2", "run_3"):
            await box.capture_turn(conv, "u", turn(f"{conv} q", f"{conv} a"))
        result = await box.sweep()
        assert result.errors == [] and result.delivered_records == 3
        assert written == ["sent:run_1", "ledger-written:run_1", "sent:run_2", "ledger-written:run_2",
                           "sent:run_3", "ledger-written:run_3"]
        assert all(lists_of(fake, f"conv-{conv}") == 0 for conv in ("run_1", "run_2", "run_3"))
        for conv in ("run_1", "run_2", "run_3"):
            ledger = box.stores.read_ledger(conv)
            assert ledger is not None and ledger["inflight"] == [] and ledger["turnCount"] == 1
        assert contents(fake) == ["run_1 q", "run_1 a", "run_2 q", "run_2 a", "run_3 q", "run_3 a"]
    finally:
        await box.aclose()


async def test_a_crash_after_the_first_batch_of_a_sweep_sends_each_message_once(root, feed, fake, clock) -> None:
    """The sweep's one ledger write named every conversation's batches in flight: after a crash in
    the middle of a record split over two batches, the next sweep asks Honcho and sends the rest."""
    def crash_at_first_send(step: str, conv: str) -> None:
        if step == "sent":
            raise Crash(step)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock,
                                  step_hook=crash_at_first_send)
    try:
        await box.capture_turn("run_1", "u", many("one", 150))
        await box.capture_turn("run_2", "u", turn("two q", "two a"))
        with pytest.raises(Crash):
            await box.sweep()
    finally:
        await box.aclose()
    assert len(contents(fake, "conv-run_1")) == 100 and contents(fake, "conv-run_2") == []
    for conv in ("run_1", "run_2"):
        ledger = box.stores.read_ledger(conv)
        assert ledger is not None and ledger["sessionId"] == f"conv-{conv}" and len(ledger["inflight"]) == 1

    again = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock)
    try:
        result = await again.sweep()
        assert result.errors == [] and (result.delivered_records, result.delivered_messages) == (2, 52)
        assert contents(fake, "conv-run_1") == [f"one {i}" for i in range(150)]
        assert contents(fake, "conv-run_2") == ["two q", "two a"]
        assert again.stores.read_outbox().records == []
    finally:
        await again.aclose()


async def test_a_batch_refused_in_the_middle_of_a_sweep_is_sent_once_by_the_next(root, feed, fake, clock) -> None:
    """Honcho accepts a conversation's first batch and refuses its second: the sweep counts what
    landed, goes on with the other conversations, and the next sweep sends only the rest."""
    refused = {"done": False}

    def refuse_second_batch(step: str, conv: str) -> None:
        if step == "sent" and conv == "run_2" and not refused["done"]:
            refused["done"] = True
            fake.fail_next(422)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock,
                                  step_hook=refuse_second_batch)
    try:
        await box.capture_turn("run_1", "u", turn("one q", "one a"))
        await box.capture_turn("run_2", "u", many("two", 60))
        await box.capture_turn("run_2", "u", many("more", 60))
        await box.capture_turn("run_3", "u", turn("three q", "three a"))
        result = await box.sweep()
        assert len(result.errors) == 1 and "run_2" in result.errors[0] and "422" in result.errors[0]
        # run_2's first record went whole in the first batch (60 + 40 of the second): it is counted
        assert (result.delivered_records, result.delivered_messages) == (3, 104)
        assert contents(fake, "conv-run_2") == [f"two {i}" for i in range(60)] + [f"more {i}" for i in range(40)]
        assert contents(fake, "conv-run_3") == ["three q", "three a"]
        pending = box.stores.read_outbox().pending()
        assert [r["conversationId"] for r in pending] == ["run_2"]

        result = await box.sweep()
        assert result.errors == [] and (result.delivered_records, result.delivered_messages) == (1, 20)
        assert contents(fake, "conv-run_2") == [f"two {i}" for i in range(60)] + [f"more {i}" for i in range(60)]
        ledger = box.stores.read_ledger("run_2")
        assert ledger is not None and ledger["turnCount"] == 2 and ledger["inflight"] == []
        assert [m["metadata"]["turn"] for m in fake.session_messages("conv-run_2")] == [1] * 60 + [2] * 60
    finally:
        await box.aclose()


async def test_a_ledger_rewritten_after_the_sweeps_write_is_not_trusted(root, feed, fake, clock) -> None:
    """Another writer touched a conversation's ledger between the sweep's one write and its turn:
    the sweep no longer knows that nothing of it was sent, so it asks Honcho first."""
    def rewrite_next(step: str, conv: str) -> None:
        if step == "sent" and conv == "run_1":
            ledger = box.stores.read_ledger("run_2")
            assert ledger is not None
            box.stores.write_ledger(ledger)

    box = await MemoryOutbox.open(root, feed, honcho_transport=fake.transport, clock=clock, step_hook=rewrite_next)
    try:
        await box.capture_turn("run_1", "u", turn("one q", "one a"))
        await box.capture_turn("run_2", "u", turn("two q", "two a"))
        result = await box.sweep()
        assert result.errors == [] and result.delivered_records == 2
        assert lists_of(fake, "conv-run_1") == 0 and lists_of(fake, "conv-run_2") == 1
        assert contents(fake) == ["one q", "one a", "two q", "two a"]
    finally:
        await box.aclose()


# -- in-process calls to the fake ------------------------------------------------------------------

def _through_http(fake: FakeHonchoService, method: str, path: str, body: object = None,
                  params: dict[str, str] | None = None) -> tuple[int, object]:
    request = httpx.Request(method, "https://honcho.fake" + path, json=body, params=params)
    response = fake.handle(request)
    return response.status_code, (response.json() if response.content else None)


def _in_process(fake: FakeHonchoService, method: str, path: str, body: object = None,
                params: dict[str, str] | None = None) -> tuple[int, object]:
    status, answer, _ = fake.call(method, path, body=body, params=httpx.QueryParams(params) if params else None)
    return status, answer


CALLS: list[tuple[str, str, object]] = [
    ("POST", "/v3/workspaces", {"id": "w"}),
    ("POST", "/v3/workspaces/w/peers", {"id": "user_1"}),
    ("POST", "/v3/workspaces/w/sessions", {"id": "s1", "peers": {"user_1": {"observe_me": True}}}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages", {"messages": [
        {"content": "hello\x00 there", "peer_id": "user_1", "metadata": {"k": [1, 2.5, None, True]},
         "created_at": "2026-01-02T03:04:05+00:00"},
        {"content": "second", "peer_id": "assistant"}]}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages", {"messages": [
        {"content": "fine", "peer_id": "user_1"}, {"peer_id": "user_1"}]}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages", {"messages": [{"content": "x", "peer_id": "u"}] * 101}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages", {"messages": [
        {"content": "deep", "peer_id": "user_1", "metadata": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}]}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages", {"messages": [{"content": "d", "peer_id": "user_1",
                                                                     "metadata": {"x": [[[[[[[[[[]]]]]]]]]]}}]}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages/list", {"filters": {"peer_id": "user_1"}}),
    ("POST", "/v3/workspaces/w/sessions/s1/messages/list", {"filters": {"no_such_column": 1}}),
    ("GET", "/v3/workspaces/w/sessions/s1/messages", None),
    ("POST", "/v3/workspaces/w/nowhere", {}),
]


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


async def test_in_process_calls_answer_as_the_http_transport_does() -> None:
    """Same routes, checks, ids, stored text and errors, whether the body is JSON text or a value."""
    http_side, value_side = FakeHonchoService(clock=FakeClock()), FakeHonchoService(clock=FakeClock())
    calls = [*CALLS, ("POST", "/v3/workspaces/w/sessions/s1/messages",
                      {"messages": [{"content": "n", "peer_id": "user_1"}], "x": _nested(70)})]
    for method, path, body in calls:
        over_http = _through_http(http_side, method, path, body)
        direct = _in_process(value_side, method, path, body)
        assert direct == over_http, (method, path)
    assert http_side.all_messages("w") == value_side.all_messages("w")
    assert [m["content"] for m in value_side.all_messages("w")] == ["hello there", "second", "d"]
    assert http_side.calls == value_side.calls


async def test_in_process_faults_and_keys_are_the_http_ones() -> None:
    fake = FakeHonchoService(api_key="sekrit")
    assert _in_process(fake, "POST", "/v3/workspaces", {"id": "w"}) == (401, {"detail": "No access token provided"})
    status, answer, _ = fake.call("POST", "/v3/workspaces", body={"id": "w"}, authorization="Bearer nope")
    assert (status, answer) == (401, {"detail": "Invalid JWT"})
    fake.fail_next(503, retry_after=7)
    status, answer, headers = fake.call("POST", "/v3/workspaces", body={"id": "w"}, authorization="Bearer sekrit")
    assert (status, headers) == (503, {"Retry-After": "7"})
    fake.go_down()
    with pytest.raises(httpx.ConnectError):
        fake.call("POST", "/v3/workspaces", body={"id": "w"}, authorization="Bearer sekrit")


async def test_in_process_bodies_are_copies_and_fail_as_json_encoding_fails() -> None:
    fake = FakeHonchoService()
    meta = {"tags": ["a"]}
    status, answer, _ = fake.call("POST", "/v3/workspaces/w/sessions/s/messages",
                                  body={"messages": [{"content": "c", "peer_id": "p", "metadata": meta}]})
    assert status == 201 and isinstance(answer, list)
    answer[0]["metadata"]["tags"].append("changed by the caller")
    meta["tags"].append("changed too")
    assert fake.session_messages("s", "w")[0]["metadata"] == {"tags": ["a"]}
    calls = len(fake.calls)
    with pytest.raises(UnicodeEncodeError):
        fake.call("POST", "/v3/workspaces/w/sessions/s/messages",
                  body={"messages": [{"content": "lone \ud800", "peer_id": "p"}]})
    with pytest.raises(ValueError, match="not JSON compliant"):
        fake.call("POST", "/v3/workspaces/w/peers", body={"id": "p", "metadata": {"x": float("nan")}})
    with pytest.raises(TypeError):
        fake.call("POST", "/v3/workspaces/w/peers", body={"id": "p", "metadata": {"x": object()}})
    assert len(fake.calls) == calls  # nothing reached the service, as nothing is sent when encoding fails


async def test_the_client_raises_the_same_errors_in_process_and_over_http() -> None:
    """HonchoClient over the fake's transport (values) and over a wrapping transport (JSON text)."""

    class Wrapped(httpx.AsyncBaseTransport):
        def __init__(self, service: FakeHonchoService) -> None:
            self.service = service

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await request.aread()
            return self.service.handle(request)

    for make in (lambda f: f.transport, Wrapped):
        fake = FakeHonchoService()
        client = HonchoClient("w", transport=make(fake))
        try:
            await client.get_or_create_peer("user_1")
            created = await client.add_messages("s1", [{"content": "hi", "peer_id": "user_1"}])
            assert [m["content"] for m in created] == ["hi"] and created[0]["id"].startswith("msg_")
            with pytest.raises(HonchoRequestError, match="422 .*Field required"):
                await client.add_messages("s1", [{"peer_id": "user_1"}])
            fake.fail_next(503, retry_after=3)
            with pytest.raises(HonchoUnavailableError) as unavailable:
                await client.add_messages("s1", [{"content": "later", "peer_id": "user_1"}])
            assert unavailable.value.retry_after == "3"
            with pytest.raises(HonchoRequestError, match="404"):
                await client.clone_session("never-made", None)
            fake.go_down()
            with pytest.raises(HonchoUnavailableError, match="cannot reach Honcho"):
                await client.add_messages("s1", [{"content": "down", "peer_id": "user_1"}])
        finally:
            await client.aclose()
