"""``workbench web`` in its own process, as a person starts it, and the tab's screenshots as artifacts."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.workspace import Settings, Workspace

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Web:
    """A running ``workbench web``: its address with the token, what it printed, its process."""

    url: str
    said: list[str]
    process: asyncio.subprocess.Process

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]


@asynccontextmanager
async def workbench_web(*args: str) -> AsyncIterator[Web]:
    """``workbench web ARGS --port 0`` until it prints its address; SIGTERM and waited for at the end."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "workbench", "web", "--port", "0", *args, cwd=ROOT, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert process.stdout is not None
    said: list[str] = []
    try:
        async def announced() -> str:
            while line := await process.stdout.readline():  # type: ignore[union-attr]
                said.append(line.decode().rstrip())
                if said[-1].startswith("open "):
                    return said[-1].removeprefix("open ")
            raise AssertionError("workbench web ended before it served:\n" + "\n".join(said))

        url = await asyncio.wait_for(announced(), 120)
        drain = asyncio.create_task(_collect(process.stdout, said))
        yield Web(url, said, process)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 60)
    await asyncio.wait_for(drain, 10)


async def _collect(stream: asyncio.StreamReader, said: list[str]) -> None:
    while line := await stream.readline():
        said.append(line.decode("utf-8", "replace").rstrip())


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Any]:
    """A workspace served by this process (it judges its notes, so judgments wait to be approved)."""
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws", serve_port=0))
    yield workspace
    await workspace.close()


@pytest.fixture
def artifacts(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """Where the test's screenshots go; copied into ``$WORKBENCH_TEST_ARTIFACTS`` when it is set."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    yield folder
    target = os.environ.get("WORKBENCH_TEST_ARTIFACTS")
    if target:
        shutil.copytree(folder, Path(target) / request.node.name.replace("/", "_"), dirs_exist_ok=True)
