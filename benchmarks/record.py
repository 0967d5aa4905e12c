"""Prints what recording costs: operator actions (a reply as the model, through the desk) and an app's
SDK calls (``run.get``) on the sample world, timed without a recording and with one, in the same run.
The ratio (recorded / plain) is the figure. Also prints the bytes one recorded step takes, and what a
recorded step costs beside a larger cloud: the same steps recorded again after ``--more`` events
(10,000 by default, across 100 other runs) were added, in the same run, as a ratio (aim: about 1x: a
step reads only what it changed, not what the cloud holds).

Usage: python benchmarks/record.py [--actions N] [--repeat R] [--more EVENTS]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from services.record import app_client, start_recording
from services.workspace import Workspace


async def _actions(workspace: Workspace, run_id: str, app: object, count: int) -> float:
    started = time.perf_counter()
    for number in range(count):
        await workspace.desk.reply(run_id, f"reply {number}", chunks=1)
        await app.runs.get(run_id)  # type: ignore[attr-defined]
    return time.perf_counter() - started


async def _per_step(workspace: Workspace, folder: Path, run_id: str, app: object, count: int, repeat: int,
                    tag: str) -> tuple[float, float]:
    """The best time per step (a reply and an app call), without a recording and with one, in seconds."""
    plain, recorded = [], []
    for attempt in range(repeat):
        plain.append(await _actions(workspace, run_id, app, count))
        recorder = await start_recording(folder / f"bench-{tag}-{attempt}.jsonl", workspace)
        await _actions(workspace, run_id, app, 2)  # the first step writes the whole observation: not timed
        recorded.append(await _actions(workspace, run_id, app, count))
        await recorder.stop()
    return min(plain) / (2 * count), min(recorded) / (2 * count)


async def _grow(workspace: Workspace, events: int, runs: int = 100) -> None:
    """Add ``events`` events across ``runs`` new runs (through the control API, in batches)."""
    control = workspace.desk.control
    each = max(1, events // runs)
    for number in range(runs):
        run_id = await workspace.desk.start_run("user:grace", f"filler {number}")
        batch = [{"type": "node.activity", "fields": {"text": f"filler {number}.{i}"}} for i in range(each)]
        await control.call("POST", f"/runs/{run_id}/emit", {"events": batch})


async def main(count: int, repeat: int, more: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = await Workspace.open(Path(folder) / "workspace")
        oauth = app_client(workspace)
        try:
            app = await oauth.client("user:ada")
            run_id = await workspace.desk.start_run("user:ada", "benchmark")
            await _actions(workspace, run_id, app, 5)  # warm up
            plain, recorded = [], []
            for attempt in range(repeat):
                plain.append(await _actions(workspace, run_id, app, count))
                path = Path(folder) / f"bench-{attempt}.jsonl"
                recorder = await start_recording(path, workspace)
                recorded.append(await _actions(workspace, run_id, app, count))
                await recorder.stop()
                size = path.stat().st_size
            best_plain, best_recorded = min(plain), min(recorded)
            print(f"{count} replies + {count} app run.get, best of {repeat}:")
            print(f"  plain     {best_plain * 1000 / count:7.2f} ms per reply+call")
            print(f"  recorded  {best_recorded * 1000 / count:7.2f} ms per reply+call")
            print(f"  ratio     {best_recorded / best_plain:7.2f}x")
            print(f"  file      {size / (2 * count):7.0f} bytes per step ({size} bytes, {2 * count} steps + state)")
            folder_path = Path(folder)
            small_plain, small = await _per_step(workspace, folder_path, run_id, app, count, 2 * repeat, "small")
            await _grow(workspace, more)
            large_plain, large = await _per_step(workspace, folder_path, run_id, app, count, 2 * repeat, "large")
            print(f"one recorded step (a reply or an app call), best of {2 * repeat}, beside a larger cloud:")
            print(f"  as it was       {small * 1000:7.2f} ms per step ({(small - small_plain) * 1000:6.2f} ms "
                  f"of it recording)")
            print(f"  +{more} events {large * 1000:7.2f} ms per step ({(large - large_plain) * 1000:6.2f} ms "
                  f"of it recording)")
            print(f"  ratio           {large / small:7.2f}x (aim: about 1x)")
        finally:
            await oauth.aclose()
            await workspace.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--more", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(main(args.actions, args.repeat, args.more))
