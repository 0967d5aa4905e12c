"""OKF judgments in a window attached to a served workspace: list, approve, reject; never judge.

The serving process alone captures notes and judges them, so nothing is judged twice.
``AttachedHarvest.attach(root, changes)`` opens the same knowledge root for the approval queue:
``queue``, ``detail``, ``notices``, ``sources``, ``inspect``, ``approve``, ``reject`` and ``retry``
work as in ``Harvest``, through the stores' own cross-process locks: ``claim_approval`` moves a
pending judgment to ``delivering`` under the run's lock (when two windows approve one judgment,
one wins and the other gets ``RunStateError``), and delivery publishes under the base's lock and
journal, so a judgment is published once.

Nothing that belongs to the serving process runs here: no sweep of leftover temp files (they may
be the serving process's own, in flight), no journal recovery at open, no marking of judging runs
as interrupted, no notes watcher. Capturing, judging, rejudging and creating bases or homes are
refused with ``OkfError`` (``E_ATTACHED``) naming the serving window as the place to do them; the
queue's state is untouched.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ...changes import ChangeFeed
from ...clock import Clock
from .capture import CaptureReport
from .descriptors import BaseDescriptor, Bindings, NodeDecl, SoulDecl, binding_path_problems, load_bindings
from .errors import OkfError
from .harvest import Harvest, prepare_bindings
from .health import binding_unusable, check_bases
from .models import JudgmentDetail, JudgmentItem, OkfNotice

__all__ = ["AttachedHarvest", "ATTACHED_CODE"]

ATTACHED_CODE = "E_ATTACHED"
"""The code of what only the serving process does."""


class _ServingJudge:
    """The judge of an attached window: judging happens in the serving process only."""

    async def judge(self, prompt: str, *, cwd: str) -> str:
        _refuse("judging")


def _refuse(what: str) -> NoReturn:
    raise OkfError(f"{what} happens in the window that serves this workspace; this window is attached to it",
                   code=ATTACHED_CODE, remedy="do it in the serving window (or run `workbench` there)")


class AttachedHarvest(Harvest):
    """The approval queue of a served workspace's knowledge root, opened by an attached window."""

    _bindings_seen: int = 0
    """The bindings file's modification time when it was last read."""

    @classmethod
    async def attach(cls, root: Path, changes: ChangeFeed, *, clock: Clock | None = None) -> "AttachedHarvest":
        """Open ``root`` for the queue only (an empty one is started when nobody opened it yet)."""
        root = Path(os.path.abspath(root))
        bindings, unusable = await asyncio.to_thread(prepare_bindings, root)
        harvest = cls(root, changes, _ServingJudge(), bindings, clock=clock or Clock(), watch_window=0.2,
                      unusable=unusable)

        def blocked() -> dict[str, OkfNotice]:
            found = {alias: binding_unusable(alias, bindings.directory(alias).path, bindings.file, why)
                     for alias, why in unusable.items()}
            for alias, notice in check_bases(harvest.runs).items():
                found.setdefault(alias, notice)
            return found

        harvest.blocked = await asyncio.to_thread(blocked)
        harvest._bindings_seen = await asyncio.to_thread(lambda: bindings.file.stat().st_mtime_ns)
        return harvest

    # -- the queue, with the bindings as the serving process last wrote them --------------------------

    async def _fresh(self) -> None:
        """Read the bindings again when the serving process changed them (a base bound since)."""
        def work() -> Bindings | None:
            try:
                changed = self.bindings.file.stat().st_mtime_ns != self._bindings_seen
            except OSError:
                return None
            if not changed:
                return None
            self._bindings_seen = self.bindings.file.stat().st_mtime_ns
            bindings = load_bindings(self.bindings.file, check_paths=False)
            self.unusable = binding_path_problems(bindings)
            return bindings

        bindings = await asyncio.to_thread(work)
        if bindings is not None:
            self._rebind(bindings)

    async def queue(self, states: Sequence[str] | None = None) -> list[JudgmentItem]:
        await self._fresh()
        return await super().queue(states)

    async def detail(self, judgment_id: str) -> JudgmentDetail:
        await self._fresh()
        return await super().detail(judgment_id)

    async def approve(self, judgment_id: str, outcomes: Sequence[str] | None = None) -> JudgmentItem:
        await self._fresh()
        return await super().approve(judgment_id, outcomes)

    async def retry(self, judgment_id: str) -> JudgmentItem:
        await self._fresh()
        return await super().retry(judgment_id)

    # -- what only the serving process does ------------------------------------------------------

    async def capture_now(self, source_id: str | None = None, *, judge: bool = True) -> list[CaptureReport]:
        _refuse("capturing notes")

    async def capture_record(self, source_id: str, record: object, *, judge: bool = True) -> CaptureReport:
        _refuse("capturing run records")

    async def harvest(self, source_id: str) -> list[str]:
        _refuse("judging")

    async def rejudge(self, judgment_id: str) -> JudgmentItem:
        _refuse("judging again")

    async def init_base(self, alias: str, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]], *,
                        base_id: str | None = None, path: Path | None = None) -> BaseDescriptor:
        _refuse("creating a base")

    async def register_home(self, home: Path, soul: SoulDecl | Path, *, agent: str, soul_name: str | None = None,
                            role: str = "") -> str:
        _refuse("registering a home")

    async def start_watcher(self) -> None:
        """No watcher here: the serving process watches the homes' notes."""

    async def close(self) -> None:
        """Nothing to stop."""
