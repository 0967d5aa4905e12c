"""Prints what recording costs: operator actions (a reply as the model, through the desk) and an app's
SDK calls (``run.get``) on the sample world, timed without a recording and with one, in the same run.
The ratio (recorded / plain) is the figure; each step also reads what the cloud shows, so the cost
grows with the number of runs and events. Also prints the bytes one recorded step takes.

Usage: python benchmarks/record.py [--actions N] [--repeat R]
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


async def main(count: int, repeat: int) -> None:
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
        finally:
            await oauth.aclose()
            await workspace.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.actions, args.repeat))
