"""Delivery providers: the seam (``DeliveryProvider``) and directory custody (``DirectoryProvider``).

The directory provider follows OKF's publication journal protocol:

1. take the base's cooperative lock;
2. reconcile the receipt: ``publication-intent`` with no journal reverts to ``validated``;
   ``publishing`` with no journal is ``E_RECOVERY``; an existing journal must recover first;
3. compare the base's digest with the proposal's ``beforeDigest`` (``E_BASELINE``; nothing written);
4. check every changed path for where it lands (``E_PATH``; nothing written): inside the base
   through ``contained_path``, within the file system's name and path limits, no component an
   existing file, no target an existing folder; and that the changed files add up to the
   proposal's ``afterDigest`` (``E_CONFIRM``; nothing written);
5. persist the receipt ``publication-intent``;
6. write the journal ``<base>.okf-publication.json`` atomically;
7. persist the receipt ``publishing``;
8. replace the changed files one at a time (temp in ``<base>.okf-lock/``, fsync, rename, parent fsync);
9. validate the whole base (strict) and check its digest equals ``afterDigest`` (``E_CONFIRM``);
10. persist the receipt ``accepted`` with ``acceptedDigest`` and ``acceptedAt``;
11. delete the journal.

Any other failure from step 5 on (an OS error: a full disk, a lost permission) raises
``PublicationInterrupted`` when the journal exists, so the caller recovers at once, and a plain
``RecoveryError`` ("nothing was written") when it does not. ``recover`` finishes an interrupted
publication from its journal: forward to the after-state when that validates and adds up to
``afterDigest``, else back to the before-state; never a mix, never a path outside the base (every
path is checked as in step 4 before anything is written), and a journal it cannot follow stays
with a ``RecoveryError`` whose ``remedy`` says what to put back or move aside. ``sweep`` removes
the temp files a killed publication left (``.publish.*.tmp``, ``.<base>.okf-publication.json.*.tmp``).
``git_delivery.GitProvider`` implements the same ``DeliveryProvider`` protocol for Git custody.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...clock import iso
from ...files import CorruptFileError, PathError, atomic_write_json, contained_path, fsync_dir, read_json, sweep_temps
from .bases import DirectoryBase
from .bundle import validate_tree
from .errors import BaselineError, ConfirmError, OkfError, OkfPathError, PublicationInterrupted, RecoveryError
from .limits import disk_problem, limits_for, rel_path_problem, shape_problems
from .proposal import ProposalDelta, proposal_hash, read_proposal
from .shapes import Proposal, Receipt
from .tree import Tree, tree_digest

__all__ = ["DeliveryProvider", "DirectoryProvider", "RecoveryOutcome", "SaveReceipt", "StepHook", "describe"]

SaveReceipt = Callable[[Receipt], None]
"""Persists a receipt (called at every status step, before the step's effect)."""
StepHook = Callable[[str], None]
"""Called between publication steps; crash tests use it to kill the process mid-publication."""


def describe(exc: BaseException) -> str:
    """An exception in plain words: an OS error as its message and file, anything else as its text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    if isinstance(exc, OkfError):
        return exc.detail
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class RecoveryOutcome:
    """What ``recover`` did with a journal: ``completed``, ``rolled-back`` or ``discarded``."""

    alias: str
    status: str
    run: str | None
    proposal_file: str | None
    digest: str


class DeliveryProvider(Protocol):
    """Delivers a proposal to one accepted base (``DirectoryProvider`` or ``GitProvider``)."""

    alias: str

    def snapshot(self) -> tuple[Tree, str]:
        """The accepted tree and its digest, read consistently (the staging baseline)."""
        ...

    def publish(self, proposal_file: Path, proposal: Proposal, receipt: Receipt,
                save: SaveReceipt, *, at: float, summary: str = "") -> Receipt:
        """Deliver ``proposal``; persists every receipt step through ``save``; returns the receipt."""
        ...

    def is_refusal(self, exc: OkfError) -> bool:
        """True when ``exc`` refuses the delivery for good (the judgment failed) rather than interrupting it."""
        ...

    def recover(self, complete: Callable[[RecoveryOutcome], None], *, at: float) -> RecoveryOutcome | None:
        """Finish or roll back an interrupted delivery, if any."""
        ...


class DirectoryProvider:
    """Directory custody: lock, baseline, journal, file-by-file atomic replacement, validation."""

    def __init__(self, base: DirectoryBase, *, step_hook: StepHook | None = None) -> None:
        self.base = base
        self.alias = base.alias
        self.step_hook = step_hook

    def _step(self, name: str) -> None:
        if self.step_hook is not None:
            self.step_hook(name)

    def snapshot(self) -> tuple[Tree, str]:
        """The base under its lock (refused while a journal is pending)."""
        return self.base.snapshot()

    # -- what the operator is told --------------------------------------------------------------

    def _journal_remedy(self) -> str:
        journal = self.base.journal_path
        return (f"check the files of {self.base.path} by hand; when they are whole as they stand, move {journal} "
                f"aside (for example to {journal.name}.broken) and reopen the workspace, then rejudge the judgment")

    def _os_remedy(self, exc: BaseException) -> str:
        return (f"fix the cause ({describe(exc)}: free disk space, restore permissions), then reopen the workspace "
                "or retry the judgment; the journal then completes or rolls back the publication")

    # -- checks and file operations -----------------------------------------------------------------

    def path_problems(self, delta: ProposalDelta, current: Tree) -> list[str]:
        """Why the changed paths of ``delta`` cannot be written inside this base as it is now (empty: fine)."""
        limits = limits_for([self.base.path])
        problems = [p for p in (rel_path_problem(path) or limits.problem(path) for path in delta.changed) if p]
        if not problems:
            problems = shape_problems(delta.applied(current, "before"), delta.applied(current, "after"), delta.changed)
        if not problems:
            problems = [p for p in (disk_problem(self.base.path, path) for path in delta.changed) if p]
        return problems

    def _replace(self, rel: str, data: bytes | None) -> None:
        try:
            target = contained_path(self.base.path, rel)
        except PathError as exc:
            raise OkfPathError(f"base {self.alias!r}: {exc}") from None
        missing = []
        folder = target.parent
        while not os.path.lexists(folder):
            missing.append(folder)
            folder = folder.parent
        for folder in reversed(missing):
            folder.mkdir()
            fsync_dir(folder.parent)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            fsync_dir(target.parent)
            return
        fd, tmp = tempfile.mkstemp(prefix=".publish.", suffix=".tmp", dir=self.base.lock_dir)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        fsync_dir(target.parent)

    def _prune(self, delta: ProposalDelta, target: Tree) -> None:
        """Remove the folders a rolled-back publication created and left empty (best effort)."""
        keep = {"/".join(p.split("/")[:end]) for p in target for end in range(1, p.count("/") + 1)}
        for path in sorted((p for p in delta.changed if p not in target), key=lambda p: -p.count("/")):
            parts = path.split("/")[:-1]
            while parts and "/".join(parts) not in keep:
                try:
                    os.rmdir(contained_path(self.base.path, "/".join(parts)))
                except (OSError, PathError):  # a link that appeared meanwhile is never followed
                    break
                parts.pop()

    def sweep(self) -> list[str]:
        """Remove temp files a killed publication left (under the lock, so no live publication's).

        A lock another publisher holds now is not waited for (``RecoveryError`` at once).
        """
        if not self.base.path.parent.is_dir():
            return []
        with self.base.locked(wait_s=0):
            return self._sweep_unlocked()

    def _sweep_unlocked(self) -> list[str]:
        removed = sweep_temps(self.base.journal_path.parent, [self.base.journal_path.name])
        if self.base.lock_dir.is_dir():
            for leftover in self.base.lock_dir.glob(".publish.*.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
                    removed.append(leftover.name)
        return removed

    def _remove_journal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.base.journal_path)
        fsync_dir(self.base.journal_path.parent)

    # -- publication ---------------------------------------------------------------------------

    def is_refusal(self, exc: OkfError) -> bool:
        """Refused before its journal (nothing written): a changed base, a bad path, a proposal that does not add up."""
        return exc.code in ("E_BASELINE", "E_PATH", "E_CONFIRM") and not self.base.journal_pending()

    def publish(self, proposal_file: Path, proposal: Proposal, receipt: Receipt,
                save: SaveReceipt, *, at: float, summary: str = "") -> Receipt:
        """Deliver ``proposal`` by the journal protocol; returns the ``accepted`` receipt (``summary`` unused)."""
        delta = read_proposal(dict(proposal))
        digest_hash = proposal_hash(proposal)
        self.base.check_plain()
        with self.base.locked():
            try:
                self._publish_locked(proposal_file, proposal, delta, digest_hash, receipt, save, at=at)
            except OkfError:
                raise
            except Exception as exc:
                if self.base.journal_pending():
                    raise PublicationInterrupted(
                        f"publication to base {self.alias!r} stopped after its journal was written ({describe(exc)})",
                        remedy=self._os_remedy(exc)) from exc
                raise RecoveryError(f"publication to base {self.alias!r} could not start ({describe(exc)}); "
                                    "nothing was written to the base", remedy=f"fix the cause ({describe(exc)}), "
                                    "then retry the delivery") from exc
        return receipt

    def _publish_locked(self, proposal_file: Path, proposal: Proposal, delta: ProposalDelta,
                        digest_hash: str, receipt: Receipt, save: SaveReceipt, *, at: float) -> None:
        if self.base.journal_pending():
            raise RecoveryError(f"base {self.alias!r}: publication pending; it must recover first")
        if receipt.get("status") == "publication-intent":
            receipt["status"] = "validated"
            save(receipt)
        elif receipt.get("status") not in ("validated", "no-change"):
            raise RecoveryError(f"base {self.alias!r}: receipt is {receipt.get('status')!r} with no journal")
        current = self.base.read_unlocked()
        if tree_digest(current) != delta.before_digest:
            differing = delta.differing(current)
            raise BaselineError(f"base {self.alias!r} changed since the judgment was staged "
                                f"({', '.join(differing[:5]) or 'files this judgment does not touch'}); "
                                "nothing was written, rejudge it")
        problems = self.path_problems(delta, current)
        if problems:
            raise OkfPathError(f"base {self.alias!r}: the proposal cannot be written: {'; '.join(problems[:3])}; "
                               "nothing was written", remedy="reject or rejudge this judgment")
        if tree_digest(delta.applied(current)) != delta.after_digest:
            raise ConfirmError(f"base {self.alias!r}: the proposal's files do not add up to its after-state; "
                               "nothing was written", remedy="rejudge this judgment")
        receipt.update({"status": "publication-intent", "proposal": str(proposal_file), "proposalHash": digest_hash})
        save(receipt)
        self._step("intent")
        atomic_write_json(self.base.journal_path, {"version": 1, "run": proposal["run"], "proposalHash": digest_hash,
                                                   "proposalFile": str(proposal_file), "status": "publishing"})
        self._step("journal")
        receipt["status"] = "publishing"
        save(receipt)
        self._step("publishing")
        for number, path in enumerate(delta.changed, start=1):
            self._replace(path, delta.after.get(path))
            self._step(f"replaced:{number}")
        final = self.base.read_unlocked()
        findings = validate_tree(final, strict=True)
        if findings or tree_digest(final) != delta.after_digest:
            raise ConfirmError(f"base {self.alias!r}: published files do not equal the proposal "
                               f"({'; '.join(map(str, findings[:3])) or 'digest differs'}); the journal stays for recovery",
                               remedy=self._journal_remedy())
        receipt.update({"status": "accepted", "acceptedDigest": tree_digest(final), "acceptedAt": iso(at)})
        receipt.pop("error", None)
        save(receipt)
        self._step("accepted")
        self._remove_journal()

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self, complete: Callable[[RecoveryOutcome], None], *, at: float) -> RecoveryOutcome | None:
        """Finish or roll back an interrupted publication; ``complete`` persists the receipts first.

        Raises ``RecoveryError`` (with a ``remedy``) when the journal cannot be followed; then the
        journal stays and nothing of the base was changed by this call, or (an OS error part way)
        the base stays between the two states the journal names, for the next recovery.
        """
        if not self.base.journal_pending():
            return None
        with self.base.locked():
            if not self.base.journal_pending():
                return None
            try:
                return self._recover_locked(complete)
            except OkfError as exc:
                if exc.remedy is None:
                    exc.remedy = self._journal_remedy()
                raise
            except Exception as exc:
                raise RecoveryError(f"base {self.alias!r}: recovery stopped ({describe(exc)}); "
                                    "the journal stays and recovery runs again at the next open or retry",
                                    remedy=self._os_remedy(exc)) from exc

    def _recover_locked(self, complete: Callable[[RecoveryOutcome], None]) -> RecoveryOutcome:
        self._sweep_unlocked()
        try:
            journal = read_json(self.base.journal_path)
            if not isinstance(journal, dict) or journal.get("version") != 1:
                raise ValueError("journal shape")
        except (CorruptFileError, ValueError):
            outcome = RecoveryOutcome(self.alias, "discarded", None, None, tree_digest(self.base.read_unlocked()))
            complete(outcome)
            self._remove_journal()
            return outcome
        proposal_file = Path(str(journal.get("proposalFile")))
        try:
            proposal = read_json(proposal_file)
        except (OSError, ValueError, CorruptFileError):
            raise RecoveryError(f"base {self.alias!r}: the journal names {proposal_file}, which cannot be read; "
                                "the publication stays pending", remedy=f"put {proposal_file} back; or "
                                + self._journal_remedy()) from None
        if proposal_hash(proposal) != journal.get("proposalHash"):
            raise RecoveryError(f"base {self.alias!r}: {proposal_file} does not match the journal's hash",
                                remedy=f"put the original {proposal_file.name} back; or " + self._journal_remedy())
        try:
            delta = read_proposal(proposal)
        except OkfError as exc:
            raise RecoveryError(f"base {self.alias!r}: the journal's proposal cannot be used ({exc.detail}); "
                                "nothing was written", remedy=self._journal_remedy()) from None
        current = self.base.read_unlocked()
        for path in delta.changed:
            if current.get(path) not in (delta.before.get(path), delta.after.get(path)):
                raise RecoveryError(f"base {self.alias!r}: {path} was changed outside the publication; "
                                    "recovery refuses to mix it",
                                    remedy=f"put {self.base.path / path} back to its text before the publication (or "
                                    "the proposal's), or move it out of the base, then reopen the workspace")
        problems = self.path_problems(delta, current)
        if problems:
            raise RecoveryError(f"base {self.alias!r}: the journal's proposal cannot be written "
                                f"({'; '.join(problems[:3])}); nothing was written", remedy=self._journal_remedy())
        forward, backward = delta.applied(current, "after"), delta.applied(current, "before")
        if not validate_tree(forward, strict=True) and tree_digest(forward) == delta.after_digest:
            target, side, status = forward, delta.after, "completed"
        elif tree_digest(backward) == delta.before_digest:
            target, side, status = backward, delta.before, "rolled-back"
        else:
            raise RecoveryError(f"base {self.alias!r}: files the publication does not touch changed since it began; "
                                "recovery refuses to mix them", remedy=self._journal_remedy())
        for path in delta.changed:
            if current.get(path) != side.get(path):
                self._replace(path, side.get(path))
        if status == "rolled-back":
            self._prune(delta, target)
        final = self.base.read_unlocked()
        if tree_digest(final) != tree_digest(target):
            raise RecoveryError(f"base {self.alias!r}: recovery could not reach a whole state",
                                remedy=self._journal_remedy())
        outcome = RecoveryOutcome(self.alias, status, str(journal.get("run")), str(proposal_file), tree_digest(final))
        complete(outcome)
        self._remove_journal()
        return outcome
