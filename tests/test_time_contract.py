"""The time contract of the UI, checked mechanically over ``screens/`` and ``workbench/``.

The read models carry float seconds since the epoch; a pane only formats them, through the helpers
in ``screens/text.py``. So no module there divides by 1000 (milliseconds), parses a time
(``fromisoformat``, ``strptime``, the ``datetime`` module), or takes ``iso`` from a services
module instead of ``screens/text.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UI = ("screens", "workbench")
ALLOWED_ISO = {Path("screens/text.py")}
"""The one UI module that takes ``iso`` from the services (and hands it to the panes)."""
PARSERS = {"fromisoformat", "strptime"}


def _thousand(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value in (1000, 1000.0)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def time_problems(source: str, rel: Path) -> list[str]:
    """What breaks the time contract in one module's source (``path:line: what``)."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        line = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            if _thousand(node.right if isinstance(node, ast.BinOp) else node.value):
                problems.append(f"{line}: divides by 1000 (a time in milliseconds: convert it in the read model)")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in PARSERS:
                problems.append(f"{line}: calls {name} (parse times in the read model, not in the UI)")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "datetime":
                    problems.append(f"{line}: imports datetime (format times with screens/text.py)")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] == "datetime":
                problems.append(f"{line}: imports from datetime (format times with screens/text.py)")
            elif module.split(".")[0] == "services" and rel not in ALLOWED_ISO:
                if any(alias.name == "iso" for alias in node.names):
                    problems.append(f"{line}: imports iso from {module} (take it from screens/text.py)")
        elif isinstance(node, ast.Attribute) and node.attr == "iso" and rel not in ALLOWED_ISO:
            if _dotted(node).startswith("services."):
                problems.append(f"{line}: uses {_dotted(node)} (take iso from screens/text.py)")
    return problems


def test_the_ui_formats_times_and_never_converts_them() -> None:
    problems = []
    checked = 0
    for folder in UI:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            problems += time_problems(path.read_text("utf-8"), rel)
            checked += 1
    assert checked > 20  # the walk found the UI's modules
    assert problems == []


def test_the_contract_catches_each_kind_of_conversion() -> None:
    bad = """
from services.clock import iso
from datetime import datetime
import datetime as dt
import services.clock
a = item.quarantined_at / 1000
b = item.quarantined_at // 1000.0
c = datetime.fromisoformat(item.created)
d = dt.datetime.strptime(s, "%Y")
e = services.clock.iso(1.0)
"""
    found = time_problems(bad, Path("screens/pane.py"))
    lines = sorted(int(p.split(": ", 1)[0].rsplit(":", 1)[1]) for p in found)
    assert lines == [2, 3, 4, 6, 7, 8, 9, 10], found
    assert time_problems("from services.clock import iso\n", Path("screens/text.py")) == []
    assert time_problems("x = size / 1024\ny = iso(t)\n", Path("screens/pane.py")) == []


WALL_CLOCK = {("time", "time"), ("time", "time_ns"), ("datetime", "now"), ("datetime", "utcnow"),
              ("datetime", "today"), ("date", "today")}
"""Reads of the wall clock: in ``services/`` only ``services/clock.py`` makes them."""
CLOCKED = {"FakeHonchoService", "FakeCloud", "OAuth2Client", "ServedDesk", "Canvas.open", "MemoryOutbox.open",
           "InsightReviews.open", "Harvest.open"}
"""Services that take the injected clock: built inside ``services/`` they are handed one."""
OWN_CLOCK = {
    ("services/served/honcho.py", "FakeHonchoService"): "its own process: the wall clock is its clock",
    ("services/cloud/cloud.py", "FakeCloud"): "refusal_error's throwaway probe: it stamps nothing kept or shown",
    ("services/cloud/cloud.py", "OAuth2Client"): "refusal_error's throwaway probe: it stamps nothing kept or shown",
    ("services/served/persist.py", "FakeCloud"): "import_document's validation probe: discarded after the check",
}


def clock_problems(source: str, rel: Path) -> list[str]:
    """Wall-clock reads, and clocked services built without a clock, in one services module."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and rel != Path("services/clock.py"):
            pair = tuple(_dotted(node).split(".")[-2:])
            if pair in WALL_CLOCK:
                problems.append(f"{rel}:{node.lineno}: reads the wall clock ({'.'.join(pair)}); use the clock")
        if isinstance(node, ast.Call):
            name = _dotted(node.func).rsplit(".", 2)
            called = ".".join(name[-2:]) if len(name) > 1 and name[-1] == "open" else name[-1]
            if called in CLOCKED and (str(rel), called) not in OWN_CLOCK:
                if not any(k.arg in ("clock", None) for k in node.keywords):  # clock=..., or **options
                    problems.append(f"{rel}:{node.lineno}: builds {called} without the injected clock")
    return problems


def test_services_read_the_time_only_through_the_injected_clock() -> None:
    problems = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        problems += clock_problems(path.read_text("utf-8"), path.relative_to(ROOT))
    assert problems == []
    bad = "import time\nx = time.time()\nh = FakeHonchoService(p)\ny = datetime.datetime.now()\n"
    assert sorted(clock_problems(bad, Path("services/x.py"))) == [
        "services/x.py:2: reads the wall clock (time.time); use the clock",
        "services/x.py:3: builds FakeHonchoService without the injected clock",
        "services/x.py:4: reads the wall clock (datetime.now); use the clock"]
