"""The recording format: validated on load, hostile files refused with the line and the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.cloud import FakeCloud
from services.cloud.state import export_state
from services.record import FORMAT, VERSION, RecordingError, load_recording, parse_recording, scrub, scrub_state
from services.record.format import MAX_DEPTH, MAX_LINE_BYTES, REDACTED


def _lines(*steps: dict[str, Any], header: dict[str, Any] | None = None) -> list[str]:
    cloud = FakeCloud(client_id="app")
    cloud.user("user:ada")
    state = scrub_state(export_state(cloud))
    head = header or {"format": FORMAT, "version": VERSION, "source": "embedded", "client_id": "app",
                      "started_at": "2026-12-01T15:00:00Z"}
    return [json.dumps(head), json.dumps({"type": "state", "state": state}), *(json.dumps(s) for s in steps)]


def _step(**fields: Any) -> dict[str, Any]:
    base = {"type": "step", "n": 1, "at": 0.5, "kind": "operator", "method": "POST",
            "path": "/runs/run_1/reply", "body": {"text": "hello"}, "status": 200, "error": None, "made": None,
            "observed": {"runs": [{"id": "run_1", "user": "user:ada", "status": "idle", "deleted": False,
                                   "events": ["node.turn.started"]}], "grants": {"user:ada": "active"},
                         "insights": []}}
    return {**base, **fields}


def _refused(lines: list[str]) -> RecordingError:
    with pytest.raises(RecordingError) as caught:
        parse_recording(lines)
    return caught.value


def test_a_valid_recording_loads_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(_lines(_step(), {"type": "end", "at": 0.5, "steps": 1})) + "\n", encoding="utf-8")
    recording = load_recording(path)
    assert recording.ended and len(recording.steps) == 1 and recording.steps[0]["n"] == 1
    assert parse_recording(recording.lines()) == recording


def test_markup_and_controls_in_text_are_kept_as_data() -> None:
    text = "[bold red]hi[/] \x1b[2J \u202e $x [link=https://e.test]x[/link]"
    recording = parse_recording(_lines(_step(body={"text": text})))
    assert recording.steps[0]["body"]["text"] == text


@pytest.mark.parametrize(("lines", "line", "reason"), [
    (lambda: _lines(_step())[:1] + ["{not json"], 2, "damaged: not JSON"),
    (lambda: _lines(_step()) + ["[1, 2]"], 4, "a line is a JSON object"),
    (lambda: _lines(_step()) + [""], 4, "the line is empty"),
    (lambda: _lines(header={"format": FORMAT, "version": VERSION + 1}), 1, f"version {VERSION + 1} is newer"),
    (lambda: _lines(header={"format": "something-else", "version": 1}), 1, "not a workbench recording"),
    (lambda: _lines(header={"format": FORMAT, "version": "1"}), 1, "the version must be a whole number"),
    (lambda: _lines(_step(kind="[bold]operator")), 3, "a step's kind is one of"),
    (lambda: _lines(_step(path="/runs/[red]x[/red]/reply")), 3, "path must be a plain identifier"),
    (lambda: _lines(_step(user="user:ada\x1b[31m")), 3, "user must be a plain identifier"),
    (lambda: _lines(_step(observed={"runs": [{"id": "r", "user": "u", "status": "[blink]idle", "events": []}]})),
     3, "status must be a plain identifier"),
    (lambda: _lines(_step(at=-1)), 3, "a step's time (at)"),
    (lambda: _lines(_step(status=99)), 3, "a step's status is an HTTP status"),
    (lambda: _lines(_step(body={"text": "a\ud800b"})), 3, "holds text no store can keep"),
    (lambda: _lines(_step(), {"type": "end", "at": 1, "steps": 1}, _step()), 5, "nothing may follow the end line"),
    (lambda: _lines()[:1], 2, "the cloud's starting state is missing"),
    (lambda: _lines()[:1] + ['{"type": "state", "state": {"format": "x"}}'], 2, "the starting state does not fit"),
])
def test_a_hostile_recording_is_refused_with_its_line_and_reason(lines: Any, line: int, reason: str) -> None:
    error = _refused(lines())
    assert error.line == line
    assert reason in error.reason, error.reason
    assert str(error).startswith(f"line {line}: ")


def test_a_deep_recording_is_refused() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = {"a": deep}
    error = _refused(_lines(_step(body={"deep": deep})))
    assert error.line == 3 and "deeper than" in error.reason
    very_deep = "{\"a\":" * 100_000 + "1" + "}" * 100_000  # more than the JSON parser nests
    error = _refused(_lines()[:2] + [very_deep])
    assert error.line == 3 and ("deeper than" in error.reason or "damaged" in error.reason)


def test_a_huge_line_is_refused_before_it_is_parsed() -> None:
    huge = json.dumps(_step(body={"text": "x" * (MAX_LINE_BYTES + 10)}))
    error = _refused(_lines() + [huge])
    assert error.line == 3 and "more than the limit" in error.reason


def test_an_empty_or_missing_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(RecordingError, match="the file is empty"):
        load_recording(tmp_path / "empty.jsonl")
    with pytest.raises(RecordingError, match="cannot be read"):
        load_recording(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_bytes(b'{"format": "\xff"}\n')
    with pytest.raises(RecordingError, match="line 1: the line is not UTF-8"):
        load_recording(tmp_path / "bad.jsonl")


def test_secrets_are_scrubbed() -> None:
    cloud = FakeCloud(client_id="app")
    cloud.user("user:ada")
    state = export_state(cloud)
    assert "PRIVATE KEY" in json.dumps(state)
    clean = json.dumps(scrub_state(state))
    assert "PRIVATE KEY" not in clean and "rt_" not in clean
    body = {"access_token": "abc", "nested": [{"Authorization": "Bearer x"}], "max_tokens": 5,
            "note": "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1c2VyOmFkYSJ9.sig"}
    assert scrub(body) == {"access_token": REDACTED, "nested": [{"Authorization": REDACTED}], "max_tokens": 5,
                           "note": REDACTED}


def test_observations_written_as_changes_are_loaded_whole_and_checked() -> None:
    first = _step()
    second = _step(n=2, observed={"delta": True, "ids": ["run_1", "run_2"], "grants": {"user:ada": "revoked"},
                                  "insights": [],
                                  "runs": [{"id": "run_1", "user": "user:ada", "status": "settled", "deleted": False,
                                            "events": ["node.turn.completed"], "after": 1},
                                           {"id": "run_2", "user": "user:ada", "status": "running",
                                            "deleted": False, "events": []}]})
    recording = parse_recording(_lines(first, second))
    assert recording.steps[1]["observed"] == {
        "runs": [{"id": "run_1", "user": "user:ada", "status": "settled", "deleted": False,
                  "events": ["node.turn.started", "node.turn.completed"]},
                 {"id": "run_2", "user": "user:ada", "status": "running", "deleted": False, "events": []}],
        "grants": {"user:ada": "revoked"}, "insights": []}
    wrong = json.loads(json.dumps(second))
    wrong["observed"]["runs"][0]["after"] = 5
    assert "run run_1 grows from 5 events, and it had 1" in _refused(_lines(first, wrong)).reason
    assert _refused(_lines({**second, "n": 1})).reason.startswith("the observation is written as changes")
    missing = json.loads(json.dumps(second))
    missing["observed"]["ids"].append("run_9")
    assert "'run_9' is listed" in _refused(_lines(first, missing)).reason


def _run(status: str, *events: str) -> dict[str, Any]:
    return {"id": "run_1", "user": "user:ada", "status": status, "deleted": False, "events": list(events)}


def _chain() -> list[dict[str, Any]]:
    """Three steps: a whole observation, then two written as changes (each naming the step it builds on)."""
    first = _step()
    second = _step(n=2, observed={"delta": True, "base": 1, "ids": ["run_1"], "grants": {"user:ada": "active"},
                                  "insights": [], "runs": [{**_run("running", "node.message.received"), "after": 1}]})
    third = _step(n=3, observed={"delta": True, "base": 2, "ids": ["run_1"], "grants": {"user:ada": "active"},
                                 "insights": [], "runs": [{**_run("idle", "node.idle"), "after": 2}]})
    return [first, second, third]


def test_a_recording_that_lost_a_line_is_refused_never_matched() -> None:
    steps = _chain()
    end = {"type": "end", "at": 2.0, "steps": 3}
    whole = parse_recording([*_lines(*steps), json.dumps(end)])
    assert [s["n"] for s in whole.steps] == [1, 2, 3] and whole.ended
    assert whole.steps[2]["observed"]["runs"][0]["events"] == ["node.turn.started", "node.message.received",
                                                                "node.idle"]
    # a step line lost in the middle: the numbers as written say so
    gap = _refused([*_lines(steps[0], steps[2]), json.dumps(end)])
    assert gap.line == 4 and "step 3 comes where step 2 was due: a step line is missing" in gap.reason
    # ... and renumbered by hand: the observation names the step it builds on
    renumbered = _refused([*_lines(steps[0], {**steps[2], "n": 2}), json.dumps({**end, "steps": 2})])
    assert renumbered.line == 4
    assert "written as changes since step 2, and the last observation held is step 1" in renumbered.reason
    # the last step line lost: the end line's count says so
    short = _refused([*_lines(*steps[:2]), json.dumps(end)])
    assert short.line == 5 and "the end line counts 3 steps, and 2 were read: a step line is missing" in short.reason
    extra = _refused([*_lines(*steps), json.dumps({**end, "steps": 2})])
    assert "a step line was added" in extra.reason
    # steps swapped
    swapped = _refused([*_lines(steps[1], steps[0]), json.dumps({**end, "steps": 2})])
    assert swapped.line == 3 and "step 2 comes where step 1 was due" in swapped.reason
    assert "the steps are out of order" in _refused(_lines(steps[0], {**steps[1], "n": 1})).reason


def test_a_recording_without_its_end_line_loads_and_cannot_be_called_complete() -> None:
    partial = parse_recording(_lines(*_chain()))
    assert not partial.ended and len(partial.steps) == 3
    with pytest.raises(RecordingError) as caught:
        partial.check_complete()
    assert "no end line" in caught.value.reason and "3 steps read" in caught.value.reason
    empty = parse_recording([*_lines(), json.dumps({"type": "end", "at": 0.0, "steps": 0})])
    empty.check_complete()  # a session with no step, stopped cleanly
    assert "the end line counts 2 steps, and 0 were read" in _refused(
        [*_lines(), json.dumps({"type": "end", "at": 0.0, "steps": 2})]).reason


def test_a_recorded_step_names_its_run_by_title_not_id() -> None:
    """A recording's demo captions name runs as the window does (issue 37): by title, a short id on a clash."""
    from services.record import describe, recorded_run_names
    from services.record.format import Recording

    state = {"runs": [{"id": "run_sample_garden", "name": "garden plan", "params": {"prompt": "Plan the week"}},
                      {"id": "run_00aaaaaa01", "name": "", "params": {"prompt": "Water the beds"}}]}
    steps = [
        {"type": "step", "n": 1, "at": 0.0, "kind": "operator", "method": "POST", "path": "/people/user%3Aada/runs",
         "body": {"prompt": "Water the beds\nat dawn"}, "status": 200, "error": None, "made": "run_00bbbbbb02"},
        {"type": "step", "n": 2, "at": 0.0, "kind": "operator", "method": "POST",
         "path": "/runs/run_sample_garden/reply", "body": {"text": "ok"}, "status": 200, "error": None, "made": None},
        {"type": "step", "n": 3, "at": 0.0, "kind": "app", "user": "user:ada", "op": "run.message", "method": "POST",
         "path": "/v1/runs/run_00bbbbbb02/messages", "query": {}, "body": {"text": "more"}, "status": 201},
    ]
    recording = Recording(header={}, state=state, steps=steps, ended=True)  # type: ignore[arg-type]
    names = recorded_run_names(recording)
    assert names == {"run_sample_garden": "garden plan", "run_00aaaaaa01": "Water the beds · aaaa01",
                     "run_00bbbbbb02": "Water the beds · bbbb02"}
    assert describe(steps[1], names) == "the operator replies as the model to “garden plan”"  # type: ignore[arg-type]
    assert describe(steps[2], names) == "the app (user:ada) calls run.message on “Water the beds · bbbb02”"  # type: ignore[arg-type]
    assert describe(steps[1]) == "the operator replies as the model to run run_sample_garden"  # type: ignore[arg-type]
