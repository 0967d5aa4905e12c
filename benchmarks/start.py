"""Start-up and quit as a user sees them: the real commands in a pseudo-terminal, the screen read by pyte.

Run: ``python benchmarks/start.py [--runs N] [--peer-venv DIR] [--no-peer]``.

Each figure is wall time from the process's start, read off the screen a terminal emulator (pyte)
rebuilds from what the process writes to a 160x48 pseudo-terminal; no pilot, nothing in process:

- first frame: anything drawn;
- panes filled: every pane shows its rows (for the workbench, either live or drawn from the
  workspace's last snapshot, marked "as of HH:MM:SS"); for the bare app, its first frame;
  for the peer, its first filled screen;
- live: the panes filled from the live state (no "as of" mark left), when keys act on it;
- key answered: ``4`` is sent when the first frame shows the panes' places, and answered when the
  grants pane is drawn as the active one (its border's colour changes, or its keys show in the
  footer; the bare app: its subtitle changes);
- quit: ``q`` is sent once the live state is drawn (and ``y`` when a confirmation asks); the
  screen restored (the alternate screen left) and the process gone, from that key.

The workbench opens a new folder (the sample world seeded) and reopens one, alternated with a bare
Header+Footer Textual app and a peer Textual application (Posting, installed once into a throwaway
virtual environment in ``--peer-venv``, default ``~/.cache/workbench-bench/posting-venv``), ``--runs``
times each; medians. The children may write compiled bytecode (``PYTHONDONTWRITEBYTECODE`` is
removed from their environment), as on a user's machine; one unmeasured round warms it first.
Then every row of the aims table, with its ratio to the bare app and to the peer.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from importlib import metadata
from dataclasses import dataclass, field
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parents[1]
COLUMNS, LINES = 160, 48
LIMIT = 60.0
"""Seconds a figure is waited for before the run is given up as failed."""

BARE = """
from textual.app import App
from textual.binding import Binding
from textual.widgets import Header, Footer
class Bare(App):
    TITLE = "bare"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("4", "four", "Four")]
    def compose(self):
        yield Header()
        yield Footer()
    def action_four(self):
        self.sub_title = "four pressed"
Bare().run()
"""

PANE_TITLES = ("canvas ·", "inbox ·", "runs", "grants", "judgments ·")


@dataclass
class Figures:
    """One run's figures, in seconds (None: not seen)."""

    first: float | None = None
    filled: float | None = None
    live: float | None = None
    key: float | None = None
    restored: float | None = None
    gone: float | None = None
    asked: bool = False
    marked: bool = False
    """The panes were first filled from the snapshot, marked as from before."""
    notes: list[str] = field(default_factory=list)


class Terminal:
    """A child process on a pseudo-terminal, and the screen pyte rebuilds from its output."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.start = time.perf_counter()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                        start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = bytearray()
        self.left_alternate: float | None = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def pump(self, timeout: float) -> bool:
        """Read what the child wrote within ``timeout``; False once it closed the terminal."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:
            return False
        if not data:
            return False
        tail = bytes(self.raw[-16:]) + data
        if self.left_alternate is None and b"\x1b[?1049l" in tail:
            self.left_alternate = self.elapsed()
        self.raw += data
        self.stream.feed(data)
        return True

    def until(self, seen: Callable[[str], bool], limit: float = LIMIT) -> float | None:
        """Pump until ``seen(screen text)``; the time from the start it was first true, None if never."""
        deadline = time.perf_counter() + limit
        while time.perf_counter() < deadline:
            if seen(self.text()):
                return self.elapsed()
            if not self.pump(0.005) and not seen(self.text()):
                return None
        return None

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait_gone(self, limit: float = LIMIT) -> float | None:
        deadline = time.perf_counter() + limit
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                return self.elapsed()
            self.pump(0.002)
        return None

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(LINES), COLORTERM="truecolor")
    env.pop("TEXTUAL", None)
    env.update(extra or {})
    return env


def workbench_filled(text: str) -> bool:
    lines = text.splitlines()
    body = "\n".join(lines[1:-1])
    return ("canvas ·" in body and "inbox ·" in body and " runs" in body and " grants" in body
            and "judgments ·" in body and "user:ada" in body and "opening the workspace…" not in body)


def workbench_live(text: str) -> bool:
    return workbench_filled(text) and "as of " not in text.splitlines()[0]


def run_workbench(command: list[str], folder: Path, *, config: Path) -> Figures:
    figures = Figures()
    env = child_env({"PYTHONPATH": str(ROOT)})
    term = Terminal([*command, "--workspace", str(folder), "--config", str(config)], env, ROOT)
    try:
        figures.first = term.until(lambda text: text.strip() != "")
        if figures.first is None:
            figures.notes.append("no first frame")
            return figures
        border = term.until(lambda text: _grants_row(text) is not None, 10) and _grants_row(term.text())
        colour = term.screen.buffer[border][0].fg if border else None
        term.send("4")
        deadline = time.perf_counter() + LIMIT
        while time.perf_counter() < deadline and None in (figures.filled, figures.live, figures.key):
            text = term.text()
            now = term.elapsed()
            if figures.filled is None and workbench_filled(text):
                figures.filled = now
                figures.marked = "as of " in text.splitlines()[0]
            if figures.live is None and workbench_live(text):
                figures.live = now
            if figures.key is None and ("Revoke" in text.splitlines()[-1]
                                        or border and term.screen.buffer[border][0].fg != colour):
                figures.key = now
            if not term.pump(0.005):
                break
        if figures.live is None:
            figures.notes.append("live state never drawn: " + term.text().splitlines()[0].strip())
            return figures
        _quit(term, figures, "q")
    finally:
        term.close()
    return figures


def _grants_row(text: str) -> int | None:
    """The screen row of the grants pane's heading (its left border shows which pane is active)."""
    return next((y for y, line in enumerate(text.splitlines()) if line.startswith("│  4  ")), None)


def _quit(term: Terminal, figures: Figures, key: str) -> None:
    sent = term.elapsed()
    term.send(key)
    deadline = time.perf_counter() + LIMIT
    while time.perf_counter() < deadline and term.process.poll() is None:
        term.pump(0.002)
        if not figures.asked and "Quit with work in flight" in term.text():
            figures.asked = True
            sent = term.elapsed()
            term.send("y")
    gone = term.elapsed() if term.process.poll() is not None else None
    figures.gone = None if gone is None else gone - sent
    figures.restored = None if term.left_alternate is None else max(0.0, term.left_alternate - sent)


def run_bare(python: str) -> Figures:
    figures = Figures()
    term = Terminal([python, "-c", BARE], child_env(), ROOT)
    try:
        figures.first = term.until(lambda text: "bare" in text)
        figures.filled = figures.live = figures.first
        term.send("4")
        figures.key = term.until(lambda text: "four pressed" in text)
        _quit(term, figures, "q")
    finally:
        term.close()
    return figures


def posting_filled(text: str) -> bool:
    return all(word in text for word in ("GET", "Collection", "Request", "Response", "Send", "^c Quit"))


def run_peer(posting: Path, home: Path) -> Figures:
    figures = Figures()
    env = child_env({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                     "XDG_DATA_HOME": str(home / ".local/share")})
    term = Terminal([str(posting)], env, home)
    try:
        figures.first = term.until(lambda text: text.strip() != "")
        figures.filled = figures.live = term.until(posting_filled)
        if figures.filled is None:
            figures.notes.append("posting never filled its screen:\n" + term.text())
            return figures
        _quit(term, figures, "\x03")  # ctrl+c quits Posting
    finally:
        term.close()
    return figures


def peer_command(venv: Path, install: bool) -> Path | None:
    posting = venv / "bin" / "posting"
    if posting.exists():
        return posting
    if not install:
        return None
    print(f"installing Posting into {venv} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # tree-sitter 0.26 crashes the Textual that Posting 2.11 pins (a segmentation fault drawing its
    # text areas): the release before it is the one that version was made with
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "posting", "tree-sitter<0.26"], check=True)
    return posting if posting.exists() else None


def median(values: list[float | None]) -> float | None:
    seen = [v for v in values if v is not None]
    return statistics.median(seen) if seen else None


def fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value * 1000:5.0f} ms"


def ratio(a: float | None, b: float | None) -> str:
    return " n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--peer-venv", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                        / "workbench-bench" / "posting-venv")
    parser.add_argument("--no-peer", action="store_true", help="leave Posting out")
    args = parser.parse_args()
    workbench = shutil.which("workbench", path=str(Path(sys.executable).parent)) or shutil.which("workbench")
    command = [workbench] if workbench else [sys.executable, "-m", "workbench"]
    posting = None if args.no_peer else peer_command(args.peer_venv, install=True)
    print(f"workbench: {' '.join(command)} (PYTHONPATH={ROOT}); peer: {posting or 'none'}")
    print(f"terminal {COLUMNS}x{LINES} (pyte {metadata.version('pyte')}); "
          f"compiled bytecode written by the children: "
          f"{'yes' if os.access(ROOT / 'services', os.W_OK) else 'no (the tree is read-only)'}")
    rows: dict[str, list[Figures]] = {"new": [], "reopen": [], "bare": [], "peer": []}
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        tmp_path = Path(tmp)
        config = tmp_path / "config.toml"
        config.write_text("", encoding="utf-8")
        reopen = tmp_path / "kept"
        home = tmp_path / "home"
        home.mkdir()
        for round_ in range(args.runs + 1):  # round 0 warms bytecode and creates the reopened folder
            order = [("new", lambda: run_workbench(command, tmp_path / f"new{round_}", config=config)),
                     ("reopen", lambda: run_workbench(command, reopen, config=config)),
                     ("bare", lambda: run_bare(sys.executable))]
            if posting is not None:
                order.append(("peer", lambda: run_peer(posting, home)))
            if round_ % 2:
                order.reverse()
            for name, run in order:
                figures = run()
                if figures.notes:
                    print(f"  {name}: {'; '.join(figures.notes)}", flush=True)
                if round_:
                    rows[name].append(figures)
            if round_:
                print(f"  round {round_}: " + "  ".join(
                    f"{name} {fmt(rows[name][-1].filled)}" for name in rows if rows[name]), flush=True)
    med = {name: {key: median([getattr(f, key) for f in figs])
                  for key in ("first", "filled", "live", "key", "restored", "gone")}
           for name, figs in rows.items()}
    print(f"\nmedians of {args.runs} (from process start; quit: from the key)")
    print(f"  {'':10} {'first frame':>12} {'panes filled':>13} {'live':>10} {'key answered':>13} "
          f"{'screen back':>12} {'gone':>10}")
    for name, label in (("bare", "bare app"), ("peer", "peer"), ("new", "new folder"), ("reopen", "reopen")):
        m = med[name]
        if not rows[name]:
            continue
        marked = sum(f.marked for f in rows[name])
        asked = sum(f.asked for f in rows[name])
        print(f"  {label:10} {fmt(m['first']):>12} {fmt(m['filled']):>13} {fmt(m['live']):>10} {fmt(m['key']):>13} "
              f"{fmt(m['restored']):>12} {fmt(m['gone']):>10}"
              + (f"  (snapshot first: {marked}/{len(rows[name])})" if marked else "")
              + (f"  (quit asked: {asked}/{len(rows[name])})" if asked else ""))
    bare, peer = med["bare"]["first"], med["peer"]["filled"]
    new, reo = med["new"], med["reopen"]
    quit_ = median([f.gone for f in rows["new"] + rows["reopen"]])
    print("\n| figure | now | aim |\n|---|---|---|")
    table = [
        ("reopen: panes filled (live, or marked as from before) ÷ bare app's first frame",
         ratio(reo["filled"], bare), "≤ 1.3x"),
        ("reopen: live state drawn, keys act ÷ bare app", ratio(reo["live"], bare), "≤ 2.0x"),
        ("new folder: panes filled with the sample world ÷ bare app", ratio(new["live"], bare), "≤ 2.0x"),
        ("reopen: panes filled ÷ the peer's first filled screen", ratio(reo["filled"], peer), "≤ 0.5x"),
        ("quit: process gone after `q` (after its confirmation)", fmt(quit_).strip(), "≤ 0.5 s"),
    ]
    for figure, now, aim in table:
        print(f"| {figure} | {now} | {aim} |")
    print(f"\nalso: reopen first frame ÷ bare {ratio(reo['first'], bare)}, key answered ÷ bare key "
          f"{ratio(reo['key'], med['bare']['key'])}; new folder panes filled ÷ peer {ratio(new['live'], peer)}; "
          f"quit screen back: new {fmt(new['restored']).strip()}, reopen {fmt(reo['restored']).strip()}, "
          f"bare {fmt(med['bare']['gone']).strip()} gone")


if __name__ == "__main__":
    main()
