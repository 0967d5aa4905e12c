"""UI figures in one run: cold start to first frame, stream absorption under key presses, big canvas.

Run: ``python benchmarks/ui.py [--runs N] [--rates R1,R2,..] [--seconds S] [--objects N]``.

1. Process start -> first painted frame (headless), the workbench beside a bare Textual app with
   a Header and a Footer, alternated ``--runs`` times; medians and their ratio (aim: 1.2x or under),
   the ratio of the fastest runs and of each pair, and the CPU time each process had used by its first
   frame (on a machine others load, CPU time varies far less than wall time). Also whether sqlmodel /
   jwt were imported before the first frame (they should not be).
2. For each of ``--rates`` (a sweep up to 150,000 events/s), a producer appends that many events/s for
   ``--seconds`` to the selected run (in batches every 10 ms) while a key (``p``) is pressed every
   100 ms; prints the rate offered (the producer, ``FakeRun.emit`` on the same loop, may not reach the
   rate asked; each burst is appended at once with ``FakeRun.emit_many``, or event by event with
   ``--per-event``), the rate absorbed into the stream, how long after the last event was emitted it was
   shown, key press -> handler and key press -> the next frame written after the handler (median /
   worst), after one unreported warm-up round; then the highest rate kept up with (last event shown
   within 250 ms) while every key reached a frame under 50 ms with a median under 16 ms (aim:
   100,000 events/s). ``--only-stream`` prints just these; run it for two commits with
   ``benchmarks/compare.sh`` or side by side (``PYTHONPATH=/work/base25 python benchmarks/ui.py``).
3. A ``--objects`` canvas (built with ``benchmarks/canvas.py``'s bulk builder, or ``--canvas-db``, a
   file ``benchmarks/canvas.py --db`` built): time to open the canvas pane (tree roots, counts, first
   object with its neighbourhood) and to apply a filter (aim: under 100 ms each at 1,000,000 objects;
   nothing off-screen is built), on each of ``--canvas-engines`` (``postgresql``: a fresh schema of
   ``WORKBENCH_TEST_PG_URL``). ``--only-canvas`` prints just these.
1b. A new workspace (the sample world seeded) opened in process: ``Workspace.open`` on a fresh
   folder beside opening the same folder again (nothing left to seed), ``--open-rounds`` times
   alternated; medians, their ratio, and the aim (under 1 s). ``--only-start`` prints just 1 and 1b.
4. A second window on a served workspace: the time to attach (beside opening a window with its
   own cloud, same run), and from a reply made in one window to it drawn in the other's run stream
   (aim: under 1 s and under 100 ms). ``--only-attach`` prints just these.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BARE = """
import time, sys
t0 = time.perf_counter()
from textual.app import App
from textual.widgets import Header, Footer
class Bare(App):
    def compose(self):
        yield Header()
        yield Footer()
    def on_mount(self):
        self.call_after_refresh(self.done)
    def done(self):
        print("frame", time.perf_counter() - t0, "sqlmodel" in sys.modules, "jwt" in sys.modules, time.process_time(),
              flush=True)
        self.exit()
Bare().run(headless=True)
"""

WORKBENCH = """
import time, sys, tempfile
t0 = time.perf_counter()
from pathlib import Path
try:
    from services.settings import Settings  # as the CLI does (a commit before it: from the workspace module)
except ImportError:
    from services.workspace import Settings
from workbench.app import WorkbenchApp
class First(WorkbenchApp):
    def on_mount(self):  # Textual calls WorkbenchApp.on_mount too (handlers run down the MRO)
        self.call_after_refresh(self.done)
    def done(self):
        print("frame", time.perf_counter() - t0, "sqlmodel" in sys.modules, "jwt" in sys.modules, time.process_time(),
              flush=True)
        self.built_at = None
        self.set_interval(0.002, self.later)
    def later(self):
        if self.built_at is None and all(getattr(p, "built", False) for p in self.main.query("#body > .pane")):
            self.built_at = time.perf_counter() - t0
        if self.built_at is not None and self.main.workspace is not None:
            print("later", self.built_at, time.perf_counter() - t0, flush=True)
            self.exit()
First(settings=Settings(path=Path(tempfile.mkdtemp()) / "ws")).run(headless=True)
"""


def first_frame(code: str) -> tuple[float, bool, bool, tuple[float, ...], float]:
    """Wall seconds from spawning the process to its first frame; sqlmodel / jwt imported by then;
    the later marks the process prints (in seconds since its own start); and the CPU seconds the
    process had used by its first frame (less sensitive than wall time to other load on the machine)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    elapsed, sqlmodel, jwt, later, cpu = None, "", "", (), 0.0
    for line in proc.stdout:
        if line.startswith("frame"):
            elapsed = time.perf_counter() - start
            _, in_process, sqlmodel, jwt, cpu_text = line.split()
            cpu = float(cpu_text)
            offset = elapsed - float(in_process)  # interpreter start, before the script's clock began
        elif line.startswith("later") and elapsed is not None:
            later = tuple(float(x) + offset for x in line.split()[1:])
    proc.wait()
    if elapsed is None:
        raise RuntimeError("the app exited without a first frame")
    return elapsed, sqlmodel == "True", jwt == "True", later, cpu


def startup(runs: int) -> None:
    bare, bench, built, ready, heavy = [], [], [], [], set()
    bare_cpu, bench_cpu, paired = [], [], []
    for _ in range(runs):
        elapsed, _sqlmodel, _jwt, _later, cpu = first_frame(BARE)
        bare.append(elapsed)
        bare_cpu.append(cpu)
        elapsed, sqlmodel, jwt, later, cpu = first_frame(WORKBENCH)
        bench.append(elapsed)
        bench_cpu.append(cpu)
        paired.append(bench[-1] / bare[-1])
        built.append(later[0])
        ready.append(later[1])
        heavy.update(name for name, seen in (("sqlmodel", sqlmodel), ("jwt", jwt)) if seen)
    b, w = statistics.median(bare), statistics.median(bench)
    bc, wc = statistics.median(bare_cpu), statistics.median(bench_cpu)
    print(f"1. start -> first frame ({runs} runs each, headless, alternated)")
    print(f"   bare Header+Footer app: {b * 1000:.0f} ms (min {min(bare) * 1000:.0f}), CPU {bc * 1000:.0f} ms "
          f"(min {min(bare_cpu) * 1000:.0f})")
    print(f"   workbench:              {w * 1000:.0f} ms (min {min(bench) * 1000:.0f}), CPU {wc * 1000:.0f} ms "
          f"(min {min(bench_cpu) * 1000:.0f})")
    print(f"   ratio {w / b:.2f}x (aim <= 1.2x); mins {min(bench) / min(bare):.2f}x; paired runs median "
          f"{statistics.median(paired):.2f}x; CPU {wc / bc:.2f}x (mins {min(bench_cpu) / min(bare_cpu):.2f}x)")
    print(f"   imported before the first frame: {', '.join(sorted(heavy)) or 'neither sqlmodel nor jwt'}")
    print(f"   then every pane's widgets mounted at {statistics.median(built) * 1000:.0f} ms; a new workspace "
          f"(sample world seeded) open at {statistics.median(ready) * 1000:.0f} ms")


async def workspace_open(rounds: int) -> None:
    """A new workspace's open (the sample world seeded) beside a reopen of the same folder."""
    try:
        from services.settings import Settings
    except ImportError:  # a commit before the settings module
        from services.workspace import Settings
    from services.workspace import Workspace, import_services

    import_services()  # the imports are the first frame's business (figure 1), not the open's
    fresh, again = [], []
    for _ in range(rounds + 1):  # the first round warms caches and is not reported
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(path=Path(tmp) / "ws")
            for times in (fresh, again):
                start = time.perf_counter()
                workspace = await Workspace.open(settings=settings)
                times.append(time.perf_counter() - start)
                await workspace.close()
    fresh, again = fresh[1:], again[1:]
    f, a = statistics.median(fresh), statistics.median(again)
    print(f"1b. workspace open in process ({rounds} rounds, after one unreported)")
    print(f"   new (sample world seeded): {f * 1000:.0f} ms (min {min(fresh) * 1000:.0f})   aim < 1000 ms")
    print(f"   reopened (nothing to seed): {a * 1000:.0f} ms (min {min(again) * 1000:.0f})   new/reopened {f / a:.2f}x")


async def stream(rates: list[int], seconds: float, per_event: bool = False) -> None:
    from services.clock import FakeClock
    from services.workspace import Settings
    from screens.widgets.stream import EventStream
    from workbench.app import make_app

    from services.cloud.runs import FakeRun

    batched = not per_event and hasattr(FakeRun, "emit_many")  # a commit before it: one by one
    how = "each 10 ms burst appended at once (FakeRun.emit_many)" if batched else "one FakeRun.emit per event"
    print(f"2. live stream: events offered to the selected run for {seconds:.0f} s while `p` is pressed every 100 ms "
          f"({how})")
    with tempfile.TemporaryDirectory() as tmp:
        app = make_app(Settings(path=Path(tmp) / "ws", clock=FakeClock()))
        async with app.run_test(size=(120, 40)) as pilot:
            while app.main.workspace is None:
                await pilot.pause(0.05)
            ws = app.workspace
            pane = app.main.pane("runs")
            stream_widget = app.main.query_one("#runs-stream", EventStream)
            handled: list[float] = []
            frames: list[float] = []
            original = pane.action_toggle_pause
            display = app._display

            def timed_display(screen: object, renderable: object) -> None:  # a frame written to the terminal
                display(screen, renderable)  # type: ignore[arg-type]
                if renderable is not None:
                    frames.append(time.perf_counter())
            app._display = timed_display  # type: ignore[method-assign]

            def timed_toggle() -> None:
                handled.append(time.perf_counter())
                original()
            pane.action_toggle_pause = timed_toggle  # type: ignore[method-assign]
            kept_up = []
            for round_, rate in enumerate([rates[0], *rates]):
                warm_up = round_ == 0  # first-use imports and caches: measured, not reported
                run_id = await ws.desk.start_run("user:ada", f"benchmark stream at {rate}/s")
                pane.select_key(run_id)
                pane.focus_main()
                await pilot.pause(0.3)
                run = ws.cloud.runs.get(run_id)
                emit_many = run.emit_many if batched else None
                handled.clear()
                frames.clear()
                emitted = 0
                done = asyncio.Event()
                marks: dict[str, float] = {}

                async def produce() -> None:
                    nonlocal emitted
                    begin = marks["begin"] = time.perf_counter()
                    total = int(seconds * rate)
                    tick = max(1, rate // 100)
                    while emitted < total:
                        # a tick ahead, at most one tick per turn of the loop (a late producer never hogs it)
                        target = min(int((time.perf_counter() - begin) * rate) + tick, emitted + tick, total)
                        cpu = time.thread_time()
                        if emit_many is not None:  # the burst appended at once
                            emit_many([("node.output_text.delta", {"delta": f"token {n} ", "entry_id": "bench"})
                                       for n in range(emitted, target)])
                            emitted = max(emitted, target)
                        while emitted < target:
                            run.emit("node.output_text.delta", {"delta": f"token {emitted} ", "entry_id": "bench"})
                            emitted += 1
                        marks["emit_cpu"] = marks.get("emit_cpu", 0.0) + time.thread_time() - cpu
                        if emitted < total:
                            behind = int((time.perf_counter() - begin) * rate) > emitted
                            await asyncio.sleep(0 if behind else 0.01)
                    marks["last"] = time.perf_counter()
                    done.set()

                cpu_start = time.thread_time()
                producer = asyncio.create_task(produce())
                pressed: list[float] = []
                while not done.is_set():
                    pressed.append(time.perf_counter())
                    app.simulate_key("p")  # posted like a terminal key; not waiting for idle as Pilot does
                    try:
                        await asyncio.wait_for(done.wait(), 0.1)
                    except asyncio.TimeoutError:
                        pass
                await producer
                for _ in range(100):  # the last press's handler, so it cannot pause the stream again
                    if len(handled) >= len(pressed):
                        break
                    await asyncio.sleep(0.002)
                if stream_widget.paused:
                    stream_widget.paused = False
                while stream_widget.queued or pane._seq < run.seq:
                    await asyncio.sleep(0.002)
                lag = time.perf_counter() - marks["last"]
                window_cpu = time.thread_time() - cpu_start - marks.get("emit_cpu", 0.0)
                await pilot.pause(0.05)  # the frame after the last press
                latencies = [h - p for p, h in zip(pressed, handled)]
                worst = max(latencies) if latencies else float("inf")
                painted = [next((f for f in frames if f >= h), float("inf")) - p for p, h in zip(pressed, handled)]
                paint_worst = max(painted) if painted else float("inf")
                offered = emitted / (marks["last"] - marks["begin"])
                absorbed = emitted / (marks["last"] - marks["begin"] + lag)
                if warm_up:
                    continue
                if paint_worst < 0.05 and statistics.median(painted) < 0.016 and lag < 0.25:
                    kept_up.append(offered)
                print(f"   offered {offered:,.0f}/s ({emitted:,} events): absorbed {absorbed:,.0f}/s, the last one "
                      f"{lag * 1000:.0f} ms after it was emitted; key press -> handler median "
                      f"{statistics.median(latencies) * 1000:.1f} ms, worst {worst * 1000:.1f} ms; "
                      f"-> next frame median {statistics.median(painted) * 1000:.1f} ms, worst "
                      f"{paint_worst * 1000:.1f} ms ({len(latencies)} presses; aim < 16 / < 50 ms); CPU on the "
                      f"loop per event: emit (and the feed's subscribers) {marks.get('emit_cpu', 0.0) / emitted * 1e6:.1f} "
                      f"us, the window's rest (panes, stream, frames, keys) {window_cpu / emitted * 1e6:.1f} us")
            best = max(kept_up, default=0)
            print(f"   highest rate absorbed with every key drawn under 50 ms (median under 16 ms): {best:,.0f} "
                  f"events/s (aim 100,000/s)")


async def big_canvas(objects: int, canvas_db: Path | None = None, engine: str = "sqlite",
                     pg_schema: str | None = None) -> None:
    """Open the canvas pane over an ``objects`` canvas (built here, or ``canvas_db`` built before by
    ``benchmarks/canvas.py --db``) on SQLite or, with ``engine="postgresql"``, in a fresh schema of
    ``WORKBENCH_TEST_PG_URL`` (or the schema ``pg_schema`` that ``benchmarks/canvas.py --pg-schema`` built and
    kept, measured as it is and kept); time opening the pane and applying a filter (aim < 100 ms at 1M)."""
    from services.canvas import Canvas
    from services.clock import FakeClock
    from services.workspace import Settings
    from workbench.app import make_app

    spec = importlib.util.spec_from_file_location("canvas_bench", ROOT / "benchmarks" / "canvas.py")
    assert spec and spec.loader
    canvas_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(canvas_bench)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        folder.mkdir()
        url, server, schema = (canvas_bench.pg_target(None, pg_schema) if engine == "postgresql" else (None, None, None))
        built = time.perf_counter()
        if pg_schema is not None and url is not None:
            server = None  # a canvas built before, in a schema kept for measuring again: not built, not dropped
        elif canvas_db is not None and url is None:
            shutil.copyfile(canvas_db, folder / "canvas.db")  # the file alone: the benchmark checkpointed its log
        else:
            canvas = await Canvas.open(url or folder / "canvas.db")
            await asyncio.to_thread(canvas_bench.build, canvas, objects, objects * 3)
            await canvas.close()
        built = time.perf_counter() - built
        app = make_app(Settings(path=folder, clock=FakeClock(), canvas_url=url))
        try:
            opens, filters, nodes = await _time_canvas_pane(app)
        finally:
            if server is not None:
                import psycopg

                with psycopg.connect(server.replace("+psycopg", ""), autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA {schema} CASCADE")
        open_ms, filter_ms = statistics.median(opens) * 1000, statistics.median(filters) * 1000
        print(f"3. canvas of {objects:,} objects / {objects * 3:,} edges on {engine} (ready in {built:.1f} s)")
        print(f"   open the canvas pane (counts, tree roots, first object + neighbourhood): "
              f"median {open_ms:.0f} ms, best {min(opens) * 1000:.0f} ms (aim < 100 ms: {open_ms / 100:.2f}x)")
        print(f"   apply a name filter: median {filter_ms:.0f} ms, best {min(filters) * 1000:.0f} ms "
              f"(aim < 100 ms: {filter_ms / 100:.2f}x); tree nodes built: {nodes}")


async def _time_canvas_pane(app: Any) -> tuple[list[float], list[float], int]:
    async with app.run_test(size=(120, 40)) as pilot:
        while app.main.workspace is None:
            await pilot.pause(0.05)
        pane = app.main.pane("canvas")
        app.main.action_show_pane("canvas")
        opens, filters = [], []

        async def quiet() -> None:
            for _ in range(3):
                for worker in list(app.workers):
                    try:
                        await worker.wait()
                    except Exception:  # a cancelled (superseded) worker: its successor is awaited too
                        pass
                await asyncio.sleep(0)

        await quiet()
        for i in range(5):
            pane.selected = None
            pane._root_counts = None
            start = time.perf_counter()
            pane.reload()
            await quiet()
            opens.append(time.perf_counter() - start)
            start = time.perf_counter()
            pane.filter_text = f"-00{i}1"  # what a keystroke in the filter bar does (the pane's own watcher reacts)
            await pilot._wait_for_screen()  # the messages it queued are handled (no wait for an idle CPU)
            await quiet()
            filters.append(time.perf_counter() - start)
            pane.filter_text = ""
            await pilot._wait_for_screen()
            await quiet()
        tree = app.main.query_one("#canvas-tree")
        return opens, filters, sum(1 for _ in _walk(tree.root))


async def attach(rounds: int) -> None:
    """A second window on a served workspace: time to attach, and action -> drawn in the other window.

    The server is ``workbench serve`` in its own process, as an operator runs it; the acting window is
    a second attached workspace (its keys only call the same desk), the watching one a real App."""
    from screens.widgets.stream import EventStream
    from services.served.server import live_serve_info
    from services.workspace import Settings, Workspace
    from workbench.app import make_app

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ws"
        server = subprocess.Popen([sys.executable, "-m", "workbench", "serve", "--workspace", str(folder),
                                   "--port", "0"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for _ in range(3000):
                if live_serve_info(folder) is not None:
                    break
                await asyncio.sleep(0.01)
            own, attached = [], []
            for i in range(rounds):  # baseline: a window with its own in-process cloud, same machine, same run
                t0 = time.perf_counter()
                ws = await Workspace.open(Path(tmp) / f"own{i}")
                own.append(time.perf_counter() - t0)
                await ws.close()
                t0 = time.perf_counter()
                ws = await Workspace.open(folder)
                attached.append(time.perf_counter() - t0)
                await ws.close()
            a, o = statistics.median(attached), statistics.median(own)
            print(f"4. a second window on a served workspace (`workbench serve` in its own process, {rounds} rounds)")
            print(f"   attach (find the server, read runs and people, subscribe, open the shared stores): "
                  f"median {a * 1000:.0f} ms, worst {max(attached) * 1000:.0f} ms (aim < 1 s); "
                  f"a window with its own cloud: {o * 1000:.0f} ms, ratio {a / o:.2f}x")
            actor = await Workspace.open(folder)
            run_id = next(v.id for v in actor.desk.runs() if v.status in ("running", "idle"))
            watcher = make_app(Settings(path=folder))
            async with watcher.run_test(size=(120, 40)) as pilot:
                while watcher.workspace is None or watcher.main.workspace is None:
                    await pilot.pause(0.02)
                await pilot.press("3")
                pane = watcher.main.pane("runs")
                for _ in range(100):
                    if run_id in pane._table_rows:
                        break
                    await pilot.pause(0.02)
                pane.select_key(run_id)
                await pilot.pause(0.2)
                stream = watcher.main.query_one("#runs-stream", EventStream)
                lags, seen = [], []
                for i in range(rounds):
                    text = f"reply number {i}"
                    t0 = time.perf_counter()
                    await actor.desk.reply(run_id, text)
                    while not any(e.get("text") == text for e in watcher.workspace.desk.detail(run_id).events[-10:]):
                        await asyncio.sleep(0.001)
                    seen.append(time.perf_counter() - t0)
                    while time.perf_counter() - t0 < 5:
                        stream.flush()
                        if any(text in line for line in stream.shown[-20:]):
                            break
                        await asyncio.sleep(0.001)
                    lags.append(time.perf_counter() - t0)
            await actor.close()
            print(f"   a reply made in one window, in the other window's desk: median "
                  f"{statistics.median(seen) * 1000:.1f} ms; drawn in its run stream: median "
                  f"{statistics.median(lags) * 1000:.1f} ms, worst {max(lags) * 1000:.1f} ms (aim < 100 ms)")
        finally:
            server.terminate()
            server.wait(timeout=30)


def _walk(node):  # type: ignore[no-untyped-def]
    yield node
    for child in node.children:
        yield from _walk(child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rates", default="10000,15000,30000,60000,100000,150000",
                        help="comma-separated events/s to offer")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--attach-rounds", type=int, default=10, help="rounds of the attach figures")
    parser.add_argument("--only-attach", action="store_true", help="print only the attach figures")
    parser.add_argument("--only-canvas", action="store_true", help="print only the canvas pane figures")
    parser.add_argument("--canvas-db", type=Path, default=None,
                        help="a canvas built before by benchmarks/canvas.py --db (SQLite), instead of building one")
    parser.add_argument("--canvas-engines", default="sqlite", help="sqlite,postgresql (PostgreSQL: WORKBENCH_TEST_PG_URL)")
    parser.add_argument("--canvas-pg-schema", default=None,
                        help="PostgreSQL: a canvas kept by benchmarks/canvas.py --pg-schema, instead of building one")
    parser.add_argument("--open-rounds", type=int, default=5, help="rounds of the workspace open figures")
    parser.add_argument("--only-start", action="store_true", help="print only the start and open figures")
    parser.add_argument("--only-stream", action="store_true", help="print only the stream figures")
    parser.add_argument("--per-event", action="store_true",
                        help="the stream's producer appends event by event (FakeRun.emit) instead of a burst at once")
    args = parser.parse_args()
    if args.only_attach:
        asyncio.run(attach(args.attach_rounds))
        return
    if args.only_canvas:
        for engine in args.canvas_engines.split(","):
            asyncio.run(big_canvas(args.objects, args.canvas_db, engine.strip(), args.canvas_pg_schema))
        return
    if args.only_stream:
        asyncio.run(stream([int(r) for r in args.rates.split(",")], args.seconds, args.per_event))
        return
    startup(args.runs)
    asyncio.run(workspace_open(args.open_rounds))
    if args.only_start:
        return
    asyncio.run(stream([int(r) for r in args.rates.split(",")], args.seconds, args.per_event))
    asyncio.run(big_canvas(args.objects))
    asyncio.run(attach(args.attach_rounds))


if __name__ == "__main__":
    main()
