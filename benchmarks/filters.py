"""Filters and run diffs: a filter of three fields over 10,000 runs (aim < 20 ms), and two runs of
10,000 events each compared, until the comparison's first screen is drawn (aim < 200 ms).

    PYTHONPATH=. python benchmarks/filters.py
"""

from __future__ import annotations

import asyncio
import statistics
import time

from services.desk import RunDetail, RunView
from services.desk.diff import compare_runs
from services.desk.filters import compile_filter

NOW = 1_800_000_000.0
RUNS = 10_000
EVENTS = 10_000


def runs() -> list[RunView]:
    statuses = ("idle", "running", "waiting_on_user", "settled")
    return [RunView(id=f"run_{i:05d}", user_id=f"user:{('ada', 'bob', 'grace', 'linus')[i % 4]}", name=f"run {i}",
                    status=statuses[i % 4], activity=None, prompt=f"tend the bee hive {i}" if i % 7 else f"plan {i}",
                    created_at=NOW - i, updated_at=NOW - i * 0.1, events=0, pending=0, outcome=None, question=None,
                    last_turn_error=None, deleted=False) for i in range(RUNS)]


def events(variant: str) -> tuple[dict[str, object], ...]:
    out: list[dict[str, object]] = []
    turn = 0
    while len(out) < EVENTS:
        at = float(turn)
        out.append({"type": "node.turn.started", "input": {"text": f"question {turn}"}, "at": at})
        out.extend({"type": "node.output_text.delta", "text": "x", "at": at} for _ in range(6))
        reply = f"answer {turn}" + (f" ({variant})" if turn % 50 == 49 else "")
        out.append({"type": "node.output_text.done", "text": reply, "at": at + 0.5})
        out.append({"type": "node.turn.completed", "at": at + 0.5})
        turn += 1
    return tuple(out[:EVENTS])


def detail(run_id: str, variant: str) -> RunDetail:
    evs = events(variant)
    return RunDetail(id=run_id, user_id="user:ada", name=run_id, status="idle", created_at=NOW, updated_at=NOW,
                     deleted=False, params={}, events=evs, settled=False, seq=len(evs), activity=None, pending=(),
                     question=None, last_turn_error=None, outcome=None)


def bench_filter() -> list[float]:
    views = runs()
    times = []
    for _ in range(20):
        start = time.perf_counter()
        kept = compile_filter('status:waiting person:grace since:5m "bee"', "runs", NOW).filter(views)
        times.append((time.perf_counter() - start) * 1000)
    assert kept
    return times


async def bench_diff() -> list[float]:
    from textual.app import App

    from screens.diff import DiffScreen

    a, b = detail("a", "left"), detail("b", "right")
    times = []
    for _ in range(5):
        app = App()
        async with app.run_test(size=(160, 48)) as pilot:
            start = time.perf_counter()
            screen = DiffScreen(compare_runs(a, b))
            await app.push_screen(screen)
            await pilot.pause()  # the first frame of the comparison drawn
            times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    filt = bench_filter()
    print(f"filter, 3 fields and a phrase over {RUNS:,} runs: median {statistics.median(filt):.1f} ms, "
          f"worst {max(filt):.1f} ms (aim < 20 ms)")
    diff = asyncio.run(bench_diff())
    print(f"diff of two runs of {EVENTS:,} events, first screen drawn: median {statistics.median(diff):.1f} ms, "
          f"worst {max(diff):.1f} ms (aim < 200 ms)")


if __name__ == "__main__":
    main()
