"""The real command in a pseudo-terminal, its screen read back by a terminal emulator (pyte): the
panes fill, ``q`` restores the terminal and ends the process with status 0, and the workspace is left
closed (its rows kept for the next start, which draws them marked as from before)."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 180.0
"""How long a screen is waited for (the services import after the first frame; a loaded machine is slow)."""


class Window:
    """``python -m workbench`` on a 160x48 pseudo-terminal."""

    def __init__(self, folder: Path, config: Path) -> None:
        self.screen = pyte.Screen(160, 48)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen([sys.executable, "-m", "workbench", "--workspace", str(folder),
                                         "--config", str(config)], stdin=slave, stdout=slave, stderr=slave,
                                        env=env, cwd=ROOT, start_new_session=True)
        os.close(slave)
        self.master = master

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def read(self) -> bool:
        ready, _, _ = select.select([self.master], [], [], 1.0)
        if not ready:
            return True
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:
            return False
        self.raw += data
        self.stream.feed(data)
        return bool(data)

    def until(self, seen: Callable[[str], bool]) -> None:
        for _ in range(int(WAIT_S)):  # each read waits on the terminal for at most a second
            if seen(self.text()):
                return
            if not self.read() and not seen(self.text()):
                break
        raise AssertionError(f"never seen; the screen:\n{self.text()}\n{bytes(self.raw[-2000:])!r}")

    def finish(self) -> int:
        while self.read():
            pass
        code = self.process.wait(WAIT_S)
        os.close(self.master)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def live(text: str) -> bool:
    lines = text.splitlines()
    return "user:ada" in text and "opening" not in lines[0] and "as of" not in lines[0] and "judgments" in text


@pytest.mark.long
def test_q_restores_the_terminal_ends_the_process_and_the_next_start_draws_the_rows_kept(tmp_path: Path) -> None:
    folder, config = tmp_path / "ws", tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    window = Window(folder, config)
    try:
        window.until(live)
        os.write(window.master, b"q")
        assert window.finish() == 0
    finally:
        window.kill()
    assert b"\x1b[?1049l" in window.raw  # the alternate screen was left: the terminal is the operator's again
    assert (folder / "last-screen.json").is_file()

    again = Window(folder, config)
    try:
        again.until(lambda text: text.splitlines()[0].strip() != "")
        assert "as of " in again.text().splitlines()[0]  # the first frame: the rows kept, marked as from before
        again.until(live)  # the live state replaced the rows from before
        os.write(again.master, b"q")
        assert again.finish() == 0
    finally:
        again.kill()
