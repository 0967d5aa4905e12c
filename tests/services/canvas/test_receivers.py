"""Receivers that deliver, on both engines: a ``url`` receiver POSTs each heard event to a real HTTP
server on a free loopback port (plain http is allowed on loopback only), retrying 5xx with
backoff; an ``argv`` receiver runs a real command without a shell, the event JSON on its stdin."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from services.canvas import Canvas, DocumentInvalidError, ReceiverAttempt

from .conftest import PREVIEW

pytestmark = pytest.mark.asyncio


class _Server:
    """A loopback HTTP server answering POSTs with the statuses queued in ``answers`` (then 200)."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.answers: list[int] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                status = server.answers.pop(0) if server.answers else 200
                if status == 200:
                    server.bodies.append(body)
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


async def _watched_doc(canvas: Canvas, watcher: str) -> str:
    doc = await canvas.write("plan", owner="user:o1", preview=PREVIEW, body="v1")
    await canvas.watch(doc.object.id, watcher=watcher, pattern="edited")
    return doc.object.id


async def test_a_url_receiver_gets_each_event_and_retries_5xx(canvas: Canvas, server: _Server) -> None:
    canvas.receivers.backoff = 0.01
    hook = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                               url=server.url)
    doc = await _watched_doc(canvas, hook.object.id)
    server.answers = [503, 502]
    await canvas.edit(doc, base_revision=1, body="v2")
    await canvas.receivers.drain()
    assert [b["event"] for b in server.bodies] == ["edited"]
    assert server.bodies[0]["object_id"] == doc and server.bodies[0]["receiver"] == hook.object.id
    attempts = await canvas.receiver_attempts(hook.object.id)
    assert [(a.attempt, a.outcome, a.status) for a in reversed(attempts)] == [
        (1, "retrying", 503), (2, "retrying", 502), (3, "delivered", 200)]
    assert (await canvas.inbox(hook.object.id)).unread == 0  # settled


async def test_a_url_receiver_gives_up_after_its_attempts_and_on_a_4xx(canvas: Canvas, server: _Server) -> None:
    canvas.receivers.backoff = 0.01
    canvas.receivers.max_attempts = 2
    hook = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                               url=server.url)
    doc = await _watched_doc(canvas, hook.object.id)
    server.answers = [500, 500, 404]
    await canvas.edit(doc, base_revision=1, body="v2")
    await canvas.receivers.drain()
    await canvas.edit(doc, base_revision=2, body="v3")
    await canvas.receivers.drain()
    attempts = [(a.attempt, a.outcome, a.status) for a in reversed(await canvas.receiver_attempts(hook.object.id))]
    assert attempts == [(1, "retrying", 500), (2, "failed", 500), (1, "failed", 404)]
    assert server.bodies == []


async def test_an_unreachable_url_is_retried_then_failed(canvas: Canvas) -> None:
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    canvas.receivers.backoff = 0.01
    canvas.receivers.max_attempts = 2
    hook = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                               url=f"http://127.0.0.1:{port}/")
    doc = await _watched_doc(canvas, hook.object.id)
    await canvas.edit(doc, base_revision=1, body="v2")
    await canvas.receivers.drain()
    attempts = list(reversed(await canvas.receiver_attempts(hook.object.id)))
    assert [a.outcome for a in attempts] == ["retrying", "failed"]
    assert "could not reach" in attempts[0].error


async def test_an_argv_receiver_runs_without_a_shell_with_the_event_on_stdin(canvas: Canvas, tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = ("import sys, json; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data + '\\n'); "
              "sys.stderr.write('seen ' + json.loads(data)['event'])")
    hook = await canvas.register_custom_object("acme.cmd", name="cmd", events={"ping": 3}, receiver="argv",
                                               argv=[sys.executable, "-c", script, str(out)], timeout=30)
    doc = await _watched_doc(canvas, hook.object.id)
    await canvas.edit(doc, base_revision=1, body="v2; $(touch pwned)")
    await canvas.receivers.drain()
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["event"] for g in got] == ["edited"]
    [attempt] = await canvas.receiver_attempts(hook.object.id)
    assert (attempt.outcome, attempt.status, attempt.error) == ("delivered", 0, "stderr: seen edited")
    assert not (tmp_path / "pwned").exists()


async def test_an_argv_receiver_keeps_a_failing_exit_and_a_timeout(canvas: Canvas) -> None:
    canvas.receivers.backoff = 0.01
    canvas.receivers.max_attempts = 2
    failing = await canvas.register_custom_object(
        "acme.cmd", name="failing", events={"ping": 3}, receiver="argv",
        argv=[sys.executable, "-c", "import sys; sys.stderr.write('no disk'); sys.exit(3)"])
    slow = await canvas.register_custom_object(
        "acme.cmd", name="slow", events={"ping": 3}, receiver="argv",
        argv=[sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    doc = await canvas.write("plan", owner="user:o1", preview=PREVIEW, body="v1")
    for hook in (failing, slow):
        await canvas.watch(doc.object.id, watcher=hook.object.id, pattern="edited")
    await canvas.edit(doc.object.id, base_revision=1, body="v2")
    await canvas.receivers.drain()
    [failed] = await canvas.receiver_attempts(failing.object.id)
    assert (failed.outcome, failed.status) == ("failed", 3) and "no disk" in failed.error
    timed = list(reversed(await canvas.receiver_attempts(slow.object.id)))
    assert [a.outcome for a in timed] == ["retrying", "failed"] and "timed out" in timed[0].error


async def test_the_queue_is_bounded_and_nothing_is_dropped(canvas: Canvas, server: _Server) -> None:
    canvas.receivers.queue_size = 2
    hook = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                               url=server.url)
    doc = await _watched_doc(canvas, hook.object.id)
    for revision in range(1, 8):
        await canvas.edit(doc, base_revision=revision, body=f"v{revision + 1}")
    await canvas.receivers.drain()
    assert len(server.bodies) == 7
    assert len({b["entry_id"] for b in server.bodies}) == 7


async def test_entries_heard_while_closed_are_delivered_at_the_next_open(canvas_url: str, server: _Server,
                                                                          clock) -> None:
    first = await Canvas.open(canvas_url, clock=clock)
    hook = await first.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                              url=server.url)
    doc = await _watched_doc(first, hook.object.id)
    first.receivers.active = False  # as if it closed before it could deliver
    await first.edit(doc, base_revision=1, body="v2")
    await first.close()
    assert server.bodies == []
    again = await Canvas.open(canvas_url, clock=clock)
    await again.receivers.drain()
    assert [b["event"] for b in server.bodies] == ["edited"]
    await again.close()


@pytest.mark.parametrize(("receiver", "options", "words"), [
    ("url", {"url": "http://example.com/hook"}, "must use https"),
    ("url", {"url": "ftp://127.0.0.1/x"}, "needs an https URL"),
    ("url", {}, "needs an https URL"),
    ("argv", {"argv": "echo hi"}, "list of strings"),
    ("argv", {"argv": []}, "list of strings"),
    ("argv", {"argv": ["echo"], "timeout": 0}, "timeout"),
    ("queue", {"url": "https://example.com"}, "url and argv go with"),
])
async def test_bad_receiver_settings_are_refused_and_nothing_is_registered(
        canvas: Canvas, receiver: str, options: dict, words: str) -> None:
    with pytest.raises(DocumentInvalidError, match=words):
        await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver=receiver,
                                            **options)
    assert await canvas.count_objects(type="custom") == 0


async def test_https_is_accepted_for_any_host(canvas: Canvas) -> None:
    view = await canvas.register_custom_object("acme.hook", name="hook", events={"ping": 3}, receiver="url",
                                               url="https://hooks.example.com/canvas")
    assert view.receiver == "url"


async def test_a_hung_argv_receiver_delays_only_itself(canvas: Canvas, server: _Server, tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    delivered = asyncio.Event()
    seen: list[ReceiverAttempt] = []

    def heard(attempt: ReceiverAttempt) -> None:  # called from the dispatcher's worker thread
        seen.append(attempt)
        if attempt.outcome == "delivered" and attempt.object_id == fast.object.id and len(server.bodies) == 3:
            loop.call_soon_threadsafe(delivered.set)

    canvas.receivers.on_attempt = heard
    canvas.receivers.max_attempts = 1
    release = tmp_path / "release"
    script = ("import os, sys, time\n"
              "sys.stdin.read()\n"
              f"while not os.path.exists({str(release)!r}):\n"
              "    time.sleep(0.02)\n")
    hung = await canvas.register_custom_object("acme.cmd", name="hung", events={"ping": 3}, receiver="argv",
                                               argv=[sys.executable, "-c", script], timeout=20)
    fast = await canvas.register_custom_object("acme.hook", name="fast", events={"ping": 3}, receiver="url",
                                               url=server.url)
    doc = await canvas.write("plan", owner="user:o1", preview=PREVIEW, body="v1")
    for hook in (hung, fast):  # the hung receiver's entries come first
        await canvas.watch(doc.object.id, watcher=hook.object.id, pattern="edited")
    for revision in range(1, 4):
        await canvas.edit(doc.object.id, base_revision=revision, body=f"v{revision + 1}")

    await delivered.wait()
    assert [a.object_id for a in seen] == [fast.object.id] * 3  # the hung one has not finished any
    assert [b["entry_id"] for b in server.bodies] == sorted(b["entry_id"] for b in server.bodies)
    release.write_text("go")
    await canvas.receivers.drain()
    hung_attempts = list(reversed(await canvas.receiver_attempts(hung.object.id)))
    assert [(a.outcome, a.status) for a in hung_attempts] == [("delivered", 0)] * 3
    assert [a.entry_id for a in hung_attempts] == sorted(a.entry_id for a in hung_attempts)
