"""The panes' boundary, checked mechanically: a strict type checker over ``screens/``, ``workbench/``
and ``services/desk/``,
no ``Any`` where they hold the workspace or its desk, and no cloud internals outside the cloud."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOUNDARY_NAMES = frozenset({"workspace", "desk", "ws"})


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.long
def test_the_type_checker_passes_strictly_over_screens_workbench_the_desk_and_the_history() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "screens", "workbench", "services/desk", "services/timeline"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def _any_annotations(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            annotation = node.annotation
        elif isinstance(node, ast.arg):
            name, annotation = node.arg, node.annotation
        else:
            continue
        if name in BOUNDARY_NAMES and annotation is not None and "Any" in ast.unparse(annotation):
            found.append((node.lineno, name))
    return found


def test_no_any_where_panes_and_the_app_hold_the_workspace_or_its_desk() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line} {name}"
           for path in _sources("screens", "workbench")
           for line, name in _any_annotations(ast.parse(path.read_text(encoding="utf-8")))]
    assert bad == []


CLOUD_PRIVATE = re.compile(r"\b\w*(?:cloud|remote)\._[a-z]\w*")
CLOUD_IMPORT = re.compile(r"from\s+(?:services)?\.*cloud(?:\.\w+)?\s+import\s+\(?[^)\n]*\b_\w+")


def test_no_cloud_internals_outside_the_cloud() -> None:
    bad = []
    for path in _sources("services", "screens", "workbench"):
        if (ROOT / "services" / "cloud") in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CLOUD_PRIVATE.search(line) or CLOUD_IMPORT.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bad == []


def test_panes_read_runs_as_frozen_snapshots_never_live_cloud_objects() -> None:
    bad = []
    for path in _sources("screens"):
        text = path.read_text(encoding="utf-8")
        for pattern in ("FakeRun", "FakeCloud", "desk.run(", "services.cloud"):
            if pattern in text:
                bad.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert bad == []
