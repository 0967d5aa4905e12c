"""``Harvest``: the OKF service the Workspace opens on its ``knowledge/`` folder.

Layout of ``root`` (created on first open)::

    okf-bindings.json     the bindings file (stateDir "state", bases under "bases/")
    state/                the durable state dir
    bases/<alias>/        directory bases made with ``init_base`` (``okf init``)

Flow: notes (watched) and run records are captured into inputs -> outstanding inputs are judged
by a run through the ``JudgeClient`` -> a valid judgment waits as *pending* -> the operator
approves it (whole or outcome by outcome) and it is delivered through the directory provider,
or rejects it with a reason. Every queue change publishes a ``Change(source="okf")``. Blocking
work runs in ``asyncio.to_thread``; journals left by a crash are recovered on ``open``, and the
temp files a killed process left are removed.

One broken base never stops ``open`` nor the other bases: a binding that cannot be used, a base
folder that is broken or a journal that cannot recover marks that base blocked (``blocked``),
with the reason and the way out, and ``notices()`` lists it for the judgments pane next to failed
captures and refused notes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from ...changes import ChangeFeed
from ...clock import Clock
from ...errors import ServiceError
from ...files import FileLock, atomic_write_json, contained_path
from .bases import DirectoryBase, init_directory_base, init_git_proposal
from .capture import CaptureReport, capture_notes, capture_record
from .delivery import RecoveryOutcome, describe
from .descriptors import (BaseDescriptor, Bindings, DirectoryBinding, GitBinding, NodeDecl, SoulDecl, binding_path_problems,
                          check_id, git_binding, load_bindings, load_soul)
from .errors import OkfConfigError, OkfError, OkfPathError, SourceError
from .git import GitBase, check_branch_name
from .git_delivery import SAMPLE_RUN_ID, branch_name
from .git_acceptance import POLL_INTERVAL_S
from .health import BINDINGS_LOCK, base_blocked, binding_unusable, capture_notices, check_bases, sweep_leftovers
from .home import InstanceHome, publish_view
from .inspect import inspect_source
from .judge import JudgeClient
from .models import JudgmentDetail, JudgmentItem, OkfNotice, ReadResult, SourceInfo
from .review import detail_of, item_of
from .runs import RunBook
from .shapes import InspectReport, PublishedView, Run
from .state import StateDir
from .tree import Tree
from .watcher import NotesWatcher

__all__ = ["Harvest", "BINDINGS_NAME"]

BINDINGS_NAME = "okf-bindings.json"
"""The bindings file's name inside the knowledge root."""


def prepare_bindings(root: Path) -> tuple[Bindings, dict[str, str]]:
    """The bindings under ``root`` (an empty file is started when there is none) and the bindings'
    unusable paths by alias; an unusable state folder is refused (``OkfPathError``)."""
    root.mkdir(parents=True, exist_ok=True)
    file = root / BINDINGS_NAME
    if not file.exists():
        with FileLock(root / BINDINGS_LOCK):
            if not file.exists():
                atomic_write_json(file, {"version": 1, "stateDir": "state", "cron": "*/15 * * * *", "tz": "UTC",
                                         "bases": {}})
    bindings = load_bindings(file, check_paths=False)
    unusable = binding_path_problems(bindings)
    if "stateDir" in unusable:
        raise OkfPathError(unusable["stateDir"])
    bindings.state_dir.mkdir(parents=True, exist_ok=True)
    return bindings, unusable


class Harvest:
    """OKF knowledge for one workspace: bases, sources, capture, judging, the approval queue."""

    def __init__(self, root: Path, changes: ChangeFeed, judge: JudgeClient, bindings: Bindings,
                 *, clock: Clock, watch_window: float, unusable: dict[str, str] | None = None) -> None:
        self.root = root
        self.changes = changes
        self.judge = judge
        self.clock = clock
        self.bindings = bindings
        self.state = StateDir(bindings.state_dir)
        self.unusable: dict[str, str] = dict(unusable or {})
        """Bases whose binding cannot be used (alias -> why); never read nor written."""
        self.runs = RunBook(self.state, bindings, unusable=self.unusable)
        self.watcher = NotesWatcher(window=watch_window, clock=clock)
        """The notes watcher (``start_watcher``/``stop_watcher``)."""
        self.recovered: list[RecoveryOutcome] = []
        """What the last ``open``/``recover`` did with pending journals."""
        self.recovery_errors: list[str] = []
        """Journals that could not recover (their bases stay blocked)."""
        self.blocked: dict[str, OkfNotice] = {}
        """Blocked bases (alias -> the notice with the reason and the way out)."""
        self.swept: list[str] = []
        """The leftover temp files the last ``open`` removed."""
        self._capture_locks: dict[str, asyncio.Lock] = {}
        self._poller: asyncio.Task[None] | None = None
        self.watcher.subscribe(self._on_notes_changed)

    @classmethod
    async def open(cls, root: Path, changes: ChangeFeed, judge: JudgeClient, *, clock: Clock | None = None,
                   watch_window: float = 0.2) -> "Harvest":
        """Open (or create) the knowledge root and recover any interrupted publication."""
        root = Path(os.path.abspath(root))

        bindings, unusable = await asyncio.to_thread(prepare_bindings, root)
        harvest = cls(root, changes, judge, bindings, clock=clock or Clock(), watch_window=watch_window,
                      unusable=unusable)
        harvest.swept = await asyncio.to_thread(sweep_leftovers, root, harvest.runs)
        await harvest.recover()
        await harvest.resume_git()
        await harvest.recheck()
        for run_id in await asyncio.to_thread(harvest.runs.mark_interrupted, at=harvest.clock.time()):
            harvest._emit("judgment.invalid", run_id, interrupted=True)
        for source_id in harvest.state.source_ids():
            try:
                home = InstanceHome(Path(harvest.state.source(source_id)["home"]))
            except (ServiceError, OSError, KeyError, TypeError):  # a damaged source is reported by notices()
                continue
            harvest.watcher.add(source_id, home.notes_dir)
        return harvest

    def _emit(self, kind: str, id: str = "", /, **data: object) -> None:
        self.changes.announce("okf", kind, id, **data)

    async def recover(self) -> list[RecoveryOutcome]:
        """Recover every base with a pending publication journal (roll forward or back, never a mix).

        A base that cannot recover, or cannot be used at all, is marked blocked with the reason
        and the way out; the other bases are recovered and keep working.
        """
        def work() -> tuple[list[RecoveryOutcome], list[str], dict[str, OkfNotice]]:
            done, errors = [], []
            blocked = {alias: binding_unusable(alias, self.bindings.directory(alias).path, self.bindings.file, why)
                       for alias, why in self.unusable.items()}
            for alias in self.runs.directory_aliases():
                if alias in self.unusable:
                    continue
                try:
                    outcome = self.runs.recover_alias(alias, at=self.clock.time())
                except Exception as exc:  # one base's failure must not stop the others nor the open
                    errors.append(str(exc))
                    blocked[alias] = base_blocked(alias, exc)
                    continue
                if outcome is not None:
                    done.append(outcome)
            for alias, notice in check_bases(self.runs).items():
                blocked.setdefault(alias, notice)
            return done, errors, blocked

        self.recovered, self.recovery_errors, self.blocked = await asyncio.to_thread(work)
        for outcome in self.recovered:
            self._emit("judgment.recovered", outcome.run or "", base=outcome.alias, status=outcome.status)
        for alias, notice in self.blocked.items():
            self._emit("base.blocked", alias, reason=notice.reason, remedy=notice.remedy)
        return self.recovered

    # -- Git custody: resuming deliveries, waiting for merges ------------------------------------------

    async def resume_git(self) -> list[str]:
        """Finish every Git delivery a kill interrupted (from its receipt: no second branch or commit)."""
        resumed = []
        for source_id, run_id in await asyncio.to_thread(self.runs.in_flight):
            try:
                run = await asyncio.to_thread(self.runs.deliver, source_id, run_id, at=self.clock.time())
            except OkfError as exc:  # recorded on the run; j retries (or rejudges a refused one)
                self._emit("judgment.failed", run_id, source_id=source_id, error=str(exc))
                continue
            self._announce(run, source_id)
            resumed.append(run_id)
        return resumed

    async def recheck(self, judgment_id: str | None = None) -> list[JudgmentItem]:
        """Check Git deliveries waiting for their merge (all, or one judgment's) now; the items that changed.

        A check that cannot reach the repository is recorded on the judgment (shown as its
        problem) and tried again at the next poll; it never changes a receipt.
        """
        if judgment_id is not None:
            source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
            targets = [(source_id, judgment_id)]
        else:
            targets = await asyncio.to_thread(self.runs.waiting)
        changed = []
        for source_id, run_id in targets:
            before = await asyncio.to_thread(self.state.load_run, source_id, run_id)
            try:
                run = await asyncio.to_thread(self.runs.recheck, source_id, run_id, at=self.clock.time())
            except OkfError as exc:
                await asyncio.to_thread(self.runs.note_check_error, source_id, run_id, exc)
                self._emit("judgment.recheck-failed", run_id, source_id=source_id, error=str(exc))
                if judgment_id is not None:
                    raise
                continue
            if run["receipts"] != before["receipts"] or run["review"] != before["review"]:
                changed.append(self._announce(run, source_id))
        return changed

    async def _poll(self) -> None:
        while True:
            await self.clock.sleep(POLL_INTERVAL_S)
            try:
                await self.recheck()
            except Exception as exc:  # a poll that fails is reported and tried again next time
                self._emit("recheck.failed", "", error=describe(exc))

    async def notices(self) -> list[OkfNotice]:
        """What needs the operator: blocked bases, the last failed capture and refused notes, with the way out."""
        def work() -> list[OkfNotice]:
            return [*sorted(self.blocked.values(), key=lambda n: n.subject), *capture_notices(self.state)]

        return await asyncio.to_thread(work)

    def _note_blocked(self, exc: BaseException) -> None:
        """After a failed delivery: a base whose journal stayed is blocked until it recovers."""
        for alias in self.runs.directory_aliases():
            if alias in self.unusable or alias in self.blocked:
                continue
            with contextlib.suppress(ServiceError, OSError):
                if DirectoryBase(self.bindings.directory(alias)).journal_pending():
                    self.blocked[alias] = base_blocked(alias, exc)
                    self._emit("base.blocked", alias, reason=self.blocked[alias].reason)

    # -- provisioning --------------------------------------------------------------------------

    async def init_base(self, alias: str, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]], *,
                        base_id: str | None = None, path: Path | None = None) -> BaseDescriptor:
        """``okf init``: create a new directory base (refusing an existing one) and bind it.

        Every path rule (no symlink on the way, outside Git, apart from the state dir and the
        other bases) is checked before anything is created.
        """
        check_id(alias, "base alias")
        check_id(base_id or alias, "base id")
        if alias in self.bindings.bases:
            raise OkfConfigError(f"base alias {alias!r} is already bound")
        target = Path(os.path.abspath(path)) if path is not None else self.root / "bases" / alias

        def work() -> BaseDescriptor:
            with FileLock(self.root / BINDINGS_LOCK):
                bases = {**self.bindings.bases, alias: DirectoryBinding(alias, base_id or alias, target)}
                updated = Bindings(self.bindings.file, self.bindings.state_dir, bases, self.bindings.cron,
                                   self.bindings.tz)
                problems = binding_path_problems(updated)
                if alias in problems:
                    raise OkfPathError(problems[alias])
                descriptor = init_directory_base(target, base_id or alias, nodes, at=self.clock.time())
                atomic_write_json(self.bindings.file, updated.to_json())
                self._rebind(updated)
                return descriptor

        descriptor = await asyncio.to_thread(work)
        self._emit("base.created", alias, path=str(target))
        return descriptor

    async def propose_git_base(self, output: Path, nodes: dict[str, NodeDecl] | dict[str, dict[str, str]], *,
                               base_id: str) -> BaseDescriptor:
        """``okf init`` for a Git base: write the new base to the staged folder ``output``, nothing else.

        It is an operator proposal: put it at the base's ``root`` in your own checkout, have it
        reviewed and merged into the accepted branch, then ``bind_git_base``. Nothing is pushed
        and nothing is accepted here.
        """
        check_id(base_id, "base id")
        target = Path(os.path.abspath(output))
        descriptor = await asyncio.to_thread(init_git_proposal, target, base_id, nodes, at=self.clock.time())
        self._emit("base.proposed", base_id, path=str(target))
        return descriptor

    async def bind_git_base(self, alias: str, *, repository: str, root: str, accepted_branch: str,
                            pr_repository: str, base_id: str | None = None) -> BaseDescriptor:
        """Bind a Git base whose accepted branch already holds it at ``root`` (fetched and checked first).

        Refused before any fetch: a value git could read as an option or a transport other than
        https, ssh or a local repository (``git_urls``), and an accepted branch or a base id that
        makes a branch name git refuses (``git check-ref-format --branch``), so no judgment into
        the base can be left undeliverable. A repository URL with user information is bound and
        shown without it; its credentials stay in this process's memory (``git_urls``).
        """
        check_id(alias, "base alias")
        if alias in self.bindings.bases:
            raise OkfConfigError(f"base alias {alias!r} is already bound")
        binding = git_binding(alias, check_id(base_id or alias, "base id"), repository, root, accepted_branch,
                              pr_repository, f"base {alias!r}")

        def work() -> BaseDescriptor:
            check_branch_name(binding.accepted_branch, f"base {alias!r} acceptedBranch")
            check_branch_name(branch_name(SAMPLE_RUN_ID, 1, binding.id),
                              f"base {alias!r} id {binding.id!r} (its proposal branches are okf/<run>-<id>)")
            with FileLock(self.root / BINDINGS_LOCK):
                descriptor = GitBase(binding, self.bindings.state_dir, self.bindings.file.parent).descriptor()
                bases = {**self.bindings.bases, alias: binding}
                updated = Bindings(self.bindings.file, self.bindings.state_dir, bases, self.bindings.cron,
                                   self.bindings.tz)
                atomic_write_json(self.bindings.file, updated.to_json())
                self._rebind(updated)
                return descriptor

        descriptor = await asyncio.to_thread(work)
        self._emit("base.bound", alias, repository=binding.repository)
        return descriptor

    def _rebind(self, bindings: Bindings) -> None:
        self.bindings = bindings
        self.runs = RunBook(self.state, bindings, unusable=self.unusable)

    async def register_home(self, home: Path, soul: SoulDecl | Path, *, agent: str, soul_name: str | None = None,
                            role: str = "") -> str:
        """Scaffold an instance home, register its durable source and publish its first view."""
        def work() -> str:
            decl = soul if isinstance(soul, SoulDecl) else load_soul(Path(soul))
            for ref in decl.owns + decl.reads:
                alias, node = ref.split("/", 1)
                binding = self.bindings.bases.get(alias)
                base: GitBase | DirectoryBase = (self.runs.git_base(alias) if isinstance(binding, GitBinding)
                                                 else DirectoryBase(self.bindings.directory(alias)))
                if node not in base.descriptor().nodes:
                    raise OkfConfigError(f"{ref}: base {alias!r} has no node {node!r}")
            self.state.claim_owner(decl.owner, soul_name or decl.owner)
            instance = InstanceHome(home)
            instance.scaffold()
            view = self._publish_view(instance.new_view_dir(), decl)
            source = self.state.register_source(home=instance.path, soul=soul_name or decl.owner, decl=decl,
                                                bindings=self.bindings, agent=agent, role=role,
                                                accepted_view=view, at=self.clock.time())
            instance.write_marker(source["id"], self.state.source_dir(source["id"]) / "source.json")
            return str(source["id"])

        source_id = await asyncio.to_thread(work)
        self.watcher.add(source_id, InstanceHome(home).notes_dir)
        self._emit("source.registered", source_id, agent=agent)
        return source_id

    def _publish_view(self, target: Path, decl: SoulDecl) -> PublishedView:
        snapshots: dict[str, tuple[DirectoryBase | GitBase, Tree, str]] = {}
        for alias in self.runs.directory_aliases():
            base = DirectoryBase(self.bindings.directory(alias))
            tree, digest = base.snapshot()
            snapshots[alias] = (base, tree, digest)
        wanted = {ref.split("/", 1)[0] for ref in (*decl.owns, *decl.reads)}
        for alias in self.runs.git_aliases():  # a Git base only for a source that owns or reads it (a fetch)
            if alias in self.unusable or alias not in wanted:
                continue
            provider = self.runs.provider(alias)
            tree, digest = provider.snapshot()
            snapshots[alias] = (provider.base, tree, digest)
        view = publish_view(target, snapshots, decl, at=self.clock.time())
        return {"path": str(target), **view}

    async def sources(self) -> list[SourceInfo]:
        """Every registered source."""
        def work() -> list[SourceInfo]:
            found = []
            for source_id in self.state.source_ids():
                s = self.state.source(source_id)
                found.append(SourceInfo(source_id, s["agent"], s["home"], s["owner"], tuple(s["decl"]["owns"]),
                                        tuple(s["decl"]["reads"])))
            return found

        return await asyncio.to_thread(work)

    # -- capture and judging -------------------------------------------------------------------

    def _lock_for(self, source_id: str) -> asyncio.Lock:
        return self._capture_locks.setdefault(source_id, asyncio.Lock())

    async def capture_now(self, source_id: str | None = None, *, judge: bool = True) -> list[CaptureReport]:
        """Capture new notes of one source (or all), then judge what is outstanding."""
        ids = [source_id] if source_id is not None else self.state.source_ids()
        reports = []
        for sid in ids:
            async with self._lock_for(sid):
                home = InstanceHome(Path((await asyncio.to_thread(self.state.source, sid))["home"]))
                try:
                    report = await asyncio.to_thread(capture_notes, self.state, sid, home, at=self.clock.time())
                except OkfError as exc:
                    self._emit("capture.failed", sid, error=str(exc))
                    raise
                reports.append(report)
                self._emit("capture.completed", sid, captured=len(report.captured), unchanged=report.unchanged,
                           skipped=len(report.skipped))
                if judge and report.captured:
                    await self._judge_outstanding(sid)
        return reports

    async def capture_record(self, source_id: str, record: object, *, judge: bool = True) -> CaptureReport:
        """Capture a run record (``{thread, turns}``), then judge what is outstanding."""
        async with self._lock_for(source_id):
            try:
                report = await asyncio.to_thread(capture_record, self.state, source_id, record, at=self.clock.time())
            except OkfError as exc:
                self._emit("capture.failed", source_id, error=str(exc))
                raise
            self._emit("capture.completed", source_id, captured=len(report.captured), unchanged=0)
            if judge and report.captured:
                await self._judge_outstanding(source_id)
        return report

    async def harvest(self, source_id: str) -> list[str]:
        """Judge every outstanding input of a source now; returns the new judgment ids."""
        async with self._lock_for(source_id):
            return await self._judge_outstanding(source_id)

    async def _judge_outstanding(self, source_id: str) -> list[str]:
        def plan() -> list[list[str]]:
            with self.state.worker_lock(source_id):
                return self.runs.batches(source_id, self.runs.outstanding(source_id))

        run_ids = []
        for batch in await asyncio.to_thread(plan):
            run = await asyncio.to_thread(self.runs.create_run, source_id, batch, at=self.clock.time())
            self._emit("judgment.judging", run["id"], source_id=source_id, inputs=len(batch))
            await self._judge_run(source_id, run["id"])
            run_ids.append(run["id"])
        return run_ids

    async def _judge_run(self, source_id: str, run_id: str) -> None:
        """Ask the judge and record its reply; the run always leaves ``judging`` (pending or invalid)."""
        cwd = str(self.runs.work_dir(source_id, run_id))
        reply: str | None = None
        failure: str | None = None
        try:
            prompt = await asyncio.to_thread(self.runs.prompt, source_id, run_id)
            await asyncio.to_thread(self.runs.mark_running, source_id, run_id, at=self.clock.time())
        except Exception as exc:  # a run that cannot be asked is failed like one whose judge failed
            failure = f"the judge could not be asked ({describe(exc)})"
        else:
            try:
                reply = await self.judge.judge(prompt, cwd=cwd)
            except Exception as exc:  # the judge run is remote; any failure is kept on the run
                failure = f"{type(exc).__name__}: {exc}"
        try:
            run = await asyncio.to_thread(self.runs.record_judgment, source_id, run_id, reply, failure=failure,
                                          at=self.clock.time())
        except Exception as exc:  # not even the failure could be written: the next open marks it interrupted
            self._emit("judgment.invalid", run_id, source_id=source_id, state="invalid", error=describe(exc))
            return
        state = run["review"]["state"]
        self._emit(f"judgment.{state}", run_id, source_id=source_id, state=state)

    # -- the queue ---------------------------------------------------------------------------------

    async def queue(self, states: Sequence[str] | None = None) -> list[JudgmentItem]:
        """Every judgment (optionally only those in ``states``), oldest first."""
        def work() -> list[JudgmentItem]:
            items = []
            for source_id in self.state.source_ids():
                agent = self.state.source(source_id)["agent"]
                for run_id in self.state.run_ids(source_id):
                    try:
                        item = item_of(self.state.load_run(source_id, run_id), agent)
                    except OkfError as exc:  # a damaged run.json is shown, not hidden, and breaks nothing else
                        item = JudgmentItem(run_id, source_id, agent, "invalid", "unknown", 0, 0.0, 0, 0, 0, 0,
                                            (str(exc),), None, ())
                    if states is None or item.state in states:
                        items.append(item)
            return sorted(items, key=lambda i: (i.created_at, i.id))

        return await asyncio.to_thread(work)

    async def detail(self, judgment_id: str) -> JudgmentDetail:
        """One judgment with its outcomes, input texts, per-file before/after and diff."""
        def work() -> JudgmentDetail:
            source_id = self.state.find_run(judgment_id)
            return detail_of(self.state, self.runs, source_id, judgment_id)

        return await asyncio.to_thread(work)

    async def approve(self, judgment_id: str, outcomes: Sequence[str] | None = None) -> JudgmentItem:
        """Approve the whole judgment (or only the outcomes for the input ids given) and deliver it.

        Refusals and interruptions raise an ``OkfError`` saying what happened to the base (nothing
        written, rolled back, or blocked until its journal recovers); never a raw OS error.
        """
        source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
        try:
            run = await asyncio.to_thread(self.runs.claim_approval, source_id, judgment_id, outcomes,
                                          at=self.clock.time())
        except OSError as exc:
            raise OkfError(f"judgment {judgment_id} could not be approved ({describe(exc)}); nothing was delivered",
                           code="E_RUN", remedy="fix the cause, then approve it again") from exc
        self._emit("judgment.delivering", judgment_id, source_id=source_id, whole=run["review"]["whole"])
        try:
            run = await asyncio.to_thread(self.runs.deliver, source_id, judgment_id, at=self.clock.time())
        except OkfError as exc:
            self._note_blocked(exc)
            run = await asyncio.to_thread(self.state.load_run, source_id, judgment_id)
            self._emit(f"judgment.{run['review']['state']}", judgment_id, source_id=source_id, error=str(exc))
            raise
        return self._announce(run, source_id)

    def _announce(self, run: Run, source_id: str) -> JudgmentItem:
        item = item_of(run, self.state.source(source_id)["agent"])
        self._emit(f"judgment.{item.state}", item.id, source_id=source_id, state=item.state)
        return item

    async def reject(self, judgment_id: str, reason: str) -> JudgmentItem:
        """Reject a judgment with a reason; its inputs stay for ``rejudge``.

        Also a judgment that cannot progress: a delivery whose last attempt failed, or a Git
        delivery whose branch is gone with no matching merge found (``RunBook.reject_stuck``).
        """
        source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
        run = await asyncio.to_thread(self.runs.reject, source_id, judgment_id, reason, at=self.clock.time())
        return self._announce(run, source_id)

    async def confirm_merged(self, judgment_id: str) -> JudgmentItem:
        """Accept, on the operator's word, a Git delivery whose branch is gone with no matching merge found."""
        source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
        run = await asyncio.to_thread(self.runs.confirm_merged, source_id, judgment_id, at=self.clock.time())
        return self._announce(run, source_id)

    async def rejudge(self, judgment_id: str) -> JudgmentItem:
        """Judge a rejected, invalid, failed or partly approved judgment's unprocessed inputs again."""
        source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
        async with self._lock_for(source_id):
            await asyncio.to_thread(self.runs.begin_rejudge, source_id, judgment_id, at=self.clock.time())
            self._emit("judgment.judging", judgment_id, source_id=source_id, rejudge=True)
            await self._judge_run(source_id, judgment_id)
        return item_of(await asyncio.to_thread(self.state.load_run, source_id, judgment_id),
                       self.state.source(source_id)["agent"])

    async def retry(self, judgment_id: str) -> JudgmentItem:
        """Finish an approved delivery left uncertain (recover journals, then publish what is left)."""
        source_id = await asyncio.to_thread(self.state.find_run, judgment_id)
        await self.recover()
        run = await asyncio.to_thread(self.state.load_run, source_id, judgment_id)
        if run["review"]["state"] != "delivering":
            raise OkfError(f"judgment {judgment_id} is {run['review']['state']}; only an uncertain delivery is retried",
                           code="E_RUN")
        try:
            run = await asyncio.to_thread(self.runs.deliver, source_id, judgment_id, at=self.clock.time())
        except OkfError as exc:
            self._note_blocked(exc)
            self._emit("judgment.failed", judgment_id, source_id=source_id, error=str(exc))
            raise
        return self._announce(run, source_id)

    # -- reads ----------------------------------------------------------------------------------

    async def inspect(self, source_id: str) -> InspectReport:
        """OKF's inspection report for a source (read-only)."""
        return await asyncio.to_thread(inspect_source, self.state, source_id, at=self.clock.time())

    async def refresh(self, source_id: str, *, durable: bool = False) -> PublishedView:
        """A fresh immutable view: in the home, or (``durable``) under the source's ``views/``."""
        def work() -> PublishedView:
            source = self.state.source(source_id)
            decl = SoulDecl(source["decl"]["owner"], tuple(source["decl"]["owns"]), tuple(source["decl"]["reads"]))
            if durable:
                target = self.state.source_dir(source_id) / "views" / f"knowledge-view-{uuid.uuid4()}"
            else:
                home = InstanceHome(Path(source["home"]))
                marker = home.marker()
                if marker is None or marker.get("id") != source_id:
                    raise SourceError(f"home {home.path} is not source {source_id}'s live home; refresh with durable=True")
                target = home.new_view_dir()
            return self._publish_view(target, decl)

        view = await asyncio.to_thread(work)
        self._emit("view.published", source_id, path=view["path"])
        return view

    async def read(self, source_id: str, base: str, path: str, *, durable: bool = False) -> ReadResult:
        """The full text of ``base``/``path`` as currently accepted (through a fresh view; no cap)."""
        binding = self.bindings.bases.get(base)
        if not isinstance(binding, GitBinding):  # refuse a bad path before making a view
            await asyncio.to_thread(contained_path, self.bindings.directory(base).path, path)
        view = await self.refresh(source_id, durable=durable)

        def work() -> ReadResult:
            if base not in view["bases"]:
                raise OkfConfigError(f"no base {base!r}")
            file = contained_path(Path(view["path"]) / "bases" / base, path, must_exist=True)
            data = file.read_bytes()
            return ReadResult(view["path"], base, path, view["bases"][base]["digest"], data.decode("utf-8", "replace"))

        return await asyncio.to_thread(work)

    # -- watcher --------------------------------------------------------------------------------

    async def _on_notes_changed(self, source_id: str) -> None:
        await self.capture_now(source_id)

    async def start_watcher(self) -> None:
        """Watch every home's ``notes/`` and capture (then judge) within the debounce window; poll Git merges.

        Git deliveries waiting for their merge are checked every ``POLL_INTERVAL_S`` from now on
        (they were checked at open, and ``recheck`` checks at once).
        """
        if self._poller is None and self.runs.git_aliases():
            self._poller = asyncio.create_task(self._poll())
        await self.watcher.start()
        self._emit("watcher.started", "", mode=self.watcher.mode, problem=self.watcher.problem)

    async def stop_watcher(self) -> None:
        """Stop watching (and polling)."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        await self.watcher.stop()
        self._emit("watcher.stopped")

    async def close(self) -> None:
        """Stop the watcher; nothing else holds resources."""
        await self.stop_watcher()
