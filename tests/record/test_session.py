"""Record a pilot session, export it as a test and run that test, replay it, and replay it mutated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from services.record import export_test, load_recording, parse_recording, replay

from .pilot import HOSTILE

ROOT = Path(__file__).resolve().parents[2]


def _run_pytest(module: Path) -> subprocess.CompletedProcess[str]:
    """Run an exported module with pytest and the one plugin it declares (``pytest.mark.asyncio``):
    loading every installed plugin (Schemathesis, Hypothesis, ...) costs seconds and adds nothing."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    args = ["-q", "-p", "no:cacheprovider", "-p", "pytest_asyncio.plugin", str(module)]
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=module.parent, env=env, capture_output=True,
                          text=True, timeout=600)


async def test_a_pilot_session_is_recorded_whole_and_without_secrets(session_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, seen = session_file
    recording = load_recording(path)
    assert recording.ended
    kinds = [(s["kind"], s.get("op") or s.get("path") or s.get("action")) for s in recording.steps]
    assert kinds[:4] == [("operator", "/people/user%3Aada/runs"), ("operator", f"/runs/{seen['runs'][0]}/reply"),
                         ("failure", "/fail_next"), ("app", "run.start")]
    assert ("app", "run.message") in kinds and ("insight", "approve") in kinds
    assert ("operator", "/people/user%3Agrace/grant/revoke") in kinds
    assert ("operator", "/people/user%3Agrace/reconnect") in kinds
    app_steps = [s for s in recording.steps if s["kind"] == "app"]
    # the scripted 503, the retry, and grace's call after the revocation (401: her token is cut off;
    # the SDK's refresh is then refused with grant_removed at the directory)
    assert [s["status"] for s in app_steps if s["op"] == "run.message"] == [503, 201, 401]
    assert [s["user"] for s in app_steps if s["op"] == "run.message"] == ["user:ada", "user:ada", "user:grace"]
    assert seen["scripted"] == 503 and seen["refused"] == 400
    # text from outside is kept as data, exactly
    assert recording.steps[0]["body"]["prompt"] == HOSTILE
    # every step says what the cloud showed after it
    last = recording.steps[-1]["observed"]
    statuses = {r["id"]: r["status"] for r in last["runs"]}
    assert statuses[seen["runs"][0]] == "settled"
    assert last["grants"]["user:grace"] == "active"
    assert [seen["insight"], "approved"] in last["insights"]
    # nothing secret is in the file
    text = path.read_text(encoding="ascii")
    for token in seen["tokens"]:
        assert token and token not in text
    assert "PRIVATE KEY" not in text and "eyJ" not in text
    assert all(u.get("refresh_token") is None for u in recording.state["users"])
    assert recording.state["refresh_tokens"] == {}


async def test_the_exported_test_passes_in_a_subprocess(session_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, seen = session_file
    source = export_test(load_recording(path), name="pilot")
    module = tmp_path / "exported" / "test_pilot_session.py"
    module.parent.mkdir()
    module.write_text(source, encoding="utf-8")
    # readable: named steps, the SDK called as an app calls it, no blob but the starting state
    assert "# step 1 at" in source and "app.runs.start(prompt='from the app')" in source
    assert "await session.grant('user:grace', 'revoke', code='grant_removed')" in source
    assert "await session.expect_grant('user:grace', 'revoked')" in source
    assert sum(1 for line in source.splitlines() if len(line) > 400) == 1  # the starting state
    compile(source, str(module), "exec")
    result = _run_pytest(module)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


async def test_the_exported_served_test_passes_over_http(session_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, _ = session_file
    module = tmp_path / "exported" / "test_served_session.py"
    module.parent.mkdir()
    module.write_text(export_test(load_recording(path), served=True), encoding="utf-8")
    result = _run_pytest(module)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


async def test_replay_matches_and_a_mutated_step_stops_it_exactly_there(session_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, seen = session_file
    recording = load_recording(path)
    report = await replay(recording, tmp_path / "replay-1")
    assert report.matched, report.divergence
    assert report.played == [s["n"] for s in recording.steps]

    # the operator replied where the recording failed the turn: the cloud shows other events
    lines = path.read_text(encoding="ascii").splitlines()
    target = next(s["n"] for s in recording.steps if str(s.get("path", "")).endswith("/fail_turn"))
    step = json.loads(lines[target + 1])
    step["path"] = step["path"].replace("/fail_turn", "/reply")
    step["body"] = {"text": "a reply instead", "chunks": 1}
    lines[target + 1] = json.dumps(step)
    mutated = tmp_path / "mutated.jsonl"
    mutated.write_text("\n".join(lines) + "\n", encoding="ascii")

    report = await replay(load_recording(mutated), tmp_path / "replay-2")
    assert report.divergence is not None
    assert report.divergence.step == target
    assert report.played == list(range(1, target))
    assert f"run {step['path'].split('/')[2]}: event 3 expected node.turn.completed, seen node.output_text.delta" in report.divergence.what
    assert report.divergence.expected == load_recording(mutated).steps[target - 1]["observed"]


def test_a_recording_round_trips_through_validation(session_file: tuple[Path, dict[str, Any]]) -> None:
    path, _ = session_file
    recording = load_recording(path)
    again = parse_recording(line.encode() for line in recording.lines())
    assert again == recording
    # observations are written as what changed, and loaded whole
    written = [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()[2:-1]]
    assert written[0]["observed"].get("delta") is None and all(w["observed"]["delta"] for w in written[1:])
    # the run ids are written only when a run came or went; each written observation names the one before
    with_ids = [w for w in written[1:] if "ids" in w["observed"]]
    assert with_ids and len(with_ids) < len(written) - 1
    for w in with_ids:
        assert w["observed"]["ids"] == [r["id"] for r in recording.steps[w["n"] - 1]["observed"]["runs"]]
    assert [w["observed"]["base"] for w in written[1:]] == [w["n"] for w in written[:-1]]
