"""The run lifecycle, synchronous (``Harvest`` runs it in worker threads).

A run judges a batch of a source's outstanding inputs (at most 192,000 bytes of payload):

``spawn-intent`` -> ``scaffolded`` (``work/`` with ``input.json``, ``staging.json`` and the
staged ``bases/<alias>/``) -> ``ready`` -> ``launch-intent`` -> ``running`` (judge asked) ->
``delivering`` (valid judgment stored, receipts ``validated``/``no-change``, awaiting the
operator) -> ``processed`` (every receipt ``accepted``/``no-change``) or ``rejected`` (the
operator said no). An invalid judgment keeps the run ``running`` with its problems; it is never
delivered. ``review.state`` holds the queue state (see ``models.QUEUE_STATES``).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...clock import iso
from ...files import atomic_write_json, atomic_write_text
from .delivery import DirectoryProvider, RecoveryOutcome
from .descriptors import Bindings, DirectoryBinding
from .bases import DirectoryBase
from .errors import OkfError, OkfValidationError, RunStateError
from .judge import build_prompt
from .judgment import JudgmentCheck, check_judgment, owned_node_paths
from .bundle import concept_paths, validate_tree
from .proposal import apply_judgment, changed_paths, proposal_document, proposal_hash
from .state import StateDir
from .tree import decode_tree, encode_tree

__all__ = ["RunBook", "BATCH_BYTES", "SETTLED_RECEIPTS"]

BATCH_BYTES = 192_000
"""A run batches inputs up to this many bytes of payload."""
SETTLED_RECEIPTS = ("accepted", "delivered", "no-change")
"""Receipt statuses that settle a base for a run."""


class RunBook:
    """Creates, judges, approves, rejects and recovers runs of every source in one state dir."""

    def __init__(self, state: StateDir, bindings: Bindings, *, step_hook: Any = None) -> None:
        self.state = state
        self.bindings = bindings
        self.step_hook = step_hook

    # -- providers -------------------------------------------------------------------------

    def provider(self, alias: str) -> DirectoryProvider:
        """The delivery provider of a bound base (directory custody only, for now)."""
        return DirectoryProvider(DirectoryBase(self.bindings.directory(alias)), step_hook=self.step_hook)

    def directory_aliases(self) -> list[str]:
        """Every directory base alias."""
        return [a for a, b in self.bindings.bases.items() if isinstance(b, DirectoryBinding)]

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

    def create_run(self, source_id: str, inputs: list[str], *, at: float) -> dict[str, Any]:
        """A new run for ``inputs``, staged and ``ready`` to judge."""
        source = self.state.source(source_id)
        snapshots = self.snapshots()
        run_id = str(uuid.uuid4())
        run: dict[str, Any] = {
            "version": 1, "id": run_id, "source": source_id, "created": iso(at), "inputs": list(inputs),
            "status": "spawn-intent", "stages": {}, "receipts": {}, "noLaunch": False,
            "worker": {"instance": source.get("agent"), "home": None}, "launch": None, "judgment": None,
            "settled": [], "recoveryOf": None, "recoveryGuards": None, "attempt": 1, "attemptDir": None,
            "history": [], "error": None, "review": {"state": "judging"},
        }
        self.state.save_run(source_id, run)
        self.state.update_status(source_id, lambda status: status.update(activeRun=run_id))
        return self.stage(source_id, run_id, at=at, snapshots=snapshots)

    def work_dir(self, source_id: str, run_id: str) -> Path:
        """The run's working folder (the judge's ``cwd``)."""
        return self.state.runs_dir(source_id) / run_id / "work"

    def snapshots(self) -> dict[str, tuple[Any, str]]:
        """A locked snapshot of every base (refused while a journal is pending or a file is linked)."""
        return {alias: self.provider(alias).snapshot() for alias in self.directory_aliases()}

    def stage(self, source_id: str, run_id: str, *, at: float,
              snapshots: dict[str, tuple[Any, str]] | None = None) -> dict[str, Any]:
        """Write ``work/`` (input.json, staging.json, bases/) from base snapshots and mark ``ready``."""
        source = self.state.source(source_id)
        owns = source["decl"]["owns"]
        snapshots = self.snapshots() if snapshots is None else snapshots
        work = self.work_dir(source_id, run_id)
        if work.exists():
            shutil.rmtree(work)
        with self.state.editing_run(source_id, run_id) as run:
            staging: dict[str, Any] = {}
            stages: dict[str, Any] = {}
            for alias, (tree, digest) in snapshots.items():
                descriptor = self.provider(alias).base.descriptor()
                owned = [n for n in descriptor.nodes if f"{alias}/{n}" in owns]
                nodes = {n: {"path": d.path, "owner": d.owner} for n, d in descriptor.nodes.items()}
                staging[alias] = {"root": f"bases/{alias}", "owned": owned, "nodes": nodes, "baseline": digest}
                stages[alias] = {"root": f"bases/{alias}", "baseline": encode_tree(tree), "digest": digest, "owned": owned}
                for rel, data in tree.items():
                    target = work / "bases" / alias / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
            inputs = [{"id": i, **self.state.read_input(source_id, i)} for i in run["inputs"]]
            input_doc = {"version": 1, "source": {"id": source_id, "owner": source["owner"], "agent": source["agent"],
                                                   "role": source.get("role", "")},
                         "inputs": inputs, "owns": owns, "reads": source["decl"]["reads"]}
            atomic_write_json(work / "input.json", input_doc)
            atomic_write_json(work / "staging.json", staging)
            run.update(stages=stages, status="ready", receipts={}, judgment=None, error=None,
                       worker={"instance": source.get("agent"), "home": str(work)}, review={"state": "judging"})
            run["history"].append({"status": "ready", "at": iso(at)})
        return self.state.load_run(source_id, run_id)

    def prompt(self, source_id: str, run_id: str) -> str:
        """The judge prompt for a staged run, and mark it ``launch-intent`` then ``running``."""
        work = self.work_dir(source_id, run_id)
        input_doc = json.loads((work / "input.json").read_text("utf-8"))
        staging = json.loads((work / "staging.json").read_text("utf-8"))
        run = self.state.load_run(source_id, run_id)
        concepts: dict[str, dict[str, str]] = {}
        for alias, stage in run["stages"].items():
            tree = decode_tree(stage["baseline"])
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
                if self.state.load_run(source_id, run_id)["review"]["state"] != "judging":
                    continue
                with self.state.editing_run(source_id, run_id) as run:
                    unknown = "launch-unknown" if run["status"] in ("launch-intent", "running") else "scaffold-unknown"
                    problem = f"E_RUN: judging was interrupted at {run['status']}; its outcome is unknown, rejudge it"
                    run.update(status=unknown, error={"code": "E_RUN", "message": problem, "problems": [problem]},
                               review={"state": "invalid"})
                    run["history"].append({"status": unknown, "at": iso(at)})
                    marked.append(run_id)
        return marked

    # -- recording a judgment ------------------------------------------------------------------

    def record_judgment(self, source_id: str, run_id: str, reply: str | None, *, failure: str | None = None,
                        at: float) -> dict[str, Any]:
        """Validate and store the judge's reply; a valid one gets proposals and ``validated`` receipts."""
        work = self.work_dir(source_id, run_id)
        if reply is not None:
            atomic_write_text(work / "judgment.json", reply)
        run = self.state.load_run(source_id, run_id)
        staging = json.loads((work / "staging.json").read_text("utf-8"))
        baselines = {a: decode_tree(s["baseline"]) for a, s in run["stages"].items()}
        if failure is not None:
            check = JudgmentCheck(None, (f"E_RUN: the judge run failed: {failure}",))
        else:
            check = check_judgment(reply or "", inputs=run["inputs"], staging=staging, baselines=baselines, at=at)
        receipts: dict[str, Any] = {}
        if check.valid:
            for alias, after in check.afters.items():
                before = baselines[alias]
                if not changed_paths(before, after):
                    receipts[alias] = {"status": "no-change"}
                    continue
                file = self.state.runs_dir(source_id) / run_id / f"{alias}-proposal.json"
                proposal = proposal_document(run_id, run["attempt"], str(file), before, after, at=at)
                atomic_write_json(file, proposal)
                receipts[alias] = {"status": "validated", "proposal": str(file), "proposalHash": proposal_hash(proposal)}
        with self.state.editing_run(source_id, run_id) as run:
            run["judgment"] = check.judgment
            if check.valid:
                run.update(status="delivering", receipts=receipts, error=None, review={"state": "pending"})
            else:
                code = check.problems[0].split(":", 1)[0]
                run.update(error={"code": code, "message": f"{len(check.problems)} rule(s) broken",
                                  "problems": list(check.problems)}, review={"state": "invalid"})
            run["history"].append({"status": run["review"]["state"], "at": iso(at)})

        def clear(status: dict[str, Any]) -> None:
            if status.get("activeRun") == run_id:
                status["activeRun"] = None

        self.state.update_status(source_id, clear)
        return run

    # -- operator decisions ----------------------------------------------------------------------

    def claim_approval(self, source_id: str, run_id: str, selected: Sequence[str] | None, *, at: float) -> dict[str, Any]:
        """Move a pending run to ``delivering`` (one caller wins; the others get ``RunStateError``)."""
        with self.state.editing_run(source_id, run_id) as run:
            state = run["review"]["state"]
            if state != "pending":
                raise RunStateError(f"judgment {run_id} is {state}, not pending; it cannot be approved"
                                    + (" again" if state in ("delivering", "approved") else ""))
            ids = [o["input"] for o in run["judgment"]["outcomes"]]
            chosen = list(ids) if selected is None else list(dict.fromkeys(selected))
            unknown = [i for i in chosen if i not in ids]
            if unknown or not chosen:
                raise RunStateError(f"judgment {run_id}: no outcome for {', '.join(unknown) or 'an empty selection'}")
            whole = set(chosen) == set(ids)
            run["review"] = {"state": "delivering", "approved": chosen, "declined": [i for i in ids if i not in chosen],
                             "whole": whole, "approvedAt": iso(at)}
            if not whole:
                self._narrow(source_id, run, chosen, at=at)
            return run

    def _narrow(self, source_id: str, run: dict[str, Any], chosen: Sequence[str], *, at: float) -> None:
        """Rebuild the proposals from the chosen outcomes only (removals need a whole approval).

        Everything is computed and validated before any file is written, and outcomes that
        share a concept must be approved together (its text carries all of them).
        """
        outcomes = [o for o in run["judgment"]["outcomes"] if o["input"] in chosen]
        writers: dict[tuple[str, str], set[str]] = {}
        for outcome in run["judgment"]["outcomes"]:
            for concept in outcome["concepts"]:
                writers.setdefault((concept["base"], concept["path"]), set()).add(outcome["input"])
        for (base, path), inputs in sorted(writers.items()):
            if inputs & set(chosen) and not inputs <= set(chosen):
                raise RunStateError(f"outcomes for {', '.join(sorted(i[:12] for i in inputs))} all write {base}/{path}; "
                                    "approve them together")
        staging = json.loads((self.work_dir(source_id, run["id"]) / "staging.json").read_text("utf-8"))
        planned: dict[str, dict[str, Any] | None] = {}
        for alias in run["receipts"]:
            before = decode_tree(run["stages"][alias]["baseline"])
            after = apply_judgment(before, alias, outcomes, [], owned_node_paths(staging[alias]), at=at)
            findings = validate_tree(after, strict=True)
            if findings:
                raise OkfValidationError(f"the selected outcomes do not validate for {alias}", findings)
            file = self.state.runs_dir(source_id) / run["id"] / f"{alias}-proposal.json"
            planned[alias] = (proposal_document(run["id"], run["attempt"], str(file), before, after, at=at)
                              if changed_paths(before, after) else None)
        for alias, proposal in planned.items():
            file = self.state.runs_dir(source_id) / run["id"] / f"{alias}-proposal.json"
            if file.exists():
                os.replace(file, file.with_name(f"{alias}-proposal.judged.json"))
            if proposal is None:
                run["receipts"][alias] = {"status": "no-change"}
                continue
            atomic_write_json(file, proposal)
            run["receipts"][alias] = {"status": "validated", "proposal": str(file), "proposalHash": proposal_hash(proposal)}

    def deliver(self, source_id: str, run_id: str, *, at: float) -> dict[str, Any]:
        """Publish every unsettled receipt of an approved run; settle the run when all are done."""
        run = self.state.load_run(source_id, run_id)
        for alias, receipt in run["receipts"].items():
            if receipt["status"] in SETTLED_RECEIPTS:
                continue
            proposal = json.loads(Path(receipt["proposal"]).read_bytes())

            def save(value: dict[str, Any], alias: str = alias) -> None:
                with self.state.editing_run(source_id, run_id) as current:
                    current["receipts"][alias] = dict(value)

            try:
                self.provider(alias).publish(Path(receipt["proposal"]), proposal, dict(receipt), save, at=at)
            except OkfError as exc:
                with self.state.editing_run(source_id, run_id) as current:
                    current["error"] = {"code": exc.code, "message": exc.detail, "problems": [str(exc)]}
                    if exc.code == "E_BASELINE":
                        current["review"]["state"] = "failed"
                raise
        return self.settle(source_id, run_id, at=at)

    def settle(self, source_id: str, run_id: str, *, at: float) -> dict[str, Any]:
        """Mark the run ``processed`` and its approved inputs processed once every receipt is settled."""
        with self.state.status_lock(source_id):
            run = self.state.load_run(source_id, run_id)
            if run["review"]["state"] != "delivering" or any(
                    r["status"] not in SETTLED_RECEIPTS for r in run["receipts"].values()):
                return run
            status = self.state.status(source_id)
            for input_id in run["review"].get("approved", []):
                if input_id not in status["processed"]:
                    status["processed"].append(input_id)
            for alias, receipt in run["receipts"].items():
                status["delivered"][f"{run_id}/{alias}"] = receipt
                if receipt["status"] == "accepted":
                    status["accepted"][f"{run_id}/{alias}"] = receipt
            run.update(status="processed", error=None, settled=sorted(run["receipts"]))
            run["review"]["state"] = "approved"
            run["history"].append({"status": "processed", "at": iso(at)})
            atomic_write_json(self.state.source_dir(source_id) / "status.json", status)
            self.state.save_run(source_id, run)
            return run

    def reject(self, source_id: str, run_id: str, reason: str, *, at: float) -> dict[str, Any]:
        """Record the operator's rejection; inputs stay for ``rejudge``."""
        if not reason or not reason.strip():
            raise RunStateError("a rejection needs a reason")
        with self.state.editing_run(source_id, run_id) as run:
            state = run["review"]["state"]
            if state not in ("pending", "invalid", "failed"):
                raise RunStateError(f"judgment {run_id} is {state}; only pending, invalid or failed judgments can be rejected")
            run["status"] = "rejected"
            run["review"] = {"state": "rejected", "reason": reason.strip(), "rejectedAt": iso(at), "was": state}
            run["history"].append({"status": "rejected", "at": iso(at)})
            return run

    def begin_rejudge(self, source_id: str, run_id: str, *, at: float) -> dict[str, Any]:
        """Archive the attempt under ``rejudgments/<attempt>/`` and restage the unprocessed inputs."""
        processed = set(self.state.status(source_id)["processed"])
        snapshots = self.snapshots()
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
            run.update(inputs=remaining, attempt=run["attempt"] + 1, attemptDir=str(archive), status="spawn-intent")
            run["history"].append({"status": "rejudge", "at": iso(at), "attempt": run["attempt"]})
        return self.stage(source_id, run_id, at=at, snapshots=snapshots)

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self, *, at: float) -> list[RecoveryOutcome]:
        """Recover every base with a pending journal, updating the runs' receipts first."""
        outcomes = []
        for alias in self.directory_aliases():
            provider = self.provider(alias)

            def complete(outcome: RecoveryOutcome, alias: str = alias) -> None:
                if outcome.run is None:
                    return
                try:
                    source_id = self.state.find_run(outcome.run)
                except OkfError:
                    return
                with self.state.editing_run(source_id, outcome.run) as run:
                    receipt = run["receipts"].get(alias, {})
                    if outcome.status == "completed":
                        receipt.update(status="accepted", acceptedDigest=outcome.digest, acceptedAt=iso(at))
                        receipt.pop("error", None)
                    else:
                        receipt.update(status="validated", error="publication rolled back to the baseline")
                    run["receipts"][alias] = receipt
                    run["history"].append({"status": f"recovered-{outcome.status}", "alias": alias, "at": iso(at)})

            result = provider.recover(complete, at=at)
            if result is not None:
                outcomes.append(result)
                if result.run is not None:
                    try:
                        self.settle(self.state.find_run(result.run), result.run, at=at)
                    except OkfError:
                        pass
        return outcomes
