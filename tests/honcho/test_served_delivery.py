"""The outbox delivering to a Honcho fake served by ANOTHER process, which dies mid-sweep (once by
its own SIGKILL between storing a batch and answering, once killed by the test after an answer)
and is started again on the same port over the same state file: every captured message reaches
the server exactly once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.changes import ChangeFeed
from services.honcho import FakeHonchoService
from services.knowledge.outbox import MemoryOutbox, OutboxSettings

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServedHoncho:
    """``python -m services.served.honcho`` in a child process, one life at a time."""

    def __init__(self, state: Path, port: int) -> None:
        self.state = state
        self.port = port
        self.proc: subprocess.Popen[str] | None = None
        self.lives = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.served.honcho", "--port", str(self.port),
             "--state", str(self.state), *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith("serving "), (line, self.proc.stderr.read() if self.proc.stderr else "")
        self.lives += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream:
                    stream.close()

    def stored(self, workspace: str) -> list[dict]:
        return FakeHonchoService(self.state).all_messages(workspace)


@pytest.fixture
def honcho(tmp_path: Path) -> Iterator[ServedHoncho]:
    server = ServedHoncho(tmp_path / "honcho-state.json", free_port())
    try:
        yield server
    finally:
        server.kill()


async def test_server_killed_and_restarted_mid_sweep_loses_and_duplicates_nothing(
        tmp_path: Path, honcho: ServedHoncho) -> None:
    settings = OutboxSettings(workspace_id="served", batch_limit=4, retry_attempts=2, retry_base_s=0.01,
                              retry_max_delay_s=0.05, retry_budget_s=1.0, representation_cache=False)
    sent_batches = 0

    def hook(step: str, conversation_id: str) -> None:
        nonlocal sent_batches
        if step == "sent" and honcho.lives == 2:
            sent_batches += 1
            if sent_batches == 2:
                honcho.kill()  # after an answer, before the ledger is written

    honcho.start("--die-after-batches", "3")
    box = await MemoryOutbox.open(tmp_path / "memory", ChangeFeed(), base_url=honcho.url, api_key="k",
                                  settings=settings, step_hook=hook)
    expected = []
    try:
        for conv in ("c1", "c2", "c3"):
            for turn in range(6):
                user, reply = f"{conv} turn {turn} asks", f"{conv} turn {turn} answers"
                await box.capture_turn(conv, "alice", [{"role": "user", "text": user},
                                                       {"role": "assistant", "text": reply}])
                expected += [user, reply]

        await box.sweep()  # life 1 dies by itself after storing its 3rd batch, before answering
        assert honcho.proc is not None and honcho.proc.wait(timeout=30) == -signal.SIGKILL
        honcho.kill()
        assert 0 < len(honcho.stored("served")) < len(expected)
        assert (await box.status()).pending_total > 0

        honcho.start()  # life 2: the test kills it after its 2nd answered batch
        await box.sweep()
        assert honcho.proc is not None and honcho.proc.poll() is not None
        assert (await box.status()).pending_total > 0

        honcho.start()  # life 3: stays up
        for _ in range(3):
            await box.sweep()
            if (await box.status()).pending_total == 0:
                break
        status = await box.status()
    finally:
        await box.aclose()
        honcho.kill()

    stored = honcho.stored("served")
    counts = Counter(m["content"] for m in stored)
    assert sorted(counts) == sorted(expected), "a captured message is missing on the server"
    assert [c for c, n in counts.items() if n > 1] == [], "a message was delivered twice"
    for conv in ("c1", "c2", "c3"):
        in_session = [m["content"] for m in stored if m["content"].startswith(conv + " ")]
        assert in_session == [e for e in expected if e.startswith(conv + " ")]
    assert status.pending_total == 0
    assert honcho.lives == 3
