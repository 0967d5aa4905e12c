"""Approval, delivery and recovery of runs: the half of ``RunBook`` that touches the bases.

``claim_approval`` moves a pending run to ``delivering`` (narrowing its proposals to the chosen
outcomes); ``deliver`` publishes every unsettled receipt through the base's provider, but only the
proposal whose hash the receipt names; ``settle`` marks the run processed once every receipt is
settled; ``recover``/``recover_alias`` follow a base's pending journal. An OS error mid-publication
is recovered at once (forward or back, following the journal); what cannot recover yet leaves the
base blocked with a ``RecoveryError`` naming the way out.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ...clock import iso
from ...errors import ServiceError
from ...files import CorruptFileError, atomic_write_json, read_json
from .delivery import RecoveryOutcome, describe
from .git_acceptance import WAITING, check_delivery
from .git_delivery import IN_FLIGHT, GitProvider
from .bundle import validate_tree
from .errors import ConfirmError, OkfError, OkfValidationError, PublicationInterrupted, RecoveryError, RunStateError
from .judgment import owned_node_paths
from .proposal import apply_judgment, changed_paths, proposal_document, proposal_hash
from .shapes import Proposal, Receipt, Run, Stage, outcomes_of
from .state import StateDir
from .tree import Tree

if TYPE_CHECKING:
    from .delivery import DirectoryProvider

__all__ = ["DeliveryBook", "SETTLED_RECEIPTS", "summary_of"]

SETTLED_RECEIPTS = ("accepted", "delivered", "no-change")
"""Receipt statuses that settle a base for a run."""


def summary_of(run: Run) -> str:
    """The judgment's summary (a pull request's body): each approved outcome with its reason and concepts."""
    raw = run.get("judgment")
    judgment: Mapping[str, object] = raw if isinstance(raw, dict) else {}
    approved = set((run.get("review") or {}).get("approved") or [])
    lines = [f"Knowledge proposed by OKF judgment {run.get('id')} (attempt {run.get('attempt', 1)}).", ""]
    outcomes = judgment.get("outcomes") or []
    for outcome in outcomes if isinstance(outcomes, list) else []:
        if not isinstance(outcome, dict) or (approved and outcome.get("input") not in approved):
            continue
        concepts = ", ".join(f"{c.get('base')}/{c.get('path')}" for c in outcome.get("concepts") or []
                             if isinstance(c, dict))
        lines.append(f"- {outcome.get('verdict')}: {outcome.get('reason')}" + (f" ({concepts})" if concepts else ""))
    return "\n".join(lines) + "\n"


class DeliveryBook:
    """Approving, delivering, settling and recovering runs; ``RunBook`` adds creating and judging them."""

    state: StateDir

    if TYPE_CHECKING:
        def provider(self, alias: str) -> DirectoryProvider | GitProvider: ...

        def directory_aliases(self) -> list[str]: ...

        def git_aliases(self) -> list[str]: ...

        def work_dir(self, source_id: str, run_id: str) -> Path: ...

        def staged_tree(self, source_id: str, run_id: str, alias: str, stage: Stage) -> Tree: ...

    # -- operator decisions ----------------------------------------------------------------------

    def claim_approval(self, source_id: str, run_id: str, selected: Sequence[str] | None, *, at: float) -> Run:
        """Move a pending run to ``delivering`` (one caller wins; the others get ``RunStateError``)."""
        with self.state.editing_run(source_id, run_id) as run:
            state = run["review"]["state"]
            if state != "pending":
                raise RunStateError(f"judgment {run_id} is {state}, not pending; it cannot be approved"
                                    + (" again" if state in ("delivering", "approved") else ""))
            ids = [o["input"] for o in outcomes_of(run["judgment"])]
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

    def _narrow(self, source_id: str, run: Run, chosen: Sequence[str], *, at: float) -> None:
        """Rebuild the proposals from the chosen outcomes only (removals need a whole approval).

        Everything is computed and validated before any file is written, and outcomes that
        share a concept must be approved together (its text carries all of them).
        """
        outcomes = [o for o in outcomes_of(run["judgment"]) if o["input"] in chosen]
        writers: dict[tuple[str, str], set[str]] = {}
        for outcome in outcomes_of(run["judgment"]):
            for concept in outcome["concepts"]:
                writers.setdefault((concept["base"], concept["path"]), set()).add(outcome["input"])
        for (base, path), inputs in sorted(writers.items()):
            if inputs & set(chosen) and not inputs <= set(chosen):
                raise RunStateError(f"outcomes for {', '.join(sorted(i[:12] for i in inputs))} all write {base}/{path}; "
                                    "approve them together")
        staging = read_json(self.work_dir(source_id, run["id"]) / "staging.json")
        planned: dict[str, Proposal | None] = {}
        for alias in run["receipts"]:
            before = self.staged_tree(source_id, run["id"], alias, run["stages"][alias])
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

    def deliver(self, source_id: str, run_id: str, *, at: float) -> Run:
        """Publish every unsettled receipt of an approved run; settle the run when all are done.

        A publication an OS error interrupts is recovered at once, following its journal: when it
        completes the delivery goes on; when it rolls back (or cannot recover yet, leaving the base
        blocked until it does) a ``RecoveryError`` says so and the run stays ``delivering`` for a
        retry. A changed base, a proposal that is not the validated one or that cannot be written
        fails the judgment (``failed``, rejudge it) with nothing written.
        """
        run = self.state.load_run(source_id, run_id)
        for alias, receipt in run["receipts"].items():
            if receipt["status"] in SETTLED_RECEIPTS:
                continue

            def save(value: Receipt, alias: str = alias) -> None:
                with self.state.editing_run(source_id, run_id) as current:
                    current["receipts"][alias] = value.copy()

            try:
                file, proposal = self._validated_proposal(alias, receipt)
            except OkfError as exc:
                self._delivery_error(source_id, run_id, exc, failed=True)
                raise
            try:
                provider = self.provider(alias)
            except OkfError as exc:  # a base that cannot be used now: the delivery waits for it
                self._delivery_error(source_id, run_id, exc, failed=False)
                raise
            try:
                provider.publish(file, proposal, receipt.copy(), save, at=at, summary=summary_of(run))
            except PublicationInterrupted as exc:
                self._recover_interrupted(source_id, run_id, alias, exc, at=at)
            except OkfError as exc:  # refused before its journal or its push (nothing written): the judgment failed
                self._delivery_error(source_id, run_id, exc, failed=provider.is_refusal(exc))
                raise
        try:
            return self.settle(source_id, run_id, at=at)
        except OSError as exc:
            raise RecoveryError(f"judgment {run_id} was delivered but could not be marked processed ({describe(exc)})",
                                remedy="fix the cause, then retry the delivery; nothing is published twice") from exc

    # -- Git: resuming deliveries and merge-visible acceptance ---------------------------------------

    def in_flight(self) -> list[tuple[str, str]]:
        """``(source, run)`` of every approved run with a Git delivery that started and was not settled."""
        found = []
        git = set(self.git_aliases())
        for source_id in self.state.source_ids():
            for run_id in self.state.run_ids(source_id):
                with contextlib.suppress(ServiceError, OSError, KeyError, TypeError):
                    run = self.state.load_run(source_id, run_id)
                    if run["review"]["state"] == "delivering" and any(
                            r.get("status") in IN_FLIGHT or alias in git for alias, r in run["receipts"].items()):
                        found.append((source_id, run_id))
        return found

    def waiting(self) -> list[tuple[str, str]]:
        """``(source, run)`` of every run with a Git delivery waiting for its merge."""
        found = []
        for source_id in self.state.source_ids():
            for run_id in self.state.run_ids(source_id):
                with contextlib.suppress(ServiceError, OSError, KeyError, TypeError):
                    run = self.state.load_run(source_id, run_id)
                    if any(r.get("status") == WAITING for r in run["receipts"].values()):
                        found.append((source_id, run_id))
        return found

    def recheck(self, source_id: str, run_id: str, *, at: float) -> Run:
        """Check each waiting Git delivery of a run for its merge; record accepted or rejected upstream.

        All accepted: the judgment is ``approved`` and the receipts join ``status.json``'s
        ``accepted``. One rejected upstream: the judgment is ``rejected`` with that reason and its
        inputs are no longer processed, so it can be judged again.
        """
        run = self.state.load_run(source_id, run_id)
        for alias, receipt in run["receipts"].items():
            if receipt.get("status") != WAITING:
                continue
            provider = self.provider(alias)
            if not isinstance(provider, GitProvider):  # only a Git delivery waits for a merge
                continue
            updated = check_delivery(provider.base, receipt, provider.prs, at=at)
            if updated is None:
                continue
            with self.state.status_lock(source_id):
                current = self.state.load_run(source_id, run_id)
                current["receipts"][alias] = updated
                current["error"] = None
                self._after_check(source_id, current, alias, updated, at=at)
                self.state.save_run(source_id, current)
        return self.state.load_run(source_id, run_id)

    def confirm_merged(self, source_id: str, run_id: str, *, at: float) -> Run:
        """The operator says a delivery whose branch is gone unmatched (``upstream``) was merged: each such
        receipt is accepted at the accepted branch's current head, ``mergedAs`` saying who decided."""
        run = self.state.load_run(source_id, run_id)
        unknown = [a for a, r in run["receipts"].items() if r.get("status") == WAITING and r.get("upstream")]
        if run["review"]["state"] != "delivered" or not unknown:
            raise RunStateError(f"judgment {run_id} is {run['review']['state']} and has no delivery whose merge is "
                                "unknown; only such a delivery is accepted on the operator's word")
        for alias in unknown:
            provider = self.provider(alias)
            if not isinstance(provider, GitProvider):
                continue
            with provider.base.locked():
                head = provider.base.fetch()
            with self.state.status_lock(source_id):
                current = self.state.load_run(source_id, run_id)
                receipt = current["receipts"][alias].copy()
                receipt.update({"status": "accepted", "acceptedCommit": head, "acceptedAt": iso(at),
                                "mergedAs": {"commit": head, "how": "confirmed by the operator"}})
                current["receipts"][alias] = receipt
                self._after_check(source_id, current, alias, receipt, at=at)
                self.state.save_run(source_id, current)
        return self.state.load_run(source_id, run_id)

    def reject_stuck(self, source_id: str, run_id: str, reason: str, *, at: float) -> Run:
        """The operator rejects a judgment that cannot progress on its own: a delivery whose last attempt
        failed (``delivering`` with an error, no directory publication under way), or a Git delivery
        whose branch is gone unmatched (``upstream``). Its approved inputs are judged again."""
        with self.state.status_lock(source_id):
            run = self.state.load_run(source_id, run_id)
            state = run["review"]["state"]
            receipts = run["receipts"]
            unknown = [a for a, r in receipts.items() if r.get("status") == WAITING and r.get("upstream")]
            publishing = [a for a, r in receipts.items() if r.get("status") in ("publication-intent", "publishing")]
            if state == "delivering" and (not run.get("error") or publishing):
                raise RunStateError(f"judgment {run_id} is being delivered" + (
                    f" and its publication to {', '.join(publishing)} must recover first" if publishing else
                    "; retry it (j), and reject it if the delivery fails"))
            if state not in ("delivering", "delivered") or (state == "delivered" and not unknown):
                raise RunStateError(f"judgment {run_id} is {state}; it cannot be rejected")
            status = self.state.status(source_id)
            approved = set(run["review"].get("approved", []))
            status["processed"] = [i for i in status["processed"] if i not in approved]
            for alias in unknown:
                receipt = receipts[alias].copy()
                receipt.update({"status": "rejected", "rejectedAt": iso(at),
                                "rejectedUpstream": f"the operator rejected it ({receipt.get('upstream')})"})
                receipts[alias] = receipt
                status["delivered"][f"{run_id}/{alias}"] = receipt
            run["status"] = "rejected"
            run["review"] = {**run["review"], "state": "rejected", "reason": reason, "rejectedAt": iso(at), "was": state}
            run["history"].append({"status": "rejected", "at": iso(at)})
            atomic_write_json(self.state.source_dir(source_id) / "status.json", status)
            self.state.save_run(source_id, run)
            return run

    def note_check_error(self, source_id: str, run_id: str, exc: OkfError) -> None:
        """Record that a merge check failed (the receipts stay as they were)."""
        self._delivery_error(source_id, run_id, exc, failed=False)

    def _after_check(self, source_id: str, run: Run, alias: str, receipt: Receipt, *,
                     at: float) -> None:
        """Fold one checked receipt into the run and ``status.json`` (the caller holds the status lock)."""
        status = self.state.status(source_id)
        key = f"{run['id']}/{alias}"
        status["delivered"][key] = receipt
        if receipt["status"] == "accepted":
            status["accepted"][key] = receipt
            run["history"].append({"status": "accepted", "alias": alias, "at": iso(at)})
            if run["review"]["state"] == "delivered" and not any(
                    r["status"] == WAITING for r in run["receipts"].values()):
                run["review"]["state"] = "approved"
        elif receipt["status"] == "rejected":
            approved = set(run["review"].get("approved", []))
            status["processed"] = [i for i in status["processed"] if i not in approved]
            reason = f"rejected upstream ({alias}): {receipt.get('rejectedUpstream')}"
            run["status"] = "rejected"
            run["review"] = {**run["review"], "state": "rejected", "reason": reason, "rejectedAt": iso(at),
                             "was": run["review"]["state"]}
            run["history"].append({"status": "rejected", "alias": alias, "at": iso(at)})
        atomic_write_json(self.state.source_dir(source_id) / "status.json", status)

    def _validated_proposal(self, alias: str, receipt: Receipt) -> tuple[Path, Proposal]:
        """The proposal file the receipt names, refused unless it still hashes to the receipt's hash."""
        file = Path(str(receipt.get("proposal")))
        try:
            proposal = read_json(file)
        except (OSError, ValueError, CorruptFileError) as exc:
            raise ConfirmError(f"base {alias!r}: the proposal {file} cannot be read ({describe(exc)}); "
                               "nothing was written", remedy="rejudge this judgment") from None
        if not isinstance(proposal, dict) or proposal_hash(proposal) != receipt.get("proposalHash"):
            raise ConfirmError(f"base {alias!r}: the proposal {file.name} changed since it was validated "
                               "(its hash is not the receipt's); nothing was written",
                               remedy="rejudge this judgment to build a new proposal")
        return file, cast(Proposal, proposal)  # it hashes to what the run validated and wrote

    def _delivery_error(self, source_id: str, run_id: str, exc: OkfError, *, failed: bool) -> None:
        """Record a delivery error on the run (best effort: the error itself is raised either way)."""
        with contextlib.suppress(ServiceError, OSError), self.state.editing_run(source_id, run_id) as current:
            current["error"] = {"code": exc.code, "message": exc.detail, "problems": [str(exc)]}
            if failed:
                current["review"]["state"] = "failed"

    def _recover_interrupted(self, source_id: str, run_id: str, alias: str, exc: PublicationInterrupted,
                             *, at: float) -> None:
        try:
            outcome = self.recover_alias(alias, at=at)
        except Exception as failure:
            error = RecoveryError(f"{exc.detail}; recovery could not finish it yet ({describe(failure)}), so the base "
                                  "is blocked until it does", remedy=getattr(failure, "remedy", None) or exc.remedy)
            self._delivery_error(source_id, run_id, error, failed=False)
            raise error from failure
        if outcome is None or outcome.status != "completed":
            error = RecoveryError(f"{exc.detail}; it was rolled back and the base is as it was",
                                  remedy="fix the cause, then retry the delivery")
            self._delivery_error(source_id, run_id, error, failed=False)
            raise error from exc

    def settle(self, source_id: str, run_id: str, *, at: float) -> Run:
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
            run.update({"status": "processed", "error": None, "settled": sorted(run["receipts"])})
            waiting = any(r["status"] == "delivered" for r in run["receipts"].values())
            run["review"]["state"] = "delivered" if waiting else "approved"
            run["history"].append({"status": "processed", "at": iso(at)})
            atomic_write_json(self.state.source_dir(source_id) / "status.json", status)
            self.state.save_run(source_id, run)
            return run

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self, *, at: float) -> list[RecoveryOutcome]:
        """Recover every base with a pending journal, updating the runs' receipts first."""
        outcomes = []
        for alias in self.directory_aliases():
            result = self.recover_alias(alias, at=at)
            if result is not None:
                outcomes.append(result)
        return outcomes

    def recover_alias(self, alias: str, *, at: float) -> RecoveryOutcome | None:
        """Recover one base's pending journal (None when there is none); ``RecoveryError`` when it cannot."""
        provider = self.provider(alias)

        def complete(outcome: RecoveryOutcome) -> None:
            if outcome.run is None:
                return
            try:
                source_id = self.state.find_run(outcome.run)
            except OkfError:
                return
            with self.state.editing_run(source_id, outcome.run) as run:
                receipt: Receipt = run["receipts"].get(alias, {})
                if outcome.status == "completed":
                    receipt.update({"status": "accepted", "acceptedDigest": outcome.digest, "acceptedAt": iso(at)})
                    receipt.pop("error", None)
                else:
                    receipt.update({"status": "validated", "error": "publication rolled back to the baseline"})
                run["receipts"][alias] = receipt
                run["history"].append({"status": f"recovered-{outcome.status}", "alias": alias, "at": iso(at)})

        result = provider.recover(complete, at=at)
        if result is not None and result.run is not None:
            with contextlib.suppress(ServiceError, OSError):  # an unsettled run is settled by its retry
                self.settle(self.state.find_run(result.run), result.run, at=at)
        return result
