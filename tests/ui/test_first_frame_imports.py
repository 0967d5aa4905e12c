"""The first frame comes before any heavy package is imported: the services' ORM, schemas, crypto
and HTTP client load after it (in a thread, while the panes are built), whether the window opens a
new folder or one with last known rows to draw."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "sqlmodel", "pydantic", "cryptography", "jwt", "httpx")

FIRST_FRAME = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from services.settings import Settings
    from workbench.app import WorkbenchApp

    HEAVY = {heavy!r}

    class First(WorkbenchApp):
        def _display(self, screen, renderable):  # the first frame written is the one that counts
            if not getattr(self, "seen", False):
                self.seen = True
                print("heavy:" + ",".join(sorted(m for m in list(sys.modules) if m.split(".")[0] in HEAVY)),
                      flush=True)
                self.exit()
            return super()._display(screen, renderable)

    First(settings=Settings(path=Path(sys.argv[1]))).run(headless=True, size=(160, 48))
    """
)


def first_frame_heavy(folder: Path) -> str:
    code = FIRST_FRAME.format(heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code, str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("heavy:")]
    assert lines, out.stdout + out.stderr
    return lines[0].removeprefix("heavy:")


@pytest.mark.parametrize("kept", [False, True], ids=["new folder", "last rows kept"])
def test_no_heavy_package_is_imported_before_the_first_frame(tmp_path: Path, kept: bool) -> None:
    folder = tmp_path / "ws"
    if kept:
        folder.mkdir()
        (folder / "last-screen.json").write_text(json.dumps(
            {"version": 1, "at": 0, "badges": {"waiting": 1},
             "panes": {"runs": [" 3  6 runs", " ◦  patch review   idle"]}}), encoding="utf-8")
    assert first_frame_heavy(folder) == ""
