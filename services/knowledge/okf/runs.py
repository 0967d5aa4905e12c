"""The run lifecycle, synchronous (``Harvest`` runs it in worker threads).

A run judges a batch of a source's outstanding inputs (at most 192,000 bytes of payload):

``spawn-intent`` -> ``scaffolded`` (``work/`` with ``input.json``, ``staging.json`` and the
staged ``bases/<alias>/``) -> ``ready`` -> ``launch-intent`` -> ``running`` (judge asked) ->
``delivering`` (valid judgment stored, receipts ``validated``/``no-change``, awaiting the
operator) -> ``processed`` (every receipt ``accepted``/``no-change``) or ``rejected`` (the
operator said no). An invalid judgment keeps the run ``running`` with its problems; it is never
delivered. ``review.state`` holds the queue state (see ``models.QUEUE_STATES``).

A run never stays ``judging`` because of what a judge replied or of a failure while recording
it: the reply is checked by ``check_judgment`` (which never raises for the reply's content) and
anything else that goes wrong ends the run ``invalid`` with the reason, up for rejudging.

``run.json`` keeps no copy of a base: a stage records its digest, and the baseline is read back
from the run's staged copy (``work/bases/<alias>/``, checked against that digest). Proposals hold
the changed files only (``proposal.read_proposal``). Approval, delivery and recovery live in
``approval.DeliveryBook``, which ``RunBook`` extends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from ...clock import iso
from ...errors import ServiceError
from ...files import PathError, atomic_write_json, atomic_write_text, contained_path, name_problem, publish_tree, read_json
from ...text import clip, repair_text
from .approval import SETTLED_RECEIPTS, DeliveryBook
from .delivery import DirectoryProvider, StepHook, describe
from .descriptors import BaseDescriptor, Bindings, DirectoryBinding, GitBinding
from .git import GitBase, descriptor_of
from .git_delivery import GitProvider
from .bases import DirectoryBase
from .errors import BaselineError, OkfConfigError, OkfError, OkfPathError, RunStateError
from .judge import build_prompt
from .judgment import JudgmentCheck, check_judgment, owned_node_paths
from .bundle import concept_paths
from .limits import MAX_JUDGMENT_BYTES, PathLimits, limits_for, utf8_size
from .proposal import changed_paths, proposal_document, proposal_hash
from .shapes import NodeEntry, Proposal, Receipt, Run, Source, Stage, StagingEntry, Status
from .state import StateDir
from .tree import Tree, read_tree, tree_digest

__all__ = ["RunBook", "BATCH_BYTES", "SETTLED_RECEIPTS"]

BATCH_BYTES = 192_000
"""A run batches inputs up to this many bytes of payload."""


def owned_aliases(source: Source) -> list[str]:
    """The bases a source owns a node in (from its frozen ``source.json``)."""
    return sorted({str(ref).split("/", 1)[0] for ref in source.get("decl", {}).get("owns", [])})


def read_aliases(source: Source) -> list[str]:
    """The bases a source reads a node of."""
    return sorted({str(ref).split("/", 1)[0] for ref in source.get("decl", {}).get("reads", [])})


def stored_reply(reply: str) -> str:
    """The judge's reply as kept for the operator: storable text, cut past ``MAX_JUDGMENT_BYTES``."""
    text, _ = repair_text(reply)
    return clip(text, MAX_JUDGMENT_BYTES // 4) if utf8_size(text) > MAX_JUDGMENT_BYTES else text


class RunBook(DeliveryBook):
    """Creates, judges, approves, rejects and recovers runs of every source in one state dir."""

    def __init__(self, state: StateDir, bindings: Bindings, *, step_hook: StepHook | None = None,
                 unusable: dict[str, str] | None = None) -> None:
        self.state = state
        self.bindings = bindings
        self.step_hook = step_hook
        self.unusable: dict[str, str] = unusable if unusable is not None else {}
        """Bases whose binding cannot be used (alias -> why): never snapshotted nor published to."""

    # -- providers -------------------------------------------------------------------------

    def provider(self, alias: str) -> DirectoryProvider | GitProvider:
        """The delivery provider of a bound base: ``DirectoryProvider`` or ``GitProvider``."""
        if alias in self.unusable:
            raise OkfConfigError(f"base {alias!r} cannot be used: {self.unusable[alias]}")
        binding = self.bindings.bases.get(alias)
        if isinstance(binding, GitBinding):
            return GitProvider(self.git_base(alias), step_hook=self.step_hook)
        return DirectoryProvider(DirectoryBase(self.bindings.directory(alias)), step_hook=self.step_hook)

    def git_base(self, alias: str) -> GitBase:
        """The Git base bound as ``alias`` (its private cache lives under the state dir)."""
        binding = self.bindings.bases.get(alias)
        if not isinstance(binding, GitBinding):
            raise OkfConfigError(f"base {alias!r} is not a Git base")
        return GitBase(binding, self.bindings.state_dir, self.bindings.file.parent)

    def directory_aliases(self) -> list[str]:
        """Every directory base alias."""
        return [a for a, b in self.bindings.bases.items() if isinstance(b, DirectoryBinding)]

    def git_aliases(self) -> list[str]:
        """Every Git base alias."""
        return [a for a, b in self.bindings.bases.items() if isinstance(b, GitBinding)]

    def descriptor_of(self, alias: str, tree: Tree) -> BaseDescriptor:
        """The descriptor of base ``alias`` as ``tree`` (its snapshot) holds it."""
        binding = self.bindings.bases[alias]
        if isinstance(binding, GitBinding):
            return descriptor_of(alias, binding.id, tree, f"{binding.repository}#{binding.accepted_branch}")
        return DirectoryBase(binding).descriptor()

    # -- creating and staging ------------------------------------------------------------------

    def outstanding(self, source_id: str) -> list[str]:
        """Captured inputs that no run has claimed and that are not processed."""
        status = self.state.status(source_id)
        claimed = set(status["processed"])
        for run_id in self.state.run_ids(source_id):
            claimed.update(self.state.load_run(source_id, run_id)["inputs"])
        return [i for i in status["captured"]["inputs"] if i not in claimed]

    def batches(self, source_id: str, inputs: Sequence[str]) -> list[list[str]]:
        """``inputs`` cut into runs of at most ``BATCH_BYTES`` of payload each."""
        folder = self.state.source_dir(source_id) / "inputs"
        batches: list[list[str]] = []
        size = 0
        for input_id in inputs:
            item = (folder / f"{input_id}.json").stat().st_size
            if not batches or (size + item > BATCH_BYTES and batches[-1]):
                batches.append([])
                size = 0
            batches[-1].append(input_id)
            size += item
        return batches

    def create_run(self, source_id: str, inputs: list[str], *, at: float) -> Run:
        """A new run for ``inputs``, staged and ``ready`` to judge.

        When staging fails (a base the source owns cannot be read, a staged file cannot be
        written) no run is left behind: the inputs stay outstanding and the error says why.
        """
        source = self.state.source(source_id)
        snapshots = self.snapshots(owned_aliases(source), read_aliases(source))
        run_id = str(uuid.uuid4())
        run: Run = {
            "version": 1, "id": run_id, "source": source_id, "created": iso(at), "inputs": list(inputs),
            "status": "spawn-intent", "stages": {}, "receipts": {}, "noLaunch": False,
            "worker": {"instance": source.get("agent"), "home": None}, "launch": None, "judgment": None,
            "settled": [], "recoveryOf": None, "recoveryGuards": None, "attempt": 1, "attemptDir": None,
            "history": [], "error": None, "review": {"state": "judging"},
        }
        self.state.save_run(source_id, run)
        try:
            self.state.update_status(source_id, lambda status: status.update({"activeRun": run_id}))
            return self.stage(source_id, run_id, at=at, snapshots=snapshots)
        except BaseException:
            with self.state.status_lock(source_id):
                shutil.rmtree(self.state.runs_dir(source_id) / run_id, ignore_errors=True)
            self._clear_active(source_id, run_id)
            raise

    def work_dir(self, source_id: str, run_id: str) -> Path:
        """The run's working folder (the judge's ``cwd``)."""
        return self.state.runs_dir(source_id) / run_id / "work"

    def snapshots(self, required: Sequence[str] = (), reads: Sequence[str] = ()) -> dict[str, tuple[Tree, str, str | None]]:
        """A locked snapshot of every usable base: ``(tree, digest, Git accepted head or None)``.

        A Git base is fetched only when it is in ``required`` or ``reads`` (a source that neither
        owns nor reads it has no use for it, and a fetch may cross the network).

        A base named in ``required`` (those the source owns) that cannot be read raises (a pending
        journal, a linked file, a missing index ...); any other such base is left out of the run,
        so one broken base does not stop judging into the others.
        """
        found: dict[str, tuple[Tree, str, str | None]] = {}
        for alias, binding in self.bindings.bases.items():
            if alias in self.unusable and alias not in required:
                continue
            if isinstance(binding, GitBinding) and alias not in required and alias not in reads:
                continue
            try:
                provider = self.provider(alias)
                tree, digest = provider.snapshot()
                found[alias] = (tree, digest, getattr(provider.base, "head", None))
            except (ServiceError, OSError) as exc:
                if alias not in required:
                    continue
                if isinstance(exc, OSError):
                    raise OkfError(f"base {alias!r} cannot be read ({describe(exc)})", code="E_RUN") from exc
                raise
        return found

    def stage(self, source_id: str, run_id: str, *, at: float,
              snapshots: dict[str, tuple[Tree, str, str | None]] | None = None) -> Run:
        """Write ``work/`` (input.json, staging.json, bases/) from base snapshots and mark ``ready``."""
        source = self.state.source(source_id)
        owns = source["decl"]["owns"]
        snapshots = self.snapshots(owned_aliases(source), read_aliases(source)) if snapshots is None else snapshots
        try:
            return self._stage(source_id, run_id, source, owns, snapshots, at=at)
        except OSError as exc:
            raise OkfError(f"judgment {run_id} could not be staged ({describe(exc)})", code="E_RUN") from exc

    def _stage(self, source_id: str, run_id: str, source: Source, owns: list[str],
               snapshots: dict[str, tuple[Tree, str, str | None]], *, at: float) -> Run:
        for alias, (tree, _, _) in snapshots.items():  # before the previous staged copy is removed
            problem = next((p for p in map(name_problem, tree) if p is not None), None)
            if problem is not None:
                raise OkfPathError(f"judgment {run_id}: base {alias!r} cannot be staged ({problem}); nothing was written")
        work = self.work_dir(source_id, run_id)
        if work.exists():
            shutil.rmtree(work)
        with self.state.editing_run(source_id, run_id) as run:
            staging: dict[str, StagingEntry] = {}
            stages: dict[str, Stage] = {}
            for alias, (tree, digest, head) in snapshots.items():
                descriptor = self.descriptor_of(alias, tree)
                owned = [n for n in descriptor.nodes if f"{alias}/{n}" in owns]
                nodes: dict[str, NodeEntry] = {n: {"path": d.path, "owner": d.owner} for n, d in descriptor.nodes.items()}
                staging[alias] = {"root": f"bases/{alias}", "owned": owned, "nodes": nodes, "baseline": digest}
                stages[alias] = {"root": f"bases/{alias}", "digest": digest, "owned": owned, "files": len(tree)}
                if head is not None:
                    stages[alias]["head"] = head
                try:  # every name proven inside the staged copy before anything of it is written
                    publish_tree(contained_path(work / "bases", alias), tree)
                except PathError as exc:
                    raise OkfPathError(f"judgment {run_id}: base {alias!r} cannot be staged ({exc}); nothing of it "
                                       "was written") from None
            inputs = [{"id": i, **self.state.read_input(source_id, i)} for i in run["inputs"]]
            input_doc = {"version": 1, "source": {"id": source_id, "owner": source["owner"], "agent": source["agent"],
                                                   "role": source.get("role", "")},
                         "inputs": inputs, "owns": owns, "reads": source["decl"]["reads"]}
            atomic_write_json(work / "input.json", input_doc)
            atomic_write_json(work / "staging.json", staging)
            run.update({"stages": stages, "status": "ready", "receipts": {}, "judgment": None, "error": None,
                        "worker": {"instance": source.get("agent"), "home": str(work)}, "review": {"state": "judging"}})
            run["history"].append({"status": "ready", "at": iso(at)})
        return self.state.load_run(source_id, run_id)

    def staged_tree(self, source_id: str, run_id: str, alias: str, stage: Stage) -> Tree:
        """The run's staged copy of base ``alias``: its baseline, checked against the stage's digest."""
        folder = self.work_dir(source_id, run_id) / "bases" / alias
        try:
            tree = read_tree(folder)
        except (OSError, OkfError) as exc:
            raise BaselineError(f"the staged copy of base {alias!r} cannot be read ({describe(exc)}); rejudge it") from None
        if tree_digest(tree) != stage.get("digest"):
            raise BaselineError(f"the staged copy of base {alias!r} no longer matches its baseline; rejudge it")
        return tree

    def path_limits(self, source_id: str, run_id: str) -> dict[str, PathLimits]:
        """Per base, the file-system limits of every folder its files are copied under.

        The base itself, this run's staged copy, and a knowledge view in every registered home
        and in the durable views folder (view names have a fixed length).
        """
        view = "knowledge-view-" + "0" * 36
        homes = []
        for sid in self.state.source_ids():
            try:
                homes.append(Path(self.state.source(sid)["home"]))
            except (ServiceError, OSError, KeyError, TypeError):
                continue
        durable = self.state.sources_dir / source_id / "views" / view
        limits = {}
        for alias in self.directory_aliases():
            roots = [self.bindings.directory(alias).path, self.work_dir(source_id, run_id) / "bases" / alias,
                     durable / "bases" / alias] + [home / view / "bases" / alias for home in homes]
            limits[alias] = limits_for(roots)
        return limits

    def prompt(self, source_id: str, run_id: str) -> str:
        """The judge prompt for a staged run, and mark it ``launch-intent`` then ``running``."""
        work = self.work_dir(source_id, run_id)
        input_doc = read_json(work / "input.json")
        staging = read_json(work / "staging.json")
        run = self.state.load_run(source_id, run_id)
        concepts: dict[str, dict[str, str]] = {}
        for alias, stage in run["stages"].items():
            tree = self.staged_tree(source_id, run_id, alias, stage)
            nodes = owned_node_paths(staging[alias])
            concepts[alias] = {p: tree[p].decode("utf-8", "replace") for p in concept_paths(tree)
                               if any(p.startswith(n + "/") for n in nodes.values())}
        with self.state.editing_run(source_id, run_id) as run:
            run["status"] = "launch-intent"
            run["launch"] = {"kind": "judge", "cwd": str(work)}
        return build_prompt(input_doc, staging, concepts)

    def mark_running(self, source_id: str, run_id: str, *, at: float) -> None:
        """The judge has been asked: ``launch-intent`` -> ``running``."""
        with self.state.editing_run(source_id, run_id) as run:
            run["status"] = "running"
            run["history"].append({"status": "running", "at": iso(at)})

    def mark_interrupted(self, *, at: float) -> list[str]:
        """Runs left mid-judging by a crash: their outcome is unknown, so they become invalid (rejudge them)."""
        marked = []
        for source_id in self.state.source_ids():
            for run_id in self.state.run_ids(source_id):
                try:
                    if self.state.load_run(source_id, run_id)["review"]["state"] != "judging":
                        continue
                    with self.state.editing_run(source_id, run_id) as run:
                        unknown = "launch-unknown" if run["status"] in ("launch-intent", "running") else "scaffold-unknown"
                        problem = f"E_RUN: judging was interrupted at {run['status']}; its outcome is unknown, rejudge it"
                        run.update({"status": unknown, "error": {"code": "E_RUN", "message": problem, "problems": [problem]},
                                    "review": {"state": "invalid"}})
                        run["history"].append({"status": unknown, "at": iso(at)})
                        marked.append(run_id)
                except (ServiceError, OSError, KeyError, TypeError):  # a damaged run is shown as such by the queue
                    continue
        return marked

    def fail_judging(self, source_id: str, run_id: str, problems: Sequence[str], *, at: float) -> Run:
        """End a run that is still judging as ``invalid`` with ``problems`` (it can be rejudged)."""
        with self.state.editing_run(source_id, run_id) as run:
            if run["review"]["state"] == "judging":
                code = problems[0].split(":", 1)[0] if problems else "E_RUN"
                run.update({"error": {"code": code, "message": f"{len(problems)} rule(s) broken", "problems": list(problems)},
                            "review": {"state": "invalid"}})
                run["history"].append({"status": "invalid", "at": iso(at)})
        self._clear_active(source_id, run_id)
        return run

    def _clear_active(self, source_id: str, run_id: str) -> None:
        def clear(status: Status) -> None:
            if status.get("activeRun") == run_id:
                status["activeRun"] = None

        with contextlib.suppress(ServiceError, OSError):  # a stale marker only names the last run
            self.state.update_status(source_id, clear)

    # -- recording a judgment ------------------------------------------------------------------

    def record_judgment(self, source_id: str, run_id: str, reply: str | None, *, failure: str | None = None,
                        at: float) -> Run:
        """Validate and store the judge's reply; a valid one gets proposals and ``validated`` receipts.

        Whatever the reply holds, and whatever fails while recording it, the run leaves
        ``judging``: pending, or invalid with the reason.
        """
        try:
            run = self._record_judgment(source_id, run_id, reply, failure=failure, at=at)
        except Exception as exc:
            problem = f"E_RUN: the judgment could not be recorded ({describe(exc)}); rejudge it"
            return self.fail_judging(source_id, run_id, [problem], at=at)
        self._clear_active(source_id, run_id)
        return run

    def _record_judgment(self, source_id: str, run_id: str, reply: str | None, *, failure: str | None,
                         at: float) -> Run:
        work = self.work_dir(source_id, run_id)
        run = self.state.load_run(source_id, run_id)
        baselines: dict[str, Tree] = {}
        if failure is not None:
            check = JudgmentCheck(None, (f"E_RUN: the judge run failed: {failure}",))
        else:
            staging = read_json(work / "staging.json")
            baselines = {a: self.staged_tree(source_id, run_id, a, s) for a, s in run["stages"].items()}
            roots = {a: self.bindings.directory(a).path for a in baselines if a in self.directory_aliases()}
            check = check_judgment(reply or "", inputs=run["inputs"], staging=staging, baselines=baselines, at=at,
                                   limits=self.path_limits(source_id, run_id), roots=roots)
        receipts: dict[str, Receipt] = {}
        proposals: dict[Path, Proposal] = {}
        if check.valid:
            for alias, after in check.afters.items():
                before = baselines[alias]
                if not changed_paths(before, after):
                    receipts[alias] = {"status": "no-change"}
                    continue
                file = self.state.runs_dir(source_id) / run_id / f"{alias}-proposal.json"
                proposals[file] = proposal_document(run_id, run["attempt"], str(file), before, after, at=at)
                receipts[alias] = {"status": "validated", "proposal": str(file), "proposalHash": proposal_hash(proposals[file])}
        with self.state.editing_run(source_id, run_id) as run:
            if reply is not None:
                atomic_write_text(work / "judgment.json", stored_reply(reply))
            for file, proposal in proposals.items():
                atomic_write_json(file, proposal)
            run["judgment"] = check.judgment
            if check.valid:
                run.update({"status": "delivering", "receipts": receipts, "error": None, "review": {"state": "pending"}})
            else:
                code = check.problems[0].split(":", 1)[0]
                run.update({"error": {"code": code, "message": f"{len(check.problems)} rule(s) broken",
                                      "problems": list(check.problems)}, "review": {"state": "invalid"}})
            run["history"].append({"status": run["review"]["state"], "at": iso(at)})
        return run

    def reject(self, source_id: str, run_id: str, reason: str, *, at: float) -> Run:
        """Record the operator's rejection; inputs stay for ``rejudge``.

        Pending, invalid and failed judgments, and one that cannot progress (``reject_stuck``).
        """
        if not reason or not reason.strip():
            raise RunStateError("a rejection needs a reason")
        if self.state.load_run(source_id, run_id)["review"]["state"] in ("delivering", "delivered"):
            return self.reject_stuck(source_id, run_id, reason.strip(), at=at)
        with self.state.editing_run(source_id, run_id) as run:
            state = run["review"]["state"]
            if state not in ("pending", "invalid", "failed"):
                raise RunStateError(f"judgment {run_id} is {state}; only pending, invalid or failed judgments can be rejected")
            run["status"] = "rejected"
            run["review"] = {"state": "rejected", "reason": reason.strip(), "rejectedAt": iso(at), "was": state}
            run["history"].append({"status": "rejected", "at": iso(at)})
            return run

    def begin_rejudge(self, source_id: str, run_id: str, *, at: float) -> Run:
        """Archive the attempt under ``rejudgments/<attempt>/`` and restage the unprocessed inputs."""
        processed = set(self.state.status(source_id)["processed"])
        snapshots = self.snapshots(owned_aliases(self.state.source(source_id)), read_aliases(self.state.source(source_id)))
        with self.state.editing_run(source_id, run_id) as run:
            state = run["review"]["state"]
            remaining = [i for i in run["inputs"] if i not in processed]
            if state not in ("invalid", "rejected", "failed", "approved") or not remaining:
                raise RunStateError(f"judgment {run_id} is {state} with {len(remaining)} unprocessed input(s); nothing to rejudge")
            folder = self.state.runs_dir(source_id) / run_id
            archive = folder / "rejudgments" / str(run["attempt"])
            archive.mkdir(parents=True, exist_ok=True)
            for item in list(folder.iterdir()):
                if item.name.endswith(".json") and item.name != "run.json" or item.name == "work":
                    os.replace(item, archive / item.name)
            atomic_write_json(archive / "previous.json", {"judgment": run["judgment"], "receipts": run["receipts"],
                                                          "stages": {a: {"digest": s["digest"]} for a, s in run["stages"].items()},
                                                          "attempt": run["attempt"], "review": run["review"], "error": run["error"]})
            run.update({"inputs": remaining, "attempt": run["attempt"] + 1, "attemptDir": str(archive), "status": "spawn-intent"})
            run["history"].append({"status": "rejudge", "at": iso(at), "attempt": run["attempt"]})
        return self.stage(source_id, run_id, at=at, snapshots=snapshots)
