"""``replay``: play a recording into a fresh workspace and stop at the first step that differs.

Each step is played (``ReplaySession.play``), its answer compared with the recorded one (a call that
succeeded succeeds, a refused one is refused with the same status and code), then what the cloud
shows is compared with what the recording observed after that step. The first difference stops the
replay with a ``Divergence`` naming the step, what differs, and both observations.

``comparison(report)`` is that divergence as the comparison screen's read model
(``services.desk.diff.Comparison``): the recorded observation after the step (side A) against what
the replay saw (side B), first difference first (``workbench replay FILE --inspect``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast
from urllib.parse import unquote

from ..desk.diff import Comparison, DiffRow, diff_observations, judgment_rows
from ..errors import ServiceError
from ..text import distinct_titles, run_title
from .format import Observation, Recording, Step, StepFields
from .sdk_calls import attempts
from .session import JUDGMENT_WAIT_S, Divergence, ReplaySession, StepOutcome

__all__ = ["ReplayReport", "replay", "check_outcome", "describe", "comparison", "recorded_run_names"]


@dataclass
class ReplayReport:
    """How a replay went: the steps that matched, and the divergence that stopped it (None: none)."""

    played: list[int] = field(default_factory=list)
    divergence: Divergence | None = None
    step: Step | None = None
    """The step that diverged (None: none did)."""
    expected: Observation | None = None
    """What the recording observed after that step (None: it observed nothing)."""
    seen: Observation | None = None
    """What the replay's cloud showed when the step diverged (None: it could not be read)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Recorded run id -> the id the same run had on replay."""

    @property
    def matched(self) -> bool:
        return self.divergence is None


def check_outcome(step: Step, outcome: StepOutcome) -> None:
    """``Divergence`` when a replayed call ended otherwise than the recorded one."""
    recorded = step.get("status")
    if recorded is None:
        return
    expected_ok = recorded < 400
    seen_ok = outcome.status is not None and outcome.status < 400
    if expected_ok and seen_ok:
        return
    if step["kind"] == "app" and not expected_ok and not seen_ok:
        return  # an app's refused call is refused again (its status may be the refresh's or the call's)
    error = step.get("error")
    expected = f"{recorded}{' ' + error if error else ''}" if not expected_ok else "success"
    seen = repr(outcome) if not seen_ok else "success"
    if expected_ok != seen_ok or recorded != outcome.status or (error and error != outcome.error):
        raise Divergence(int(step["n"]), f"{describe(step)}: expected {expected}, seen {seen}", expected, seen)


async def replay(recording: Recording, folder: Path | str, *, served: bool = False,
                 on_step: Callable[[Step], Awaitable[None]] | None = None,
                 judgment_wait: float = JUDGMENT_WAIT_S) -> ReplayReport:
    """Play ``recording`` on a fresh workspace in ``folder`` (embedded, or served over HTTP); a recording
    without its end line is refused (``RecordingError``): it cannot say that every step is there;
    ``judgment_wait``: how long a step waits for the harvest to judge what a recorded judgment judged."""
    recording.check_complete()  # a file that lost its end (or its last steps) matches nothing
    report = ReplayReport()
    async with await ReplaySession.open(folder, recording.state, served=served) as session:
        session.judgment_wait = judgment_wait
        for step in attempts(recording.steps):
            try:
                outcome = await session.play(step)
                check_outcome(step, outcome)
                await session.expect(int(step["n"]), step.get("observed"))
            except Divergence as divergence:
                report.divergence, report.step = divergence, step
                report.expected = step.get("observed")
                report.seen = _observation(divergence.seen)
                if report.seen is None:  # the call's outcome differed: what the cloud showed then
                    try:
                        report.seen = await session.observe()
                    except ServiceError:
                        report.seen = None
                report.aliases = dict(session.aliases)
                break
            report.played.append(int(step["n"]))
            if on_step is not None:
                await on_step(step)
    return report


def recorded_run_names(recording: Recording) -> dict[str, str]:
    """Each run a recording knows (in its starting state, or started by a step) by its one display name
    (``run_title``, with a short id where two share it), keyed by its recorded id. Untrusted: shown as data."""
    titles: dict[str, str] = {}
    runs = recording.state.get("runs") if isinstance(recording.state, dict) else None
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and isinstance(run.get("id"), str):
            params = run.get("params") if isinstance(run.get("params"), dict) else {}
            titles[run["id"]] = run_title(run.get("name"), params.get("prompt"), run["id"])
    for step in recording.steps:
        made, body = step.get("made"), step.get("body")
        if isinstance(made, str) and made:
            body = body if isinstance(body, dict) else {}
            titles[made] = run_title(body.get("name"), body.get("prompt"), made)
    return distinct_titles(titles)


def describe(step: StepFields, names: Mapping[str, str] | None = None) -> str:
    """A step in words (ids and kinds only; text from outside is left to the caller to show as data).
    ``names`` gives a run's display name by its recorded id (``recorded_run_names``): a run is named by it."""
    kind = step["kind"]
    if kind == "app":
        run = next((part for part in unquote(str(step.get("path", ""))).split("/") if part.startswith("run_")), None)
        on = f" on “{(names or {}).get(run, run)}”" if run and names and run in names else ""
        return f"the app ({step.get('user') or 'unknown person'}) calls {step.get('op')}{on}"
    if kind == "insight":
        return f"the operator {'approves' if step.get('action') == 'approve' else 'rejects'} an insight review"
    if kind == "okf":
        verb = "rejects" if step.get("action") == "reject" else \
            "approves some outcomes of" if step.get("outcomes") is not None else "approves"
        count = len(step.get("inputs") or [])
        return f"the operator {verb} the OKF judgment of {step.get('agent')} ({count} input{'' if count == 1 else 's'})"
    if kind == "failure":
        body = step.get("body") or {}
        return f"a scripted failure: the next {body.get('op')} answers {body.get('answer')}"
    path = str(step.get("path", ""))
    parts = [unquote(part) for part in path.strip("/").split("/")]
    if parts[0] == "runs" and len(parts) == 3:
        verbs = {"reply": "replies as the model to", "fail_turn": "fails a turn of", "settle": "settles",
                 "ask": "asks a question on", "idle": "idles", "emit": "emits an event on", "delete": "deletes",
                 "message": "sends a message (as the app) to", "cancel": "cancels (as the app)"}
        run = (names or {}).get(parts[1])
        return f"the operator {verbs.get(parts[2], parts[2])} " + (f"“{run}”" if run else f"run {parts[1]}")
    if parts[0] == "people" and len(parts) >= 3:
        if parts[2] == "runs":
            return f"the operator starts a run (as the app) for {parts[1]}"
        if parts[2] == "grant" and len(parts) == 4:
            return f"the operator {parts[3]}s the grant of {parts[1]}"
        if parts[2] == "reconnect":
            return f"the operator restores the grant of {parts[1]} (a new sign-in)"
        return f"the operator does {parts[2]} for {parts[1]}"
    return f"the operator calls {step.get('method')} {path}"


def _observation(value: object) -> Observation | None:
    """``value`` when it is a whole observation (a divergence's seen may be words or judgments)."""
    if isinstance(value, dict) and isinstance(value.get("runs"), list) and isinstance(value.get("grants"), dict):
        return cast(Observation, value)
    return None


def comparison(report: ReplayReport) -> Comparison | None:
    """The divergence that stopped ``report`` as the comparison screen shows it: the step (what it
    did, its outcome when that differed, the judgment it waited for), then the recorded observation
    (side A) against the replay's (side B); None when every step matched."""
    divergence = report.divergence
    if divergence is None:
        return None
    step = report.step
    rows = [DiffRow("step", f"step {divergence.step}: {describe(step)}" if step is not None else f"step {divergence.step}",
                    "as replayed", False)]
    expected, seen = divergence.expected, divergence.seen
    if isinstance(expected, str) and isinstance(seen, str):  # the call ended otherwise
        rows.append(DiffRow("step", f"outcome {expected}", f"outcome {seen}", True))
    elif isinstance(expected, dict) and "agent" in expected and isinstance(seen, list):  # a judgment never came
        rows += judgment_rows([expected], [j for j in seen if isinstance(j, dict)])
    if report.expected is not None and report.seen is not None:
        rows += diff_observations(report.expected, report.seen, report.aliases)
    return Comparison("expected (recorded)", "seen (replayed)", rows,
                      note=f"step {divergence.step}: {divergence.what}")
