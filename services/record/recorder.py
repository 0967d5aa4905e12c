"""``Recorder``: writes a session as it happens, one line per step (``format.py``).

It sits at three seams, none of which needs the window to know it is being recorded:

- the desk's ``ControlClient``: every action an operator takes (reply, fail a turn, settle, revoke,
  restore, start a run or send a message as the app, ...) is one control call, so wrapping the desk's
  ``control`` records them all, in an embedded window and an attached one alike. Reads (``GET``) are
  not steps;
- the cloud's call record (``FakeCloud.calls``), when the cloud runs in this process: an intercept
  that answers nothing sees every runtime call an app makes, and the call's own ``CallRecord`` gives
  its status once answered. The calls the desk makes itself through the SDK (a run started as the
  app from the desk) are told apart by a context variable set while the desk's call runs, and the
  built-in judge's calls are left out;
- the change feed: a scripted failure is recorded where the cloud arms it (its ``failure.armed``
  change), however it was asked for: the desk, ``RemoteCloud.fail_next`` or ``POST /fail_next`` from
  another process, ``FakeCloud.fail_next`` in this one; an attached window hears it on the server's
  change stream. An insight review approved or rejected is recorded with its title, the chosen
  candidate and the text; an OKF harvest judgment approved (whole, or outcome by outcome) or rejected
  is recorded with what it judged (its agent and inputs: the notes and run records), the outcomes
  approved and the reason, once its delivery (or rejection) has ended.

After each step the recorder waits for the desk to catch up with the cloud (``Desk.caught_up``),
observes what changed (``observe.BookObserver``: a step costs what it changed, not what the cloud
holds) and writes the step with what it saw, as what changed since the last observation written.
Every line is written whole and flushed before the next; ``stop`` writes the end line and syncs
the file. Secrets never reach the file: the starting state is ``scrub_state``d and every body ``scrub``bed.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote

from ..changes import Change, ChangeFeed
from ..clock import Clock
from ..desk import JUDGE_USER, ControlClient, Desk, WorkspaceView
from ..served.errors import ControlError
from .format import (
    FORMAT, MAX_LINE_BYTES, MAX_STATE_BYTES, VERSION, EndLine, Header, JsonObject, Observation, ObservationDelta,
    ObservedJudgment, ObservedRun, RecordingError, StateLine, StepFields, StepLine, dump_line, scrub, scrub_fields,
    scrub_state,
)
from .observe import BookObserver, InsightSource, JudgmentSource, insight_states, judgment_inputs, judgment_states

if TYPE_CHECKING:
    from ..cloud import CallRecord, FakeCloud, InterceptContext

__all__ = ["Recorder", "RecordingControl", "start_recording"]

_DESK_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("workbench_desk_call", default=False)
"""True while a desk's control call runs (the SDK calls it makes are the desk's, not an app's)."""
_POLL_S = 0.1
"""How often answered app calls are written."""
FAIL_NEXT = "/fail_next"
"""The control API's path that scripts a failure (recorded from the cloud's change, not the call)."""


class RecordingControl:
    """A ``ControlClient`` that records every call that changes something, then answers as the one it wraps."""

    def __init__(self, inner: ControlClient, recorder: "Recorder") -> None:
        self.inner = inner
        """The control client being recorded."""
        self.recorder = recorder

    def __getattr__(self, name: str) -> object:  # the wrapped client's other members (RemoteCloud's)
        return getattr(self.inner, name)

    async def call(self, method: str, path: str, body: object = None,
                   params: dict[str, object] | None = None) -> object:
        if method == "GET":
            return await self.inner.call(method, path, body, params)
        await self.recorder.flush_calls()  # an app's calls before this action are steps before it
        marker = _DESK_CALL.set(True)
        try:
            answer = await self.inner.call(method, path, body, params)
        except ControlError as refusal:
            await self.recorder.control_step(method, path, body, refusal.status, refusal.code, None)
            raise
        finally:
            _DESK_CALL.reset(marker)
        if method == "POST" and path == FAIL_NEXT:
            await self.recorder.armed()  # the cloud's ``failure.armed`` change is the step
        else:
            await self.recorder.control_step(method, path, body, 200, None, answer)
        return answer


class Recorder:
    """One recording in progress."""

    def __init__(self, path: Path, desk: Desk, *, cloud: "FakeCloud | None", insights: InsightSource | None,
                 feed: ChangeFeed | None, clock: Clock, handle: IO[str], okf: JudgmentSource | None = None) -> None:
        self.path = path
        """The file written."""
        self.desk = desk
        self.cloud = cloud
        self.insights = insights
        self.okf = okf
        """The OKF harvest judgments (None: not observed, decisions not recorded)."""
        self.feed = feed
        self.clock = clock
        self.steps = 0
        """Steps written so far."""
        self.stopped = False
        self._handle = handle
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workbench-recording")
        """Where the file is written (one thread: the lines stay in order)."""
        self._started = clock.time()
        self._lock = asyncio.Lock()
        self._last: Observation | None = None
        self._calls: list[CallRecord | StepFields] = []
        """What waits to be written, in the order it happened: the app's calls (written once answered)
        and the failures the cloud armed (ready at once)."""
        self._observer = BookObserver(desk.book, desk.mirror, desk.changes, read=desk.read_events)
        self._undo: list[Callable[[], object]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._poller: asyncio.Task[None] | None = None
        self._inner: ControlClient = desk.control
        self._reviews: list[list[str]] | None = None
        self._judgments: list[ObservedJudgment] | None = None
        self._judgments_changed = 0
        """Counts the harvest's changes: a read that a change overtook is not kept."""
        self._approving: dict[str, bool] = {}
        """Judgment id -> whole, for an approval claimed and not yet delivered."""
        self._written: Observation | None = None
        """The last observation written (the next is written as what changed since)."""
        self._written_n = 0
        """The step whose observation that is."""

    # -- life ---------------------------------------------------------------------------------

    async def _begin(self, state: JsonObject, source: str, client_id: str) -> None:
        header: Header = {"format": FORMAT, "version": VERSION, "source": source, "client_id": client_id,
                  "started_at": datetime.fromtimestamp(self._started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        first: StateLine = {"type": "state", "state": scrub_state(state)}
        state_line = dump_line(first)
        if len(state_line) > MAX_STATE_BYTES:
            raise RecordingError(f"the cloud's state is {len(state_line)} bytes, more than a recording keeps "
                                 f"({MAX_STATE_BYTES})")
        await self._write(dump_line(header) + "\n" + state_line)
        self._last = await self._observe()
        self.desk.control = RecordingControl(self._inner, self)
        if self.cloud is not None:
            self._tap_calls(self.cloud)
            self._poller = asyncio.create_task(self._poll())
        if self.feed is not None:
            self._undo.append(self.feed.subscribe(self._on_change))

    async def stop(self) -> None:
        """Stop recording: the last answered calls and the end line are written, the file synced and closed."""
        if self.stopped:
            return
        self.stopped = True
        if isinstance(self.desk.control, RecordingControl):  # what it wraps now (an attached desk may have moved)
            self.desk.control = self.desk.control.inner
        for undo in self._undo:
            undo()
        self._observer.close()
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.flush_calls(final=True)
        async with self._lock:
            end: EndLine = {"type": "end", "at": self._at(), "steps": self.steps}
            await self._write(dump_line(end))
            try:
                await asyncio.get_running_loop().run_in_executor(self._writer, self._close)
            finally:
                self._writer.shutdown(wait=False)

    def _close(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    # -- the seams ----------------------------------------------------------------------------

    async def control_step(self, method: str, path: str, body: object, status: int, error: str | None,
                           answer: object) -> None:
        """A control call the desk made (called by ``RecordingControl``)."""
        if self.stopped:
            return
        await self.flush_calls()
        self._observer.touched(_run_touched(path))
        kept = {k: v for k, v in body.items() if k != "idempotency_key"} if isinstance(body, dict) else body
        run_id = answer.get("run_id") if isinstance(answer, dict) else None
        made = run_id if isinstance(run_id, str) else None
        step: StepFields = {"kind": "failure" if path == FAIL_NEXT else "operator", "method": method, "path": path,
                            "body": _body(kept), "status": status, "error": error, "made": made}
        await self._step(step)

    def _tap_calls(self, cloud: "FakeCloud") -> None:
        from ..cloud.failures import Intercept

        async def seen(ctx: "InterceptContext") -> None:
            if _DESK_CALL.get() or ctx.user_id == JUDGE_USER or self.stopped:
                return None
            record = next((r for r in reversed(cloud.calls) if r.query is ctx.query), None)
            await self.flush_calls()  # the calls answered before this one are observed as they left the cloud
            if record is not None:
                self._calls.append(record)
            return None

        # first in line: a scripted failure answering before it would hide the call
        entry = Intercept("*", seen, None, float("inf"))
        intercepts = cloud.state.failures.intercepts
        intercepts.insert(0, entry)
        self._undo.append(lambda: intercepts.remove(entry) if entry in intercepts else None)

    async def armed(self) -> None:
        """A failure the desk scripted was armed: once the desk has caught up with the cloud (whose
        ``failure.armed`` change queued it), it is written."""
        await self.desk.caught_up()
        await self.flush_calls()

    def _on_change(self, change: Change) -> None:
        if change.source == "cloud" and change.kind == "failure.armed" and not self.stopped:
            # queued where it was armed, before any call it answers; however it was asked for
            data = change.data
            body = {"op": data.get("op"), "answer": data.get("answer"), "user": data.get("user"),
                    "times": data.get("times")}
            self._calls.append({"kind": "failure", "method": "POST", "path": FAIL_NEXT, "body": _body(body),
                                "status": 200, "error": None, "made": None})
            return
        if change.source == "insights":
            self._reviews = None
        if change.source == "insights" and change.kind in ("review.approved", "review.rejected") and not self.stopped:
            self._spawn(self._insight_step(change))
        if change.source == "okf":
            self._judgments = None
            self._judgments_changed += 1
            if self.okf is None or self.stopped or not change.kind.startswith("judgment."):
                return
            state = change.kind.partition(".")[2]
            if state == "delivering" and "whole" in change.data:  # an approval claimed; delivery follows
                self._approving[change.id] = bool(change.data["whole"])
            elif change.id in self._approving:  # the delivery ended (delivered, failed, or left to finish)
                self._spawn(self._okf_step(change.id, "approve", self._approving.pop(change.id)))
            elif state == "rejected":
                self._spawn(self._okf_step(change.id, "reject", False))

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _okf_step(self, judgment_id: str, action: str, whole: bool) -> None:
        """An OKF judgment decided: named by its agent and inputs; the outcomes approved one by one."""
        if self.okf is None:
            return
        detail = await self.okf.detail(judgment_id)
        names = {o.input: f"{o.input_kind}:{o.input_name}" for o in detail.outcomes}
        approved = sorted(names[o.input] for o in detail.outcomes if o.decision == "approved")
        targets = sorted({c for o in detail.outcomes for c in o.concepts})
        await self.flush_calls()
        await self._step({"kind": "okf", "action": action, "agent": detail.item.agent,
                          "inputs": judgment_inputs(detail), "attempt": detail.item.attempt, "targets": targets,
                          "outcomes": None if whole or action != "approve" else approved,
                          "reason": detail.item.reason if action == "reject" else None})

    async def _insight_step(self, change: Change) -> None:
        if self.insights is None:
            return
        review = await self.insights.get(change.id)
        await self.flush_calls()
        await self._step({"kind": "insight", "action": "approve" if change.kind == "review.approved" else "reject",
                          "title": review.proposal.title, "candidate": review.chosen, "text": review.text,
                          "reason": review.reason})

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(_POLL_S)
            # its own task, shielded: ``stop`` cancels this loop, never a step half made (a call taken
            # off the queue and not written, or a line written and not counted); ``stop`` waits for it
            flush = asyncio.ensure_future(self.flush_calls())
            self._tasks.add(flush)
            flush.add_done_callback(self._tasks.discard)
            try:
                await asyncio.shield(flush)
            except Exception:  # a write that failed now is tried again at the next poll or at stop
                continue

    async def flush_calls(self, *, final: bool = False) -> None:
        """Write the app's calls answered so far (``final``: every one, answered or not), in order."""
        while self._calls and (final or isinstance(self._calls[0], dict) or self._calls[0].status is not None):
            record = self._calls.pop(0)
            if isinstance(record, dict):  # a failure the cloud armed
                await self._step(record)
                continue
            step: StepFields = {
                "kind": "app", "user": record.user_id, "op": record.op, "method": record.method,
                "path": record.path, "query": scrub_fields(dict(record.query)), "body": _body(record.body),
                "key": record.idempotency_key, "status": record.status, "made": None,
            }
            await self._step(step)

    # -- writing ------------------------------------------------------------------------------

    async def _step(self, step: StepFields) -> None:
        async with self._lock:
            observed = await self._observe()
            if step["kind"] == "app" and step["op"] == "run.start" and (step["status"] or 0) < 300:
                before = {r["id"] for r in (self._last["runs"] if self._last else [])}
                step["made"] = next((r["id"] for r in observed["runs"] if r["id"] not in before
                                     and r["user"] == step["user"]), None)
            self._last = observed
            line: StepLine = {"type": "step", "n": self.steps + 1, "at": self._at(), **step,
                              "observed": self._changes(observed)}
            text = dump_line(line)
            if len(text) > MAX_LINE_BYTES:  # kept without what it saw, rather than not at all
                line["observed"] = None
                text = dump_line(line)
            if len(text) > MAX_LINE_BYTES:
                raise RecordingError(f"step {self.steps + 1} is larger than a recording keeps ({MAX_LINE_BYTES} bytes)")
            await self._write(text)
            self.steps += 1
            if line["observed"] is not None:
                self._written, self._written_n = observed, self.steps
                self._observer.rebuilt.clear()

    def _changes(self, observed: Observation) -> Observation | ObservationDelta:
        """``observed`` as what changed since the last observation written (whole when none was): a
        run the observer did not touch is the same object, one that only grew carries its new events."""
        base = self._written
        if base is None:
            return observed
        old = {r["id"]: r for r in base["runs"]}
        rebuilt = self._observer.rebuilt
        runs: list[ObservedRun] = []
        for run in observed["runs"]:
            before = old.get(run["id"])
            if before is run:
                continue
            if before is not None and run["id"] not in rebuilt:  # only grew since (or changed its status)
                count = len(before["events"])
                runs.append({**run, "events": run["events"][count:], "after": count})
            else:
                runs.append(run)
        written: ObservationDelta = {"delta": True, "base": self._written_n, "runs": runs, "grants": observed["grants"],
                                     "insights": observed["insights"]}
        if len(observed["runs"]) != len(base["runs"]) or any(r["id"] not in old for r in runs):
            written["ids"] = [r["id"] for r in observed["runs"]]  # a run came or went: the order is written
        if "judgments" in observed:
            written["judgments"] = observed["judgments"]
        return written

    async def _observe(self) -> Observation:
        """What the cloud shows now, from the desk's book and mirror once the desk has caught up with the
        cloud (an attached window's follow its change stream), reading only what changed (``BookObserver``;
        the insight reviews read again only after one changed)."""
        await self.desk.caught_up()
        if self._reviews is None:
            self._reviews = await insight_states(self.insights)
        observed = await self._observer.observe(self._reviews)
        if self.okf is not None:
            judgments = self._judgments
            if judgments is None:
                changed = self._judgments_changed
                judgments = await judgment_states(self.okf)
                if changed == self._judgments_changed:
                    self._judgments = judgments
            observed["judgments"] = judgments
        return observed

    def _at(self) -> float:
        return round(max(0.0, self.clock.time() - self._started), 3)

    async def _write(self, text: str) -> None:
        def write() -> None:
            self._handle.write(text + "\n")
            self._handle.flush()
        # the recorder's own thread: a line never waits behind the work others queue on the shared pool
        await asyncio.get_running_loop().run_in_executor(self._writer, write)


def _run_touched(path: str) -> str | None:
    """The run a control call acted on (``/runs/<id>/...``), ``""`` for a person's action (no run's
    events or status change without the cloud saying so), None for anything else (it may touch any run)."""
    parts = path.strip("/").split("/")
    if parts[0] == "runs" and len(parts) >= 2:
        return unquote(parts[1])
    if parts[0] == "people":
        return ""
    return None


def _body(value: object) -> JsonObject | None:
    """A call's body as a step keeps it, its secrets replaced: a JSON object, or null, or any other
    JSON value kept under ``value``."""
    clean = scrub(value)
    if isinstance(clean, dict) or clean is None:
        return clean
    return {"value": clean}


def _okf(workspace: WorkspaceView) -> JudgmentSource | None:
    """The workspace's OKF harvest judgments, when it has them open."""
    try:
        found: JudgmentSource | None = getattr(workspace, "okf")
    except Exception:  # a workspace without them records the rest
        return None
    return found


def _insights(workspace: WorkspaceView) -> InsightSource | None:
    """The workspace's insight reviews, when it has them open."""
    try:
        found: InsightSource | None = workspace.insights
    except Exception:  # a workspace without them (attached before they opened) records the rest
        return None
    return found


async def start_recording(path: Path | str, workspace: WorkspaceView) -> Recorder:
    """Start recording an open workspace (``Workspace``) into ``path`` (a new file, or an empty one)."""
    path = Path(path)
    if os.path.islink(path):
        raise RecordingError(f"{path} is a symbolic link; record into a new file")
    if path.exists() and path.is_file() and path.stat().st_size > 0:
        raise RecordingError(f"{path} already holds something; record into a new file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # never through a link (one made meanwhile included): the recording lands where it was asked to
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        handle = os.fdopen(fd, "w", encoding="ascii", newline="\n")
    except OSError as exc:
        raise RecordingError(f"{path} cannot be written: {exc.strerror or exc}") from None
    desk: Desk = workspace.desk
    cloud = getattr(workspace, "cloud", None)
    recorder = Recorder(path, desk, cloud=cloud, insights=_insights(workspace),
                        feed=getattr(workspace, "feed", None), clock=workspace.settings.clock, handle=handle,
                        okf=_okf(workspace))
    try:
        state = await desk.control.call("GET", "/state")
        source = "attached" if getattr(workspace, "attached", None) is not None else "embedded"
        await recorder._begin(state, source, str(workspace.settings.client_id))
    except BaseException:
        handle.close()
        raise
    return recorder
