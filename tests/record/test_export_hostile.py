"""An exported test from a hostile recording: every name and value from the file is data in the module,
never code. Keywords (``from=``), names that are no identifier, quotes, newlines, triple quotes and
backslashes compile; a recorded session whose app call carries ``from=`` exports a test that passes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.cloud.state import export_state
from services.record import FORMAT, VERSION, RecordingError, app_client, export_test, load_recording, parse_recording
from services.record import start_recording
from services.record.format import scrub_state
from services.workspace import Settings, Workspace

from .test_session import _run_pytest

NASTY = ['say "hi"', "it's", 'a """ b', "line\nbreak\r\n", "back\\slash\\", "\\x00 \\n", "end\\", "'''",
         "\x1b[31m\u202e", "# not a comment", "\"); import os; os.system('x') #"]
"""Values that break a module when pasted into its source instead of written as ``repr``."""
ODD_NAMES = ["from", "class", "a-b", "1x", "with space", "\u0444", "\ufb01", "match", "x\ny", "'", "\\"]
"""Keyword names no ``name=`` can carry (keywords, non-identifiers, a name Python folds with NFKC)."""


def _lines(*steps: dict[str, Any], started_at: str = "2026-12-01T15:00:00Z") -> list[str]:
    cloud = FakeCloud(client_id="app")
    cloud.user("user:ada")
    state = scrub_state(export_state(cloud))
    head = {"format": FORMAT, "version": VERSION, "source": "embedded", "client_id": "app", "started_at": started_at}
    numbered = [{**s, "n": n} for n, s in enumerate(steps, start=1)]
    end = {"type": "end", "at": 1.0, "steps": len(numbered)}
    return [json.dumps(head), json.dumps({"type": "state", "state": state}), *(json.dumps(s) for s in numbered),
            json.dumps(end)]


def _app(op: str, method: str, path: str, body: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"type": "step", "at": 0.5, "kind": "app", "user": "user:ada", "op": op, "method": method, "path": path,
            "query": more.pop("query", {}), "body": body, "key": None, "status": 200, "made": None, "observed": None,
            **more}


def _operator(path: str, body: dict[str, Any], kind: str = "operator") -> dict[str, Any]:
    return {"type": "step", "at": 0.5, "kind": kind, "method": "POST", "path": path, "body": body, "status": 200,
            "error": None, "made": None, "observed": None}


def _hostile_steps() -> list[dict[str, Any]]:
    values: dict[str, Any] = {name: NASTY[i % len(NASTY)] for i, name in enumerate(ODD_NAMES)}
    return [
        _app("run.start", "POST", "/v1/runs", {"prompt": NASTY[0], **values}),
        _app("run.message", "POST", "/v1/runs/run_x/messages", {"text": NASTY[3], "start_turn": True}),
        _app("memory.list", "GET", "/v1/memory", None, query={"kind": NASTY[2]}),
        _operator("/runs/run%0Aimport%20os/reply", {"text": NASTY[1], **values}),
        _operator("/people/user:ada/grant/set", {"scopes": NASTY, **values}),
        _operator("/fail_next", {"op": "run.start\nimport os\nos.system('x')", "answer": 503, "user": NASTY[4],
                                 "times": 1, **values}, kind="failure"),
        _operator("/custom%22%22%22/x", {"a": NASTY}),
        {"type": "step", "at": 0.5, "kind": "insight", "action": "approve", "title": NASTY[2], "candidate": 0,
         "text": NASTY[3], "reason": None, "observed": None},
    ]


def _strings(tree: ast.AST) -> set[str]:
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_a_hostile_recording_exports_a_module_that_compiles_with_every_value_as_data() -> None:
    recording = parse_recording(_lines(*_hostile_steps()))
    for served in (False, True):
        source = export_test(recording, served=served, name="from \"\"\" \\ \n ²")
        tree = ast.parse(source)
        compile(tree, "exported.py", "exec")
        strings = _strings(tree)
        for value in NASTY:
            assert value in strings, value  # each value reached the module whole, as a constant
        calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert "os.system" not in calls  # no value became a call
        imports = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert not any("import os" in line for line in imports)
        functions = [node.name for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef)]
        assert functions == ["test_from"]
        # the keyword names are passed as they were recorded, ``from`` and the folded ``ﬁ`` included
        start = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and ast.unparse(node.func) == "app.runs.start")
        passed = {kw.arg for kw in start.keywords if kw.arg}
        spread = [kw.value for kw in start.keywords if kw.arg is None]
        assert len(spread) == 1
        spread_keys = {k.value for k in spread[0].keys if isinstance(k, ast.Constant)}  # type: ignore[attr-defined]
        assert passed | spread_keys == {"prompt", *ODD_NAMES}
        assert "from" in spread_keys and "\ufb01" in spread_keys and "fi" not in passed


def test_a_recording_with_a_number_json_does_not_have_is_refused() -> None:
    for number in ("NaN", "Infinity", "-Infinity", "1e400"):
        lines = _lines(_operator("/runs/run_1/reply", {"text": "x"}))
        lines[2] = lines[2].replace('"text": "x"', f'"text": "x", "n2": {number}')
        with pytest.raises(RecordingError) as caught:
            parse_recording(lines)
        assert caught.value.line == 3 and "not JSON" in caught.value.reason


async def test_a_recorded_call_with_a_keyword_argument_exports_a_test_that_passes(tmp_path: Path) -> None:
    workspace = await Workspace.open(settings=Settings(path=tmp_path / "ws"))
    path = tmp_path / "keyword.jsonl"
    oauth = app_client(workspace)
    try:
        recorder = await start_recording(path, workspace)
        ada = await oauth.client("user:ada")
        await ada.runs.start(prompt='a """ b\\ and \'quotes\'\nnext line', **{"from": "the app", "class": "x\ny"})
        await recorder.stop()
    finally:
        await oauth.aclose()
        await workspace.close()
    recording = load_recording(path)
    assert [s["body"] for s in recording.steps if s["kind"] == "app"][0]["from"] == "the app"  # type: ignore[index]
    module = tmp_path / "exported" / "test_keyword.py"
    module.parent.mkdir()
    module.write_text(export_test(recording, name="keyword"), encoding="utf-8")
    result = _run_pytest(module)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
