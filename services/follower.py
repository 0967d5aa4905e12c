"""The run follower: carries what a cloud's runs do into the canvas and the memory outbox.

It reads runs from a ``RunSource``: ``EmbeddedRuns`` (an in-process cloud's public surface), or, in
a window attached to a server, ``services.attached.BookRuns`` (the runs its desk holds) or
``services.attached.ServedRuns`` (any served cloud, over the wire), never from a cloud's private state; the changes
it follows arrive on its ``ChangeFeed`` (a served cloud's change stream republished there).

It listens to the cloud's ``Change`` feed (run started, event appended, run deleted), queues each
change, and applies them from one background task, in order:

- the canvas ``RunBridge`` keeps one node per run (and per child node) with statuses, inbox entries
  for pending messages and events with levels; text deltas are skipped (the bridge records none);
- each completed root turn is captured into the memory outbox (the turn's input as the person's
  message, its text as the assistant's), and, when a harvest is attached, as an OKF run record.

A failure applying one change is recorded in ``errors`` and published; it never stops the rest.
The last captured turn of each run is kept in ``state_path`` (atomic writes), so re-opening a
workspace whose runs replay (the sample world's fixed ids) never captures a turn twice.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .changes import Change, ChangeFeed
from .files import CorruptFileError, atomic_write_json, read_json

__all__ = [
    "EmbeddedRuns",
    "FollowedRun",
    "RunFollower",
    "RunSource",
    "run_record",
    "turn_messages",
]

WIRE_RUN_FIELDS = ("id", "user_id", "name", "status", "activity", "params", "outcome", "result", "last_turn_error",
                   "question", "pending", "messages", "created_at", "updated_at", "last_event_id")
"""The fields of a run as ``run.get`` answers it on the wire (what the canvas bridge reads)."""


@dataclass(frozen=True)
class FollowedRun:
    """A run as the follower reads it: its wire DTO and (when asked for) its event log."""

    id: str
    user_id: str
    deleted: bool
    dto: dict[str, Any]
    """The run's wire DTO (``WIRE_RUN_FIELDS``)."""
    events: Sequence[dict[str, Any]]


class RunSource(Protocol):
    """Where the follower reads runs: any cloud that speaks the wire."""

    async def all_runs(self) -> list[FollowedRun]:
        """Every run, in start order, with its events."""
        ...

    async def get_run(self, run_id: str, *, events: bool = True) -> FollowedRun | None:
        """One run (None when the cloud does not know it)."""
        ...


class EmbeddedRuns:
    """Runs of an in-process cloud, read through its public ``runs`` surface."""

    def __init__(self, cloud: Any) -> None:
        self.cloud = cloud

    def _followed(self, run: Any) -> FollowedRun:
        return FollowedRun(run.id, run.user_id, bool(run.deleted), run.to_dto(), run.events)

    async def all_runs(self) -> list[FollowedRun]:
        return [self._followed(run) for run in self.cloud.runs.all]

    async def get_run(self, run_id: str, *, events: bool = True) -> FollowedRun | None:
        try:
            return self._followed(self.cloud.runs.get(run_id))
        except KeyError:
            return None


def _is_source(value: object) -> bool:
    """A ``RunSource`` already (anything else given is an in-process cloud, read through ``EmbeddedRuns``)."""
    return callable(getattr(value, "all_runs", None)) and callable(getattr(value, "get_run", None))


_QUIET = frozenset({"node.output_text.delta", "node.activity"})
_BATCH = 500


def turn_messages(events: Sequence[dict[str, Any]], completed: dict[str, Any]) -> list[dict[str, Any]]:
    """The person's input and the assistant's text of the root turn that ``completed`` ends."""
    entry = completed.get("entry_id")
    started = next((e for e in reversed(events) if e["type"] == "node.turn.started" and e.get("entry_id") == entry), None)
    done = next((e for e in reversed(events) if e["type"] == "node.output_text.done" and e.get("entry_id") == entry), None)
    messages = []
    if started is not None:
        text = str((started.get("input") or {}).get("text") or "")
        if text:
            messages.append({"role": "user", "text": text})
    if done is not None and done.get("text"):
        messages.append({"role": "assistant", "text": str(done["text"])})
    elif completed.get("stop_reason") == "error":
        error = completed.get("error") or {}
        messages.append({"role": "system", "text": f"turn failed: {error.get('code')}: {error.get('message')}"})
    return messages


def run_record(run: Any) -> dict[str, Any]:
    """A run as an OKF run record: ``{thread, turns: [{id, ts, role, text}]}`` from its root turns."""
    turns: list[dict[str, Any]] = []
    for event in run.events:
        if event["node_id"] != run.id:
            continue
        if event["type"] == "node.turn.started":
            text = str((event.get("input") or {}).get("text") or "")
            if text:
                turns.append({"id": f"{run.id}:{event['seq']}", "ts": event["at"], "role": "user", "text": text})
        elif event["type"] == "node.output_text.done" and event.get("text"):
            turns.append({"id": f"{run.id}:{event['seq']}", "ts": event["at"], "role": "assistant", "text": str(event["text"])})
    return {"thread": run.id, "turns": turns}


class RunFollower:
    """Applies the cloud's run changes to the canvas and the outbox from one background task."""

    def __init__(
        self,
        cloud: RunSource | Any,
        feed: ChangeFeed,
        *,
        bridge: Any = None,
        outbox: Any = None,
        on_settled: Callable[[Any], Awaitable[None]] | None = None,
        state_path: Path | None = None,
        ignore_users: frozenset[str] = frozenset(),
    ) -> None:
        self.source: RunSource = cloud if _is_source(cloud) else EmbeddedRuns(cloud)
        """Where runs are read: an in-process cloud's public surface, or any served cloud over the wire."""
        self.feed = feed
        self.bridge = bridge
        self.outbox = outbox
        self.on_settled = on_settled
        self.ignore_users = ignore_users
        """People whose runs the canvas shows but whose turns are not captured (the harvest judge)."""
        self.errors: deque[str] = deque(maxlen=100)
        self.state_path = state_path
        self._captured: dict[str, int] = self._load_state()
        self._queue: asyncio.Queue[Change] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._busy = False

    async def start(self, *, catch_up: bool = True) -> None:
        """Start following; with ``catch_up`` the runs that already exist are applied first."""
        if catch_up:
            for run in await self.source.all_runs():
                self._queue.put_nowait(Change("cloud", "run.started", run.id))
                for event in run.events:
                    self._queue.put_nowait(Change("cloud", "run.event", run.id, {"event": event}))
        self._unsubscribe = self.feed.subscribe(self._on_change)
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def stop(self) -> None:
        """Stop following (changes still queued are dropped)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def idle(self) -> None:
        """Wait until every queued change has been applied."""
        while not self._queue.empty() or self._busy:
            await asyncio.sleep(0.005)

    def _on_change(self, change: Change) -> None:
        if change.source != "cloud" or change.kind not in ("run.started", "run.event", "run.deleted"):
            return
        if change.kind == "run.event":
            event = change.data.get("event")
            if not isinstance(event, dict) or event.get("type") in _QUIET:
                return  # a change that carries no event object has nothing to apply
        self._queue.put_nowait(change)

    async def _drain(self) -> None:
        while True:
            first = await self._queue.get()
            self._busy = True
            try:
                batch = [first]
                while len(batch) < _BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                touched: dict[str, None] = {}
                for change in batch:
                    await self._apply(change, touched)
                for run_id in touched:
                    await self._sync_run(run_id)
            finally:
                self._busy = False

    async def _apply(self, change: Change, touched: dict[str, None]) -> None:
        try:
            if change.kind == "run.started":
                await self._sync_run(change.id)
            elif change.kind == "run.deleted":
                if self.bridge is not None:
                    await self.bridge.canvas.record_event(change.id, "run.deleted", level=6)
            else:
                event = change.data["event"]
                if self.bridge is not None:
                    await self.bridge.apply_event(event)
                touched[change.id] = None
                if event["type"] == "node.turn.completed" and event["node_id"] == event["run_id"]:
                    await self._turn_completed(change.id, event)
                elif event["type"] == "node.settled" and event["node_id"] == event["run_id"]:
                    await self._settled(change.id, event)
        except Exception as exc:  # one bad change never stops the follower
            message = f"{change.kind} {change.id}: {type(exc).__name__}: {exc}"
            self.errors.append(message)
            self.feed.announce("workspace", "follower.error", change.id, error=message)

    async def _sync_run(self, run_id: str) -> None:
        if self.bridge is None:
            return
        try:
            run = await self.source.get_run(run_id, events=False)
            if run is None or run.deleted:
                return
            await self.bridge.apply_run(run.dto)
        except Exception as exc:
            message = f"run {run_id}: {type(exc).__name__}: {exc}"
            self.errors.append(message)
            self.feed.announce("workspace", "follower.error", run_id, error=message)

    async def _turn_completed(self, run_id: str, event: dict[str, Any]) -> None:
        if self._captured.get(run_id, 0) >= event["seq"]:
            return
        run = await self.source.get_run(run_id)
        if run is None or run.user_id in self.ignore_users:
            return
        messages = turn_messages(run.events, event)
        if messages and self.outbox is not None:
            try:
                await self.outbox.capture_turn(run_id, run.user_id, messages)
            except Exception as exc:  # shown as a capture badge; the turn is tried again on the next open
                self.feed.announce("outbox", "capture.failed", run_id, error=f"{type(exc).__name__}: {exc}")
                raise
        self._captured[run_id] = event["seq"]
        await self._save_state()

    async def _settled(self, run_id: str, event: dict[str, Any]) -> None:
        key = f"settled:{run_id}"
        if self.on_settled is None or self._captured.get(key, 0) >= event["seq"]:
            return
        run = await self.source.get_run(run_id)
        if run is None or run.user_id in self.ignore_users:
            return
        await self.on_settled(run)
        self._captured[key] = event["seq"]
        await self._save_state()

    async def _save_state(self) -> None:
        if self.state_path is not None:
            await asyncio.to_thread(atomic_write_json, self.state_path, {"captured": self._captured})

    def _load_state(self) -> dict[str, int]:
        if self.state_path is None or not self.state_path.exists():
            return {}
        try:
            data = read_json(self.state_path)
            return {str(k): int(v) for k, v in data.get("captured", {}).items()}
        except (CorruptFileError, AttributeError, TypeError, ValueError) as exc:
            self.errors.append(f"{self.state_path}: unreadable, starting over ({exc})")
            return {}
