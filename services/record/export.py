"""``export_test``: a recording as a pytest module a person would keep.

The module opens a fresh workspace with the recording's starting state (the one data blob, as
JSON), then does each step as readable code, one named step after another: the operator's actions
and scripted failures through the session's control helpers (the ``FakeCloud`` in process, or, with
``served=True``, ``RemoteCloud`` over HTTP against a server the test starts), the app's calls through
the real SDK (``services.sdk.Crouter``), and insight and OKF judgment decisions through the workspace
(``decide_insight``, ``decide_judgment``). After each step it asserts what changed in what the recording
observed: run statuses, each run's events by type and in order, grant states, insight reviews' and
OKF judgments' outcomes; a refused call is asserted refused with its status.

Every value from the recording is written with ``repr`` (text from outside is data in the module,
never code), and the comments hold only ids the format validated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import unquote

from .format import Observation, ObservedRun, Recording, StepFields, fields, items
from .observe import changes_between
from .replay import describe
from .sdk_calls import attempts, keyword_arguments, sdk_code

__all__ = ["export_test"]


class _Id:
    """A run id written as ``session.id('...')`` (the id the run has in the replay)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"session.id({self.value!r})"


def _kwargs(values: Mapping[str, object]) -> list[str]:
    return keyword_arguments(values)


def _comment(text: object) -> str:
    """Text from a recording as it may stand in a comment or the docstring: ASCII, every control,
    quote and backslash escaped (``ascii``), so no newline ends the comment and no quote the docstring."""
    return ascii(str(text))[1:-1].replace('"', "\\x22")


def _call(step: StepFields) -> str:
    """The session call that does an operator's step or a scripted failure."""
    body = dict(step.get("body") or {})
    parts = [unquote(p) for p in str(step["path"]).strip("/").split("/")]
    method = step["method"]
    if step["kind"] == "failure":
        args = [repr(body.pop("op", None)), repr(body.pop("answer", None))] + _kwargs(body)
        return f"session.fail_next({', '.join(args)})"
    if method == "POST" and parts[0] == "runs" and len(parts) == 3:
        run, action = parts[1], parts[2]
        if action == "message":
            return f"session.send_message({', '.join([repr(run), repr(body.pop('text', ''))] + _kwargs(body))})"
        if action == "cancel":
            return f"session.cancel({run!r})"
        return f"session.run_action({', '.join([repr(run), repr(action)] + _kwargs(body))})"
    if method == "POST" and parts[0] == "people" and len(parts) >= 3:
        user = parts[1]
        if parts[2] == "runs" and len(parts) == 3:
            prompt = body.pop("prompt", "")
            if step.get("made"):
                body["made"] = step["made"]
            return f"session.start_run({', '.join([repr(user), repr(prompt)] + _kwargs(body))})"
        if parts[2] == "grant" and len(parts) == 4:
            return f"session.grant({', '.join([repr(user), repr(parts[3])] + _kwargs(body))})"
        if len(parts) == 3:
            return f"session.person({', '.join([repr(user), repr(parts[2])] + _kwargs(body))})"
    return f"session.control({method!r}, {step['path']!r}, {body!r})"


def _step_lines(step: StepFields) -> list[str]:
    """The code of one step (without its assertions on what it left behind)."""
    kind = step["kind"]
    status = step.get("status")
    refused = status is not None and status >= 400
    if kind == "insight":
        extra = ({"candidate": step.get("candidate"), "text": step.get("text")} if step["action"] == "approve"
                 else {"reason": step.get("reason")})
        args = [repr(step["title"]), repr(step["action"])] + _kwargs(extra)
        return [f"await session.decide_insight({', '.join(args)})"]
    if kind == "okf":
        chosen: dict[str, object] = ({"outcomes": step.get("outcomes")} if step["action"] == "approve"
                                     else {"reason": step.get("reason")})
        args = [repr(step.get("agent")), repr(list(step.get("inputs") or [])), repr(step["action"])] + _kwargs(chosen)
        return [f"await session.decide_judgment({', '.join(args)})"]
    if kind == "app":
        if not step.get("user"):
            return ["# not replayed: the cloud knew no person for this call (no valid token)"]
        code = sdk_code(step, "app", _Id)
        if code is None:
            return [f"# not replayed: {step.get('op')} is a stream read, it changes nothing"]
        if refused:
            return [f"await session.expect_refusal(session.app_call({step['user']!r}, lambda app: {code}))"
                    f"  # recorded: {status}"]
        lines = [f"app = await session.app({step['user']!r})"]
        if step.get("made"):
            lines.append(f"run = await {code}")
            lines.append(f"session.alias({step['made']!r}, run.id)")
        else:
            lines.append(f"await {code}")
        return lines
    call = _call(step)
    if refused:
        return [f"await session.expect_refusal({call}, {status!r}, {step.get('error')!r})"]
    return [f"await {call}"]


def _expect_lines(before: Observation | None, after: Observation | None) -> list[str]:
    if after is None:
        return []
    changed = changes_between(before, after)
    lines = []
    for run in changed["runs"]:
        deleted = ", deleted=True" if run.get("deleted") else ""
        lines.append(f"await session.expect_run({run['id']!r}, status={run['status']!r}, "
                     f"events={run['events']!r}{deleted})")
    for user, state in changed["grants"].items():
        lines.append(f"await session.expect_grant({user!r}, {state!r})")
    for title, status in changed["insights"]:
        lines.append(f"await session.expect_insight({title!r}, {status!r})")
    for judgment in changed.get("judgments", []):
        lines.append(f"await session.expect_judgment({judgment['agent']!r}, {judgment['inputs']!r}, "
                     f"{judgment['state']!r})")
    return lines


def export_test(recording: Recording, *, served: bool = False, name: str = "session") -> str:
    """The pytest module that replays ``recording`` and asserts what it observed."""
    header = recording.header
    steps = attempts(recording.steps)
    function = "".join(c if c.isascii() and c.isalnum() else "_" for c in name.lower()).strip("_") or "session"
    if function[0].isdigit():
        function = "recorded_" + function
    lines = [
        f'"""A workbench session recorded at {_comment(header.get("started_at", "an unknown time"))} '
        f'({len(steps)} steps), replayed as a test.',
        "",
        "Each step does what was done then, in order; the lines after it assert what the cloud showed",
        "right after it (only what changed). A failing assertion names the step where behaviour diverged.",
        f"Written by `workbench export-test`{' --served' if served else ''}; edit it like any test.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import json",
        "from pathlib import Path",
        "",
        "import pytest",
        "",
        "from services.record import ReplaySession",
        "",
        "pytestmark = pytest.mark.asyncio",
        "",
        f"SERVED = {served!r}",
        '"""True: the cloud is served on a free loopback port and driven over HTTP (RemoteCloud)."""',
        "",
        "STARTING_STATE = json.loads(",
        f"    {json.dumps(recording.state, ensure_ascii=True, separators=(',', ':'))!r}",
        ")",
        '"""The cloud\'s state before the first step, as recorded (without secrets)."""',
        "",
        "",
        f"async def test_{function}(tmp_path: Path) -> None:",
        "    async with await ReplaySession.open(tmp_path / \"workspace\", STARTING_STATE, served=SERVED) as session:",
    ]
    previous: Observation | None = None
    first = recording.steps[0].get("observed") if recording.steps else None
    previous = _before_first(recording, first)
    for step in steps:
        attempts_note = f" ({step['attempts']} attempts)" if step.get("attempts", 1) > 1 else ""
        lines.append(f"        # step {int(step['n'])} at {float(step['at']):.2f} s: {_comment(describe(step))}{attempts_note}")
        lines.extend(f"        {line}" for line in _step_lines(step))
        lines.extend(f"        {line}" for line in _expect_lines(previous, step.get("observed")))
        if step.get("observed") is not None:
            previous = step["observed"]
        lines.append("")
    if not steps:
        lines.append("        pass  # the recording holds no step")
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def _before_first(recording: Recording, first: Observation | None) -> Observation:
    """What the starting state shows (the runs and grants the first step's changes are measured from)."""
    state = recording.state
    runs: list[ObservedRun] = []
    for found in items(state.get("runs")):
        run = fields(found)
        runs.append({"id": str(run["id"]), "user": str(run["user_id"]), "status": str(run.get("status", "running")),
                     "deleted": bool(run.get("deleted")),
                     "events": [str(fields(e).get("type")) for e in items(run.get("events"))]})
    grants: dict[str, str | None] = {}
    for found in items(state.get("users")):
        user = fields(found)
        grant = fields(user.get("grant")).get("state")
        grants[str(user["id"])] = grant if isinstance(grant, str) else None
    insights = [list(r) for r in (first.get("insights", []) if first else []) if r[1] == "pending"]
    before: Observation = {"runs": runs, "grants": grants, "insights": insights}
    if first is not None and "judgments" in first:  # the judgments pending at the start are not steps' doing
        before["judgments"] = [j for j in first["judgments"] if j["state"] == "pending"]
    return before
