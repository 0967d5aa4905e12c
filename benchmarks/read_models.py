"""The runs pane's read model under a long run: what ``run_detail`` costs once its events carry seconds.

Run: ``python benchmarks/read_models.py [--events N] [--repeat R]``. A run with ``N`` wire events (ISO
``at``) is read ``R`` times as the runs pane reads it on every change (``run_detail`` of the events the
run mirror holds, read over the run's live log), one new event
appended before each read. It prints the median time of a read, the median of converting every
event's time afresh on each read (what a read would cost without the window's ``RunMirror``), and of a read
whose events are handed on untouched (the floor), with the ratios to that floor. The aim: a read
of a 10,000-event run well under 1 ms, a small multiple of the floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.desk import RunMirror, run_detail  # noqa: E402
from services.clock import iso  # noqa: E402

START = 1_800_000_000.0


def event(seq: int) -> dict[str, Any]:
    return {"id": f"ev_{seq}", "seq": seq, "run_id": "run_bench", "node_id": "run_bench",
            "type": "node.output_text.delta", "at": iso(START + seq / 10), "delta": "word "}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    dto = {"id": "run_bench", "user_id": "user:ada", "status": "running", "created_at": iso(START),
           "updated_at": iso(START), "seq": args.events}
    events = [event(i) for i in range(1, args.events + 1)]
    mirror = RunMirror(source=lambda run_id: events)
    run_detail(dto, mirror.events("run_bench"))  # the first read converts everything once

    cached, fresh, floor = [], [], []
    for i in range(args.repeat):
        events.append(event(args.events + i + 1))
        snapshot = tuple(events)
        t0 = time.perf_counter()
        run_detail(dto, mirror.events("run_bench"))
        t1 = time.perf_counter()
        RunMirror(source=lambda run_id: snapshot).events("run_bench")
        t2 = time.perf_counter()
        tuple(events)
        t3 = time.perf_counter()
        cached.append(t1 - t0)
        fresh.append(t2 - t1)
        floor.append(t3 - t2)
    base = max(median_ms(floor), 1e-6)
    print(f"run of {args.events} events, {args.repeat} reads, one event appended before each")
    print(f"  run_detail (converted once per event): {median_ms(cached):8.3f} ms  ({median_ms(cached) / base:6.1f}x floor)")
    print(f"  converting every event on each read:   {median_ms(fresh):8.3f} ms  ({median_ms(fresh) / base:6.1f}x floor)")
    print(f"  floor (events handed on untouched):    {median_ms(floor):8.3f} ms")


if __name__ == "__main__":
    main()
