"""The shape of the code, held mechanically: the import contracts in ``pyproject.toml``
(``[tool.importlinter]``): Textual and the UI never below ``services/``, the panes on the desk only,
the layers of ``services/`` one way, the fake cloud pure of serving, and no import cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept() -> None:
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
                          "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
