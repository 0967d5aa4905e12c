"""RunStream (reconnects, control frames, errors), RunReply and forward_run_events."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from services import wire
from services.sdk import (
    AuthenticationError,
    ConflictError,
    Crouter,
    NotFoundError,
    RunEvent,
    forward_run_events,
)

from .wirefake import RUNTIME, MiniWire, envelope, run_event, sse_frame, stream_response

IDLE = sse_frame("stream_idle", {"idle_ms": 60000})


@pytest.fixture
async def client(mini: MiniWire, sleeps) -> Crouter:
    crouter = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleeps)
    yield crouter
    await crouter.aclose()


def turn(start: int, run_id: str = "run_1", text: str = "echo", node_id: str | None = None, **done: Any) -> list[bytes]:
    """A full root turn: started, two deltas, done, completed."""
    half = len(text) // 2
    completed = {"stop_reason": "end_turn", "error": None, "entry_id": "e1", **done}
    return [
        run_event(start, "node.turn.started", run_id, node_id, input={"text": "x", "message_ids": []}, entry_id="e1"),
        run_event(start + 1, "node.output_text.delta", run_id, node_id, delta=text[:half], entry_id="e1"),
        run_event(start + 2, "node.output_text.delta", run_id, node_id, delta=text[half:], entry_id="e1"),
        run_event(start + 3, "node.output_text.done", run_id, node_id, text=text, entry_id="e1"),
        run_event(start + 4, "node.turn.completed", run_id, node_id, **completed),
    ]


def after_of(request: httpx.Request) -> str | None:
    return request.url.params.get("after")


async def collect(stream) -> list[RunEvent]:
    return [event async for event in stream]


async def test_stream_reads_events_and_keeps_its_cursor(client, mini) -> None:
    mini.script("run.events", stream_response([*turn(1), IDLE]))
    stream = client.runs.events("run_1")
    events = await collect(stream)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[1].data == {"delta": "ec", "entry_id": "e1"} and events[1].node_id == "run_1"
    assert stream.cursor == 5 and stream.end_reason == "idle"
    _, request = mini.calls[0]
    assert request.headers["accept"] == "text/event-stream" and after_of(request) is None


async def test_a_dropped_connection_resumes_from_the_cursor_exactly_once(client, mini, sleeps) -> None:
    frames = turn(1)
    # the connection breaks in the middle of event 3
    mini.script("run.events", stream_response([*frames[:2], frames[2][:20]]), stream_response([*frames[2:], IDLE]))
    events = await collect(client.runs.events("run_1"))
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    second = mini.calls[1][1]
    assert after_of(second) == "2" and second.headers[wire.LAST_EVENT_ID] == "2"
    assert sleeps.waits == [0.25]


async def test_retryable_errors_reconnect_with_backoff_for_as_long_as_it_takes(client, mini, sleeps) -> None:
    mini.script("run.events", 503, 500, "unreachable", 429, envelope(409, "busy", retryable=True),
                stream_response([turn(1)[0], IDLE]))
    events = await collect(client.runs.events("run_1", after=0))
    assert [e.seq for e in events] == [1]
    assert sleeps.waits == [0.25, 0.5, 1.0, 2.0, 4.0]


async def test_the_server_retry_field_sets_the_backoff(client, mini, sleeps) -> None:
    mini.script("run.events", stream_response([b"retry: 1000\n\n", turn(1)[0]]), stream_response([IDLE]))
    await collect(client.runs.events("run_1"))
    assert sleeps.waits == [1.0]


async def test_a_non_retryable_error_ends_the_stream_with_its_error(client, mini, sleeps) -> None:
    mini.script("run.events", envelope(404, "run_not_found"))
    with pytest.raises(NotFoundError) as caught:
        await collect(client.runs.events("run_9"))
    assert caught.value.code == "run_not_found" and sleeps.waits == []


async def test_stream_error_raises_the_envelope_and_never_reconnects(client, mini, sleeps) -> None:
    frame = sse_frame("stream_error", {"error": envelope(401, "grant_revoked", retryable=True)})
    mini.script("run.events", stream_response([turn(1)[0], frame]))
    stream = client.runs.events("run_1")
    seen = []
    with pytest.raises(AuthenticationError) as caught:
        async for event in stream:
            seen.append(event.seq)
    assert seen == [1] and caught.value.code == "grant_revoked"
    assert mini.ops() == ["run.events"] and sleeps.waits == []


async def test_stream_dropped_ends_the_stream(client, mini) -> None:
    mini.script("run.events", stream_response([turn(1)[0], sse_frame("stream_dropped", {"reason": "deleted"})]))
    stream = client.runs.events("run_1")
    assert [e.seq for e in await collect(stream)] == [1]
    assert stream.end_reason == "dropped" and mini.ops() == ["run.events"]


async def test_stream_gap_is_surfaced_then_the_stream_goes_on(client, mini) -> None:
    gap = sse_frame("stream_gap", {"requested_after": 0, "first_available": 4})
    mini.script("run.events", stream_response([gap, *turn(4)[:2], IDLE]))
    events = await collect(client.runs.events("run_1", after=0))
    assert [(e.type, e.seq) for e in events] == [
        ("stream_gap", None),
        ("node.turn.started", 4),
        ("node.output_text.delta", 5),
    ]
    assert events[0].data == {"requested_after": 0, "first_available": 4}


async def test_a_401_when_opening_refreshes_once_through_oauth(oauth, mini) -> None:
    client = await oauth.client("user:o1")
    mini.script("run.events", envelope(401, "invalid_token"), stream_response([IDLE]))
    await collect(client.runs.events("run_1"))
    tokens = [req.headers["authorization"] for op, req in mini.calls if op == "run.events"]
    assert tokens == ["Bearer at_1", "Bearer at_2"]


# -- RunReply ------------------------------------------------------------------------------------


def message_answer(cursor: int) -> Any:
    return lambda request: httpx.Response(200, json={"message": {"id": "m1"}, "run": {"id": "run_1"}, "cursor": cursor})


async def test_reply_sends_a_turn_message_and_collects_the_root_turn(client, mini) -> None:
    mini.script("run.message", message_answer(7))
    mini.script("run.events", stream_response([*turn(8, text="echo: again")], hang=True))
    result = await client.runs.reply("run_1", "again").collect()
    assert result.status == "completed" and result.text == "echo: again" and result.error is None
    assert [e.seq for e in result.events] == [8, 9, 10, 11, 12]
    _, message = mini.calls[0]
    assert json.loads(message.content) == {"text": "again", "start_turn": True}
    assert message.headers[wire.IDEMPOTENCY_KEY]
    assert after_of(mini.calls[1][1]) == "7"


async def test_reply_ends_error_on_a_failed_turn(client, mini) -> None:
    mini.script("run.message", message_answer(0))
    failed = turn(1, text="", stop_reason="error", error={"code": "model_error", "message": "boom"})
    mini.script("run.events", stream_response([failed[0], failed[4]], hang=True))
    result = await client.runs.reply("run_1", "again").collect()
    assert result.status == "error" and result.error == {"code": "model_error", "message": "boom"}


async def test_child_node_events_never_complete_a_reply(client, mini) -> None:
    mini.script("run.message", message_answer(0))
    child = turn(1, text="child says", node_id="child-1")
    mini.script("run.events", stream_response([*child, *turn(6, text="root says")], hang=True))
    reply = client.runs.reply("run_1", "go")
    result = await reply.collect()
    assert result.text == "root says" and len(result.events) == 10
    assert reply.result is result


async def test_a_settle_before_the_turn_ends_the_reply_settled(client, mini) -> None:
    mini.script("run.message", message_answer(0))
    settled = run_event(2, "node.settled", outcome="canceled", failure="canceled")
    mini.script("run.events", stream_response([turn(1)[0], settled], hang=True))
    result = await client.runs.reply("run_1", "go").collect()
    assert result.status == "settled" and result.outcome == "canceled"


async def test_live_iteration_hands_out_deltas_and_survives_an_idle_close(client, mini) -> None:
    mini.script("run.message", message_answer(0))
    frames = turn(1, text="abcd")
    mini.script("run.events", stream_response([*frames[:2], IDLE]), stream_response([*frames[2:]], hang=True))
    reply = client.runs.reply("run_1", "go")
    types = [event.type async for event in reply]
    assert types == [
        "node.turn.started",
        "node.output_text.delta",
        "node.output_text.delta",
        "node.output_text.done",
        "node.turn.completed",
    ]
    assert after_of(mini.calls[2][1]) == "2"
    assert (await reply.collect()).text == "abcd"


async def test_a_refused_message_raises_and_no_stream_is_opened(client, mini) -> None:
    mini.script("run.message", envelope(409, "run_settled"))
    with pytest.raises(ConflictError):
        await client.runs.reply("run_1", "go").collect()
    assert mini.ops() == ["run.message"]


async def test_a_run_dropped_mid_reply_raises_not_found(client, mini) -> None:
    mini.script("run.message", message_answer(0))
    mini.script("run.events", stream_response([turn(1)[0], sse_frame("stream_dropped", {"reason": "deleted"})]))
    with pytest.raises(NotFoundError):
        await client.runs.reply("run_1", "go").collect()


# -- forward_run_events ---------------------------------------------------------------------------


async def test_forward_run_events_sends_each_event_and_returns_the_cursor(client, mini) -> None:
    mini.script("run.events", stream_response([*turn(3), IDLE]))
    sent: list[int | None] = []

    async def send(event: RunEvent) -> None:
        sent.append(event.seq)

    cursor = await forward_run_events(client, "run_1", send, after=2)
    assert sent == [3, 4, 5, 6, 7] and cursor == 7
    assert after_of(mini.calls[0][1]) == "2"
    mini.script("run.events", stream_response([IDLE]))
    assert await forward_run_events(client, "run_1", send, after=cursor) == 7


async def test_forward_run_events_stops_on_a_failing_send_without_advancing(client, mini) -> None:
    mini.script("run.events", stream_response([*turn(1), IDLE]))

    async def send(event: RunEvent) -> None:
        if event.seq == 3:
            raise RuntimeError("app is down")

    with pytest.raises(RuntimeError):
        await forward_run_events(client, "run_1", send)


QUIET_SCRIPT = """
import asyncio, sys
from services.sdk import Crouter
from tests.services.sdk.test_streams import turn
from tests.services.sdk.wirefake import RUNTIME, MiniWire, stream_response

seen = []

async def sleep(_seconds):
    await asyncio.sleep(0)

async def main(how):
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: seen.append(context))
    mini = MiniWire()
    mini.script("run.events", stream_response([*turn(1)], hang=True))  # a live stream: it goes on
    client = Crouter(runtime_url=RUNTIME, token="fixed-token", transport=mini.transport, sleep=sleep)
    if how == "break":
        async for event in client.runs.events("run_1"):
            if event.type == "node.turn.started":
                break
    else:
        stream = client.runs.events("run_1")
        await stream.__anext__()
        await stream.aclose()
        await client.aclose()

asyncio.run(main(sys.argv[1]))
print("handler saw:", [str(c.get("exception") or c.get("message")) for c in seen])
"""
"""A script that reads a live stream and stops early, as an app does: its own process, so the event loop
ends right after (asyncio then closes what was left suspended, and reports what fails to its handler)."""


@pytest.mark.parametrize("how", ["break", "aclose"])
def test_a_reader_that_stops_early_closes_its_stream_quietly(how: str) -> None:
    """issue 37: ``break`` out of ``async for`` printed ``generator didn't stop after athrow()`` at exit."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", QUIET_SCRIPT, how], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "handler saw: []", done.stdout + done.stderr
    assert "athrow" not in done.stderr and "Traceback" not in done.stderr, done.stderr
