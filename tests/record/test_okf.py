"""OKF harvest judgments in a recording: decisions recorded by what they judged, replayed, exported."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from services.clock import FakeClock
from services.record import RecordingError, export_test, load_recording, parse_recording, replay
from services.record.format import Observation
from services.record.observe import compare
from services.workspace import Settings
from workbench.app import make_app
from workbench.recording import RecordedDemoApp

from ..ui.conftest import ready, settle
from .test_session import _run_pytest

WAIT = 3.0
"""How long the replays here wait for a judgment that never comes."""


async def _record(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A window opened with ``--record`` where the operator approves one outcome of the notes' judgment
    and rejects the run record's judgment, through the calls the judgments pane makes."""
    path = tmp_path / "okf.jsonl"
    app = make_app(Settings(path=tmp_path / "ws", clock=FakeClock()), record=path)
    seen: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        ws = await ready(pilot)
        for _ in range(200):
            if app.recorder is not None:
                break
            await pilot.pause(0.02)
        assert app.recorder is not None, app.errors
        queue = await ws.okf.queue("pending")
        notes = next(i for i in queue if i.inputs > 1)
        record = next(i for i in queue if i.inputs == 1)
        detail = await ws.okf.detail(notes.id)
        chosen = next(o for o in detail.outcomes if o.input_name == "watering.md")
        for decide in (lambda: ws.okf.approve(notes.id, [chosen.input]),
                       lambda: ws.okf.reject(record.id, "not a lesson [bold]at all[/]")):
            steps = app.recorder.steps
            await decide()
            for _ in range(200):  # an operator's pace: the decision is written before the next one
                if app.recorder.steps > steps:
                    break
                await pilot.pause(0.02)
        await settle(pilot)
        seen["states"] = {i.id: i.state for i in await ws.okf.queue()}
        seen["ids"] = [notes.id, record.id]
    return path, seen


@pytest.fixture(scope="module")
def okf_recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return asyncio.run(_record(tmp_path_factory.mktemp("okf")))


def _okf_steps(path: Path) -> list[dict[str, Any]]:
    return [dict(s) for s in load_recording(path).steps if s["kind"] == "okf"]


def test_an_approval_and_a_rejection_are_recorded_by_what_they_judged(okf_recorded: tuple[Path, dict[str, Any]]) -> None:
    path, seen = okf_recorded
    approve, reject = _okf_steps(path)
    assert approve["action"] == "approve" and approve["agent"] == "gardener"
    assert approve["inputs"] == ["note:sensor-limit.md", "note:todo.md", "note:watering.md"]
    assert approve["outcomes"] == ["note:watering.md"]
    assert approve["targets"] == ["team/gardener/decisions/watering.md", "team/gardener/lessons/sensor-limit.md"]
    assert reject == {**reject, "action": "reject", "inputs": ["record:run_sample_garden"],
                      "reason": "not a lesson [bold]at all[/]", "outcomes": None}
    text = path.read_text(encoding="ascii")
    assert not any(judgment_id in text for judgment_id in seen["ids"])  # named by inputs, never by random id
    states = {(tuple(j["inputs"]), j["state"]) for j in approve["observed"]["judgments"]}
    assert (("note:sensor-limit.md", "note:todo.md", "note:watering.md"), seen["states"][seen["ids"][0]]) in states
    assert {"agent": "gardener", "inputs": ["record:run_sample_garden"], "state": "rejected"} \
        in reject["observed"]["judgments"]


def test_the_exported_test_decides_through_the_harvest_and_passes(okf_recorded: tuple[Path, dict[str, Any]],
                                                                 tmp_path: Path) -> None:
    path, _ = okf_recorded
    source = export_test(load_recording(path), name="okf")
    assert "await session.decide_judgment('gardener', ['note:sensor-limit.md', 'note:todo.md', " \
           "'note:watering.md'], 'approve', outcomes=['note:watering.md'])" in source
    assert "await session.decide_judgment('gardener', ['record:run_sample_garden'], 'reject', " \
           "reason='not a lesson [bold]at all[/]')" in source
    assert "await session.expect_judgment('gardener', ['record:run_sample_garden'], 'rejected')" in source
    module = tmp_path / "test_okf_export.py"
    module.write_text(source, encoding="utf-8")
    done = _run_pytest(module)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_a_replay_makes_the_same_decisions(okf_recorded: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, _ = okf_recorded
    recording = load_recording(path)
    report = await replay(recording, tmp_path / "replay")
    assert report.matched, report.divergence
    assert report.played == [s["n"] for s in recording.steps]


def _mutated(path: Path, tmp_path: Path, change: dict[str, Any], which: int) -> tuple[Path, int]:
    lines = path.read_text(encoding="ascii").splitlines()
    step = _okf_steps(path)[which]
    line = json.loads(lines[step["n"] + 1])
    line.update(change)
    lines[step["n"] + 1] = json.dumps(line)
    mutated = tmp_path / "mutated.jsonl"
    mutated.write_text("\n".join(lines) + "\n", encoding="ascii")
    return mutated, step["n"]


async def test_a_judgment_that_never_comes_stops_the_replay_there(okf_recorded: tuple[Path, dict[str, Any]],
                                                                  tmp_path: Path) -> None:
    path, _ = okf_recorded
    mutated, n = _mutated(path, tmp_path, {"inputs": ["note:never-written.md"]}, 1)
    report = await replay(load_recording(mutated), tmp_path / "replay", judgment_wait=WAIT)
    assert report.divergence is not None and report.divergence.step == n
    assert report.played == list(range(1, n))
    assert "no pending judgment of gardener on note:never-written.md came" in report.divergence.what
    assert report.divergence.expected == {"agent": "gardener", "inputs": ["note:never-written.md"], "state": "pending"}
    seen = report.divergence.seen
    assert isinstance(seen, list)
    assert {"agent": "gardener", "inputs": ["record:run_sample_garden"], "state": "pending"} in seen


async def test_a_different_decision_stops_the_replay_there_showing_both(okf_recorded: tuple[Path, dict[str, Any]],
                                                                        tmp_path: Path) -> None:
    path, _ = okf_recorded
    mutated, n = _mutated(path, tmp_path, {"action": "approve", "reason": None}, 1)  # approved (nothing to deliver: its one outcome drops) where it was rejected
    report = await replay(load_recording(mutated), tmp_path / "replay", judgment_wait=WAIT)
    assert report.divergence is not None and report.divergence.step == n
    assert "judgment of gardener on record:run_sample_garden: expected rejected, seen approved" \
        in report.divergence.what
    expected, seen = report.divergence.expected, report.divergence.seen
    assert isinstance(expected, dict) and isinstance(seen, dict)
    assert {"agent": "gardener", "inputs": ["record:run_sample_garden"], "state": "rejected"} in expected["judgments"]
    assert {"agent": "gardener", "inputs": ["record:run_sample_garden"], "state": "approved"} in seen["judgments"]


@pytest.mark.parametrize(("change", "reason"), [
    ({"action": "keep"}, "an okf step approves or rejects, not 'keep'"),
    ({"inputs": []}, "an okf step names the inputs of its judgment (inputs is empty)"),
    ({"inputs": "note:a.md"}, "an okf step's inputs is a list of inputs"),
    ({"inputs": ["file:a.md"]}, "an okf step's inputs is a list of inputs"),
    ({"inputs": ["record:[red]x"]}, "run must be a plain identifier"),
    ({"agent": "[bold]gardener"}, "agent must be a plain identifier"),
    ({"attempt": 0}, "an okf step's attempt is a whole number from 1, not 0"),
    ({"action": "approve", "reason": None, "outcomes": ["note:other.md"]},
     "an okf step's outcomes are some of its inputs"),
    ({"reason": ""}, "an okf rejection says why (reason)"),
    ({"reason": "no", "outcomes": ["record:run_sample_garden"]}, "only an approval names outcomes"),
    ({"observed": {"runs": [], "grants": {}, "insights": [], "judgments": [{"agent": "gardener", "state": "odd state"}]}},
     "state must be a plain identifier"),
])
def test_the_loader_refuses_a_malformed_judgment_step(okf_recorded: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                      change: dict[str, Any], reason: str) -> None:
    path, _ = okf_recorded
    mutated, n = _mutated(path, tmp_path, change, 1)
    with pytest.raises(RecordingError) as refused:
        load_recording(mutated)
    assert refused.value.line == n + 2
    assert reason in refused.value.reason


def test_a_recording_without_judgments_still_loads_and_compares_none(okf_recorded: tuple[Path, dict[str, Any]]) -> None:
    path, _ = okf_recorded
    lines = []
    for raw in path.read_text(encoding="ascii").splitlines():
        line = json.loads(raw)
        if isinstance(line.get("observed"), dict):
            line["observed"].pop("judgments", None)
        lines.append(json.dumps(line))
    recording = parse_recording(lines)
    assert recording.steps and all("judgments" not in (s["observed"] or {}) for s in recording.steps)
    old = recording.steps[-1]["observed"]
    assert old is not None
    seen: Observation = {**old, "judgments": [{"agent": "gardener", "inputs": ["note:a.md"], "state": "pending"}]}
    assert compare(old, seen, {}) is None  # not observed then: nothing to compare
    assert compare(seen, old, {}) is None  # not observed now: nothing to compare
    assert compare(seen, {**old, "judgments": []}, {}) == \
        "judgment of gardener on note:a.md: expected pending, seen no such judgment"


async def test_demo_from_the_recording_decides_in_the_judgments_pane(okf_recorded: tuple[Path, dict[str, Any]],
                                                                    tmp_path: Path) -> None:
    path, _ = okf_recorded
    recording = load_recording(path)
    shots = tmp_path / "shots"
    app = RecordedDemoApp(Settings(path=tmp_path / "ws"), recording, speed=200, screenshots=shots, exit_at_end=True)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if len(app.completed) == len(app.steps) or app.failures:
                break
        assert app.failures == []
        assert app.completed == ["load"] + [f"step_{s['n']}" for s in recording.steps]
        assert app.main.active == "judgments"
    last = (shots / f"{len(recording.steps) + 1:02d}-step_{recording.steps[-1]['n']}.svg").read_text(encoding="utf-8")
    assert "rejects" in last and "OKF" in last
