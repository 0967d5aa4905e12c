"""The time cursor at scale: a workspace of 100,000 run events and 100,000 canvas objects, its history
kept as the window keeps it, then in a real window (headless):

- now: every pane redrawn from the live services (the baseline each time-mode figure is set beside);
- one change back (``[``): the cursor moved and every pane redrawn from the history (aim: median
  < 50 ms, worst < 100 ms);
- an hour back (``g -1h``): a jump and every pane redrawn (aim < 200 ms);
- the filter and diff figures of ``benchmarks/filters.py`` (a filter of three fields over 10,000
  runs, aim < 20 ms; two runs of 10,000 events compared, first screen drawn, aim < 200 ms).

It also prints what keeping the history costs: the baseline's time for the whole canvas, the events
recorded per second while the runs stream, and the history file's size.

    PYTHONPATH=. python benchmarks/time.py [--objects 100000] [--events 100000] [--moves 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.canvas import Canvas  # noqa: E402
from services.clock import FakeClock  # noqa: E402
from services.desk import is_system  # noqa: E402
from services.workspace import Settings, Workspace  # noqa: E402

START = 1_800_000_000.0
SPAN_S = 2 * 3600.0
"""The runs' events are spread over two hours of the clock, so an hour back lands among them."""
CHUNKS = 500
PROFILE = False
"""``--profile``: print where one change back spends its time (needs pyinstrument)."""
"""Events one reply streams (its text deltas)."""


async def build(folder: Path, objects: int, events: int, clock: FakeClock) -> dict[str, float]:
    """A workspace with ``objects`` canvas objects and ``events`` run events, its history kept."""
    from benchmarks.canvas import build as fill_canvas

    settings = Settings(path=folder, clock=clock)
    ws = await Workspace.open(settings=settings)
    await ws.close()
    canvas = await Canvas.open(folder / "canvas.db")
    fill_canvas(canvas, objects, objects // 5)
    await canvas.close()
    figures: dict[str, float] = {}
    started = time.perf_counter()
    ws = await Workspace.open(settings=settings)
    try:
        assert ws.timeline is not None
        await ws.timeline.settled()
        figures["history baseline of the whole workspace, s"] = time.perf_counter() - started
        person = next(g.user_id for g in ws.desk.grants() if not is_system(g.user_id))
        made = 0
        started = time.perf_counter()
        step = SPAN_S * CHUNKS / events
        while made < events:
            live = [v for v in ws.desk.runs() if not v.system and v.status == "idle"]
            run_id = live[0].id if live else await ws.desk.start_run(person, f"question {made}")
            before = ws.desk.view(run_id).events
            await ws.desk.reply(run_id, "word " * CHUNKS, chunks=CHUNKS)
            made += ws.desk.view(run_id).events - before
            clock.advance(step)
            if ws.follower is not None:
                await ws.follower.idle()
        await ws.timeline.settled()
        took = time.perf_counter() - started
        figures["run events streamed and recorded, events/s"] = made / took
        figures["run events made"] = made
    finally:
        await ws.close()
    figures["history file, MB"] = sum(p.stat().st_size for p in folder.glob("history.db*")) / 1e6
    return figures


async def measure(folder: Path, clock: FakeClock, moves: int) -> dict[str, list[float]]:
    from textual.widgets import DataTable

    from screens.time import TimeScreen
    from tests.ui.conftest import ready, settle
    from workbench.app import make_app

    app = make_app(Settings(path=folder, clock=clock))
    out: dict[str, list[float]] = {"now": [], "step": [], "hour": [], "reopen": [], "floor": []}
    async with app.run_test(size=(200, 60)) as pilot:
        ws = await ready(pilot)
        started = time.perf_counter()
        await ws.timeline.settled()  # the history's own start (its baseline) is not what is measured here
        out["reopen"] = [(time.perf_counter() - started) * 1000]
        main = app.main
        for _ in range(max(5, moves // 4)):
            started = time.perf_counter()
            for pane_id in ("canvas", "inbox", "runs", "grants", "judgments"):
                main.pane(pane_id).reload()
            await settle(pilot, 1)
            out["now"].append((time.perf_counter() - started) * 1000)
        await pilot.press("H")
        await settle(pilot, 5)
        screen = app.screen
        assert isinstance(screen, TimeScreen)
        runs = screen.query_one("#time-runs", DataTable)
        busiest = max(screen.shown["time-runs"], key=lambda k: int(str(runs.get_row(k)[3])))
        runs.move_cursor(row=screen.shown["time-runs"].index(busiest))  # the stream of a run with thousands of events
        await settle(pilot)
        for _ in range(moves):  # the floor: a frame with nothing to redraw
            started = time.perf_counter()
            await screen.redraw()
            await pilot.pause()
            out["floor"].append((time.perf_counter() - started) * 1000)
        profiler = None
        if PROFILE:
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="disabled")
            profiler.start()
        for _ in range(moves):
            started = time.perf_counter()
            await screen.cursor.step(-1)
            await screen.redraw()
            await pilot.pause()
            out["step"].append((time.perf_counter() - started) * 1000)
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=False, color=False, show_all=False))
        for _ in range(5):
            await screen.cursor.to_now()
            newest = await screen.cursor.newest_at()
            assert newest is not None
            started = time.perf_counter()
            await screen.cursor.jump(newest - 3600.0)
            await screen.redraw()
            await pilot.pause()
            out["hour"].append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print a profile of the steps back (pyinstrument)")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    with tempfile.TemporaryDirectory(prefix="workbench-time-") as tmp:
        folder = Path(tmp) / "ws"
        clock = FakeClock(START)
        figures = asyncio.run(build(folder, args.objects, args.events, clock))
        print(f"workspace: {args.objects:,} canvas objects, {int(figures.pop('run events made')):,} run events")
        for name, value in figures.items():
            print(f"  {name}: {value:,.1f}")
        times = asyncio.run(measure(folder, clock, args.moves))
    print(f"history baseline when the window opens again (after the window is ready): {times['reopen'][0] / 1000:.1f} s")
    now = statistics.median(times["now"])
    step = times["step"]
    hour = times["hour"]
    print(f"every pane redrawn now (live services): median {now:.1f} ms")
    print(f"one change back, every pane redrawn from the history: median {statistics.median(step):.1f} ms, "
          f"worst {max(step):.1f} ms (aim < 50 ms median, < 100 ms worst; {statistics.median(step) / now:.2f}x now)")
    print(f"  of which a redraw with nothing changed (the history read, the frame): median "
          f"{statistics.median(times['floor']):.1f} ms")
    print(f"an hour back, every pane redrawn: median {statistics.median(hour):.1f} ms, worst {max(hour):.1f} ms "
          f"(aim < 200 ms; {statistics.median(hour) / now:.2f}x now)")
    from benchmarks.filters import main as filters

    filters()

if __name__ == "__main__":
    main()
