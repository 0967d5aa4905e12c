"""Served-cloud fixtures: ``workbench serve`` and app processes, bounded in time and always stopped."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.toasts import record_toasts

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def kept_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every toast a window here raises is kept for the test (``tests.toasts.said``), past its own timeout."""
    record_toasts(monkeypatch)


class Proc:
    """A subprocess whose stdout lines arrive on a queue (read with a timeout)."""

    def __init__(self, args: list[str], *, stdin: bool = False) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
        self.popen = subprocess.Popen(
            args, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._pump, args=(self.popen.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    @staticmethod
    def _pump(stream: Any, sink: "queue.Queue[str | None]") -> None:
        for line in stream:
            sink.put(line.rstrip("\n"))
        sink.put(None)

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.errors.append(line)

    def line(self, timeout: float = WAIT_S) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout}s; stderr: {''.join(self.errors)[-2000:]}") from None
        if line is None:
            raise AssertionError(f"the process ended; stderr: {''.join(self.errors)[-2000:]}")
        return line

    def json(self, timeout: float = WAIT_S) -> dict[str, Any]:
        return json.loads(self.line(timeout))

    def send(self, value: dict[str, Any]) -> dict[str, Any]:
        """Write one command and read its one-line answer."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(value) + "\n")
        self.popen.stdin.flush()
        return self.json()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)


def workbench(*args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
    """Run ``workbench ARGS`` to its end."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


class Served:
    """A ``workbench serve`` process on a workspace, with its URL once it printed ``serving``."""

    def __init__(self, folder: Path, *extra: str, port: int = 0) -> None:
        self.folder = folder
        self.proc = Proc([sys.executable, "-m", "workbench", "serve", "--workspace", str(folder),
                          "--port", str(port), *extra])
        line = self.proc.line()
        assert line.startswith("serving http://"), line
        self.url = line.split(" ", 1)[1]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.info = json.loads((folder / "serve.json").read_text())


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Every process a test starts; each one is stopped (then killed) when the test ends."""
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


@pytest.fixture
def serve(procs: list[Proc]):  # type: ignore[no-untyped-def]
    """``serve(folder, *extra, port=0)`` starts ``workbench serve`` and waits until it serves."""

    def start(folder: Path, *extra: str, port: int = 0) -> Served:
        served = Served(folder, *extra, port=port)
        procs.append(served.proc)
        return served

    return start


@pytest.fixture
def app(procs: list[Proc]):  # type: ignore[no-untyped-def]
    """``app()`` starts an app process (``app_process.py``) speaking the SDK over HTTP."""

    def start() -> Proc:
        proc = Proc([sys.executable, str(HERE / "app_process.py")], stdin=True)
        procs.append(proc)
        return proc

    return start
