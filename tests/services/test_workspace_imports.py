"""``import_services`` imports every service module an open needs, so that a window (which runs it in a
thread) never imports one on its event loop while the Workspace opens."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

OPEN_TWICE = textwrap.dedent(
    """
    import asyncio, sys
    from services.workspace import Workspace, import_services

    import_services()
    before = set(sys.modules)

    async def main():
        for _ in range(2):  # a new workspace (seeded with the sample world), then a reopen
            workspace = await Workspace.open(sys.argv[1])
            await workspace.close()

    asyncio.run(main())
    print("late:" + ",".join(sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "services")))
    """
)


@pytest.mark.slow
def test_an_open_imports_no_service_module_that_import_services_left_out(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", OPEN_TWICE, str(tmp_path / "ws")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("late:")]
    assert lines, out.stdout + out.stderr
    assert lines[0] == "late:"
