"""Served workspaces of growing size: what a server, a window and the follower cost as history grows.

Run: ``python benchmarks/scale.py`` (10k and 100k events, a few minutes); ``--huge`` adds 1M events
(long: the build alone takes minutes); ``--sizes 10000,50000`` picks the sizes; ``--only pause,relaunch``
measures only those figures (the workspaces are built all the same). Each workspace is built as an
app builds one: ``workbench serve`` in a subprocess on a fresh folder, runs started through the
control API as the app (``POST /people/{user}/runs``) and their events emitted in batches of 1,000
(``POST /runs/{id}/emit``), 1,000 events a run: 90% text deltas, the rest text and step events.
``--per-run 10`` builds the same history as ten times as many runs of 10 events (9 deltas and a step):
the figures a workspace of many short runs costs (the runs list, a run's node and read each).

The figures, one function each (``FIGURES``):

- the build itself: events/s, and the time one more run (its start and its events) takes over the
  last tenth of the runs: what a run costs a server that already holds the others (aim: flat).
- ``restart``: the server stopped and started again on the workspace: seconds to ``serving``, and
  its memory (RSS) then.
- ``attach``: a window attaching (``Workspace.open`` on the folder, in a subprocess): seconds until
  it returns, the memory it adds to its process (RSS after the open less RSS before), and the
  server's memory after it (the attach lists every run; the server holds none of them for it).
- ``pause``: while that window attaches, another client calls ``GET /people`` over and over: the
  worst and the median latency it sees (the pause a big attach makes everyone else wait).
- ``follower``: the attaching window is the workspace's follower (a headless server): its catch-up
  of every run into the fresh canvas, as the canvas changes it applied per second (the events it
  records: text deltas and activity are not), and as the workspace's history it carried per second
  (every event it covered, deltas included: the unit the first figures of this catch-up counted in).
- ``relaunch``: the window opened again over the caught-up canvas: its attach (time, memory added:
  a window on a workspace in use), the follower's catch-up time (reading where the canvas is) and
  the changes it applies (aim: none).
- ``list``: the app (headless) opened on the folder: the time until its runs list is filled, the
  list drawn again whole (median of 5: what a new run or a status change costs it), and a run
  another client starts until its row is drawn (median of 5).
- ``stream``: one more run of 100,000 events; a window attached to the folder selects it by a key
  (from the row next to it): the time until its stream draws the run's newest events.

Last, each figure at the largest size divided by the same at the smallest (aim for the pause and
the relaunch: flat, about 1x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

PER_RUN = 1000
"""Events per run (and per emit batch)."""
PERSON = "user:ada"
"""The sample world's person the runs are started for."""

WINDOW = r"""
import asyncio, contextlib, json, sys, time
from pathlib import Path

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

async def main():
    from services.workspace import Workspace
    folder, wait_follower = sys.argv[1], sys.argv[2] == "1"
    before = rss()
    print(json.dumps({"ready": True}), flush=True)
    began = time.perf_counter()
    ws = await Workspace.open(Path(folder))
    opened = time.perf_counter()
    print(json.dumps({"attach_s": opened - began, "attach_rss": rss() - before}), flush=True)
    out = {}
    timeline = getattr(ws, "timeline", None)
    if timeline is not None:  # the history's baseline walks every run (a window holds only the newest)
        await timeline.settled()
    out["walked_s"] = time.perf_counter() - began
    out["walked_rss"] = rss() - before
    follower = ws.follower
    if follower is not None and wait_follower:
        await follower.idle()
        out["idle_s"] = time.perf_counter() - opened
        out["walked_rss"] = max(out["walked_rss"], rss() - before)
        # a catch-up made after the open returned is inside idle_s already
        out["catch_up_s"] = 0.0 if getattr(follower, "background", False) else getattr(follower, "catch_up_s", None)
        out["applied"] = getattr(follower, "applied", None)
    out["follower"] = follower is not None
    import ctypes, gc
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # the allocator's free pages given back: what is held
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    out["held_rss"] = rss() - before
    await ws.close()
    print(json.dumps(out), flush=True)

asyncio.run(main())
"""
"""A window in its own process: attaches to the served folder, reports, closes."""

STREAM = r"""
import asyncio, json, sys, time
from pathlib import Path

async def main():
    from workbench.app import make_app
    from services.workspace import Settings
    folder, run_id, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    app = make_app(Settings(path=folder))
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(3000):
            await pilot.pause(0.01)
            if app.workspace is not None and app.main.workspace is not None:
                break
        await pilot.press("3")
        pane = app.main.pane("runs")
        stream = app.main.query_one("#runs-stream")
        seq = app.workspace.desk.detail(run_id, events=False).seq
        while pane.workspace is None or run_id not in pane._order:
            await pilot.pause(0.01)
        times = []
        for _ in range(rounds):
            other = next(key for key in pane._order if key != run_id)
            pane.select_key(other)
            pane.focus_main()
            await pilot.pause()
            order = pane._order
            key = "up" if order.index(run_id) < order.index(other) else "down"
            while order.index(other) - order.index(run_id) not in (1, -1):  # the big run one row away
                other = order[order.index(run_id) + 1]
                pane.select_key(other)
                await pilot.pause()
            table = pane.query_one("#runs-table")
            began = time.perf_counter()
            # the key's own action, as the focused list runs it (Pilot's press adds its own waits)
            (table.action_cursor_up if key == "up" else table.action_cursor_down)()
            for _ in range(20000):
                if pane.selected == run_id and pane._seq >= seq and not stream.queued:
                    break
                await pilot.pause(0.001)
            await pilot.pause()  # the frame that draws it
            times.append(time.perf_counter() - began)
        print(json.dumps({"stream_s": sorted(times)[len(times) // 2], "stream_worst_s": max(times),
                          "stream_lines": len(stream.shown)}), flush=True)

asyncio.run(main())
"""
"""A window in its own process, attached to the served folder: a key selects the big run; the time
until its stream draws the run's newest events (its last screen), median and worst of a few rounds."""
LIST = r"""
import asyncio, json, statistics, sys, time
from pathlib import Path

async def main():
    import httpx
    from workbench.app import make_app
    from services.workspace import Settings
    folder = Path(sys.argv[1])
    began = time.perf_counter()
    app = make_app(Settings(path=folder))
    async with app.run_test(size=(160, 50)) as pilot:
        while app.workspace is None or app.main.workspace is None:
            await pilot.pause(0.01)
        pane = app.main.pane("runs")
        while pane.workspace is None or not pane._order:
            await pilot.pause(0.01)
        filled = time.perf_counter() - began
        await pilot.press("3")
        follower = getattr(app.workspace, "follower", None)
        if follower is not None:
            await follower.idle()  # the window's own catch-up done: what follows measures the list alone
        timeline = getattr(app.workspace, "timeline", None)
        if timeline is not None:
            await timeline.settled()  # and the baseline of its history (every run, the whole canvas) recorded
        await pilot.pause(1.0)
        reloads = []
        for _ in range(5):
            pane.forget_drawn()  # the whole list drawn again, as a new run or a status change draws it
            t = time.perf_counter()
            pane.reload()
            await pilot.pause()
            reloads.append(time.perf_counter() - t)
        info = json.loads((folder / "serve.json").read_text())
        news = []
        async with httpx.AsyncClient(base_url=info["url"] + "/_workbench/v1",
                                     headers={"Authorization": f"Bearer {info['token']}"}) as control:
            for number in range(5):
                t = time.perf_counter()
                run_id = (await control.post("/people/user:ada/runs", json={"prompt": f"new {number}"})).json()["run_id"]
                while run_id not in pane._order:
                    await pilot.pause(0.002)
                news.append(time.perf_counter() - t)
        print(json.dumps({"list_filled_s": filled, "list_reload_s": statistics.median(reloads),
                          "list_new_s": statistics.median(news), "list_rows": len(pane._order)}), flush=True)

asyncio.run(main())
"""
"""A window (the app, headless) attached to the folder: the time until its runs list is filled, a
whole redraw of the list (median of 5), and a run started by another client until its row is drawn."""
BIG = 100_000
"""The events of the one big run the ``stream`` figure selects."""


def rss_of(pid: int) -> int:
    """A process's resident memory, in bytes (0 where ``/proc`` is missing)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Server:
    """``workbench serve`` on a folder, in a subprocess."""

    def __init__(self, folder: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        began = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "workbench", "serve", "--workspace", str(folder),
                                      "--port", "0"], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("serving "):
                self.url = line.split(" ", 1)[1].strip()
                break
        else:
            raise RuntimeError(f"workbench serve on {folder} did not start")
        self.start_s = time.perf_counter() - began
        self.token = json.loads((folder / "serve.json").read_text())["token"]

    def client(self, timeout: float = 600.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url + "/_workbench/v1", timeout=timeout,
                                 headers={"Authorization": f"Bearer {self.token}"})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def batch() -> list[dict[str, Any]]:
    """One run's events (``PER_RUN``): per 100, 90 text deltas, a text and nine steps; in a run of fewer
    than 100, per 10, nine deltas and a step."""
    events: list[dict[str, Any]] = []
    if PER_RUN < 100:
        for block in range(PER_RUN // 10):
            entry = f"e{block}"
            events += [{"type": "node.output_text.delta", "fields": {"delta": "some streamed text, ", "entry_id": entry}}] * 9
            events.append({"type": "custom.step", "fields": {"step": block, "entry_id": entry}})
        return events
    for turn in range(PER_RUN // 100):
        entry = f"e{turn}"
        events += [{"type": "node.output_text.delta", "fields": {"delta": "some streamed text, ", "entry_id": entry}}] * 90
        events.append({"type": "node.output_text.done", "fields": {"text": "the whole text " * 4, "entry_id": entry}})
        events += [{"type": "custom.step", "fields": {"step": step, "entry_id": entry}} for step in range(9)]
    return events


async def build(server: Server, events: int) -> tuple[float, float]:
    """``events`` events in runs of ``PER_RUN``, made as an app makes them; answers events/s, and the
    seconds a run took (its start and its events) over the last tenth of the runs (what one more run
    costs a workspace that already holds the rest)."""
    body = {"events": batch()}
    runs = events // PER_RUN
    last = runs - max(1, runs // 10)
    began = time.perf_counter()
    late = began
    async with server.client() as control:
        for number in range(runs):
            if number == last:
                late = time.perf_counter()
            started = (await control.post(f"/people/{PERSON}/runs", json={"prompt": f"run {number}"})).json()
            answer = await control.post(f"/runs/{started['run_id']}/emit", json=body)
            answer.raise_for_status()
    done = time.perf_counter()
    return events / (done - began), (done - late) / (runs - last)


@dataclass
class Figures:
    """What one size measured, by name (seconds, bytes, counts)."""

    events: int
    values: dict[str, float] = field(default_factory=dict)


def window(folder: Path, *, wait_follower: bool, during: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """One window attaching in a subprocess; ``during`` runs (in a thread's loop) from just before the
    open until it returns, and its answer is returned as ``during``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WINDOW, str(folder), "1" if wait_follower else "0"],
                            cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline()).get("ready")
    measured: dict[str, Any] = {}
    if during is not None:
        import threading

        done = threading.Event()

        def watch() -> None:
            measured["during"] = asyncio.run(during(done))

        watcher = threading.Thread(target=watch)
        watcher.start()
    attached = proc.stdout.readline()  # the open returned: the other client stops measuring
    if during is not None:
        done.set()
        watcher.join()
    line = proc.stdout.readline()
    proc.wait(3600)
    if not attached or not line:
        raise RuntimeError("the window did not report")
    return {**json.loads(attached), **json.loads(line), **measured}


def latencies(server: Server) -> Callable[[Any], Any]:
    """Another client's ``GET /people`` calls, one after another until ``done`` is set: their latencies."""
    async def run(done: Any) -> list[float]:
        seen: list[float] = []
        async with server.client() as other:
            while not done.is_set():
                began = time.perf_counter()
                (await other.get("/people")).raise_for_status()
                seen.append(time.perf_counter() - began)
        return seen
    return run


# -- the figures, one function each -----------------------------------------------------------------


def figure_restart(folder: Path, figures: Figures, context: dict[str, Any]) -> None:
    """The server stopped and started again: seconds to ``serving``, and its memory then."""
    context["server"].stop()
    server = context["server"] = Server(folder)
    time.sleep(0.5)  # settled after the start
    figures.values["restart_s"] = server.start_s
    figures.values["server_rss"] = rss_of(server.proc.pid)


def figure_attach_and_pause(folder: Path, figures: Figures, context: dict[str, Any], *, wait_follower: bool) -> None:
    """A window's attach (time, memory added), the latency another client sees meanwhile, and (the
    window being the follower) its catch-up into the fresh canvas."""
    answer = window(folder, wait_follower=wait_follower, during=latencies(context["server"]))
    figures.values["attach_s"] = answer["attach_s"]
    figures.values["attach_rss"] = answer["attach_rss"]
    figures.values["walked_s"] = answer["walked_s"]
    figures.values["walked_rss"] = answer["walked_rss"]
    figures.values["held_rss"] = answer["held_rss"]
    figures.values["server_rss_attached"] = rss_of(context["server"].proc.pid)
    seen = answer["during"]
    if seen:
        figures.values["pause_worst_s"] = max(seen)
        figures.values["pause_median_s"] = statistics.median(seen)
        figures.values["pause_calls"] = len(seen)
    if wait_follower and answer.get("follower"):
        total = answer["idle_s"] + (answer.get("catch_up_s") or 0.0)
        figures.values["follower_s"] = total
        if answer.get("applied") is not None:
            figures.values["follower_applied"] = answer["applied"]
            figures.values["follower_rate"] = answer["applied"] / total if total else 0.0
        figures.values["follower_history_rate"] = figures.events / total if total else 0.0


def figure_relaunch(folder: Path, figures: Figures, context: dict[str, Any]) -> None:
    """The window opened again over the caught-up canvas: its attach (time, memory added), and the
    follower's catch-up time and writes."""
    answer = window(folder, wait_follower=True)
    figures.values["reattach_s"] = answer["attach_s"]
    figures.values["reattach_rss"] = answer["attach_rss"]
    if answer.get("follower"):
        figures.values["relaunch_s"] = answer["idle_s"] + (answer.get("catch_up_s") or 0.0)
        if answer.get("applied") is not None:
            figures.values["relaunch_applied"] = answer["applied"]


def figure_stream(folder: Path, figures: Figures, context: dict[str, Any]) -> None:
    """A run of ``BIG`` events made next to the others; a window attached to the folder selects it by
    a key: the time until its stream draws the run's newest events."""
    server = context["server"]
    body = {"events": batch()}

    async def make() -> str:
        async with server.client() as control:
            started = (await control.post(f"/people/{PERSON}/runs", json={"prompt": "the big one"})).json()
            for _ in range(BIG // PER_RUN):
                (await control.post(f"/runs/{started['run_id']}/emit", json=body)).raise_for_status()
            return str(started["run_id"])

    run_id = asyncio.run(make())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", STREAM, str(folder), run_id, "5"], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=1800)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the stream window did not report: {out.stderr[-2000:]}")
    answer = json.loads(lines[-1])
    figures.values["stream_s"] = answer["stream_s"]
    figures.values["stream_worst_s"] = answer["stream_worst_s"]


def figure_list(folder: Path, figures: Figures, context: dict[str, Any]) -> None:
    """The app's runs list over the folder: filled, redrawn whole, and a new run's row drawn."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", LIST, str(folder)], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=1800)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the list window did not report: {out.stderr[-2000:]}")
    figures.values.update(json.loads(lines[-1]))


FIGURES = ("restart", "attach", "pause", "follower", "relaunch", "list", "stream")
"""Every figure's name, for ``--only``."""

ROWS: list[tuple[str, str, str, str]] = [
    # (value key, label, unit, aim)
    ("build_rate", "build through the control API", "events/s", ""),
    ("run_s", "one more run (start, emit), the build's last tenth", "ms", "flat"),
    ("restart_s", "server restart to `serving`", "s", ""),
    ("server_rss", "server memory after start", "MiB", ""),
    ("attach_s", "window attach (Workspace.open)", "s", ""),
    ("attach_rss", "memory the window adds", "MiB", ""),
    ("walked_s", "the window's history baseline over every run done, from the attach's start", "s", ""),
    ("walked_rss", "memory the window adds once its readers walked every run", "MiB", ""),
    ("held_rss", "what it holds then (the allocator's free pages given back)", "MiB", "< 100 MiB at 1M"),
    ("server_rss_attached", "server memory after that attach (it read every run)", "MiB", "< 200 MiB"),
    ("pause_worst_s", "another client's worst latency during an attach", "ms", "< 50 ms at 100k, flat"),
    ("pause_median_s", "another client's median latency during an attach", "ms", ""),
    ("pause_calls", "another client's calls answered during the attach", "calls", ""),
    ("follower_rate", "follower catch-up into a fresh canvas", "changes/s", ""),
    ("follower_applied", "changes it applied", "changes", ""),
    ("follower_history_rate", "the history it carried (every event, deltas too)", "events/s", ""),
    ("follower_s", "its catch-up time", "s", ""),
    ("relaunch_s", "relaunch catch-up over a caught-up canvas", "s", "no canvas work"),
    ("relaunch_applied", "changes the relaunch applied", "changes", "0"),
    ("reattach_s", "window attach over a caught-up canvas", "s", "< 1.5 s at 1M"),
    ("reattach_rss", "memory that window adds", "MiB", "< 100 MiB at 1M"),
    ("list_filled_s", "the app's runs list filled, from launch", "s", ""),
    ("list_reload_s", "the runs list drawn again whole, median", "ms", "flat"),
    ("list_new_s", "another client's new run -> its row drawn, median", "ms", "flat"),
    ("list_rows", "rows the runs list's table holds", "rows", ""),
    ("stream_s", "key -> a 100k-event run's stream drawn, median", "ms", "< 100 ms"),
    ("stream_worst_s", "the same, worst of 5", "ms", ""),
]


def shown(key: str, unit: str, value: float) -> str:
    if unit == "MiB":
        return f"{value / 2**20:.0f} MiB"
    if unit == "ms":
        return f"{value * 1000:.1f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:,.0f} {unit}"


def measure(events: int, only: set[str]) -> Figures:
    figures = Figures(events)
    with tempfile.TemporaryDirectory(prefix="scale-") as scratch:
        folder = Path(scratch) / "ws"
        context: dict[str, Any] = {"server": Server(folder)}
        try:
            figures.values["build_rate"], figures.values["run_s"] = asyncio.run(build(context["server"], events))
            print(f"  built {events:,} events ({figures.values['build_rate']:,.0f} events/s)", flush=True)
            if "restart" in only:
                figure_restart(folder, figures, context)
            if only & {"attach", "pause", "follower", "relaunch"}:
                # the first window to attach to the headless server follows its runs into the canvas
                figure_attach_and_pause(folder, figures, context, wait_follower=bool(only & {"follower", "relaunch"}))
            if "relaunch" in only:
                figure_relaunch(folder, figures, context)
            if "list" in only:
                figure_list(folder, figures, context)
            if "stream" in only:
                figure_stream(folder, figures, context)
        finally:
            context["server"].stop()
    return figures


def main() -> None:
    global PER_RUN
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="events per workspace, comma-separated")
    parser.add_argument("--huge", action="store_true", help="add a workspace of 1,000,000 events (long)")
    parser.add_argument("--only", default=",".join(FIGURES), help=f"figures to measure, of {', '.join(FIGURES)}")
    parser.add_argument("--per-run", type=int, default=PER_RUN,
                        help="events per run: 1000 (the default) or a multiple of 100; 10 for many short runs")
    args = parser.parse_args()
    if args.per_run != 10 and (args.per_run < 100 or args.per_run % 100):
        parser.error("--per-run is 10, or a multiple of 100")
    PER_RUN = args.per_run
    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | ({1_000_000} if args.huge else set()))
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = only - set(FIGURES)
    if unknown:
        parser.error(f"no figure {', '.join(sorted(unknown))}; one of {', '.join(FIGURES)}")
    results = []
    for events in sizes:
        print(f"{events:,} events ({events // PER_RUN:,} runs of {PER_RUN:,}):", flush=True)
        figures = measure(events, only)
        results.append(figures)
        for key, label, unit, aim in ROWS:
            if key in figures.values:
                print(f"  {label:52} {shown(key, unit, figures.values[key]):>18}" + (f"   (aim: {aim})" if aim else ""),
                      flush=True)
    if len(results) > 1:
        small, large = results[0], results[-1]
        print(f"each figure at {large.events:,} events / the same at {small.events:,}:")
        for key, label, _, _ in ROWS:
            if key in small.values and key in large.values and small.values[key]:
                print(f"  {label:52} {large.values[key] / small.values[key]:>10.2f}x")


if __name__ == "__main__":
    main()
