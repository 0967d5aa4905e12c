"""Delivery providers: the seam (``DeliveryProvider``) and directory custody (``DirectoryProvider``).

The directory provider follows OKF's publication journal protocol exactly:

1. take the base's cooperative lock;
2. reconcile the receipt: ``publication-intent`` with no journal reverts to ``validated``;
   ``publishing`` with no journal is ``E_RECOVERY``; an existing journal must recover first;
3. compare the base's digest with ``digest(proposal.before)`` (``E_BASELINE``; nothing written);
4. persist the receipt ``publication-intent``;
5. write the journal ``<base>.okf-publication.json`` atomically;
6. check every changed file still holds its before- or after-bytes;
7. persist the receipt ``publishing``;
8. replace the files one at a time (temp in ``<base>.okf-lock/``, fsync, rename, parent fsync);
9. validate the whole base (strict) and check its digest equals ``digest(proposal.after)``
   (``E_CONFIRM``);
10. persist the receipt ``accepted`` with ``acceptedDigest`` and ``acceptedAt``;
11. delete the journal.

``recover`` finishes an interrupted publication from its journal (roll forward to the proposal's
after-state) or, when the result would not validate, rolls every file back to the before-state;
never a mix. A Git provider would implement the same ``DeliveryProvider`` protocol.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...clock import iso
from ...files import atomic_write_json, fsync_dir, read_json
from .bases import DirectoryBase
from .bundle import validate_tree
from .errors import BaselineError, ConfirmError, OkfPathError, RecoveryError
from .proposal import proposal_hash
from .tree import Tree, decode_tree, tree_digest

__all__ = ["DeliveryProvider", "DirectoryProvider", "RecoveryOutcome", "SaveReceipt", "StepHook"]

SaveReceipt = Callable[[dict[str, Any]], None]
"""Persists a receipt (called at every status step, before the step's effect)."""
StepHook = Callable[[str], None]
"""Called between publication steps; crash tests use it to kill the process mid-publication."""


@dataclass(frozen=True)
class RecoveryOutcome:
    """What ``recover`` did with a journal: ``completed``, ``rolled-back`` or ``discarded``."""

    alias: str
    status: str
    run: str | None
    proposal_file: str | None
    digest: str


class DeliveryProvider(Protocol):
    """Delivers a proposal to one accepted base (directory here; Git would be another)."""

    alias: str

    def snapshot(self) -> tuple[Tree, str]:
        """The accepted tree and its digest, read consistently (the staging baseline)."""
        ...

    def publish(self, proposal_file: Path, proposal: Mapping[str, Any], receipt: dict[str, Any],
                save: SaveReceipt, *, at: float) -> dict[str, Any]:
        """Deliver ``proposal``; persists every receipt step through ``save``; returns the receipt."""
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

    # -- file operations ---------------------------------------------------------------------

    def _replace(self, rel: str, data: bytes | None) -> None:
        target = self.base.path / rel
        parts = rel.split("/")
        folder = self.base.path
        for part in parts[:-1]:
            folder = folder / part
            if os.path.islink(folder):
                raise OkfPathError(f"{folder} is a symlink")
            if not folder.exists():
                folder.mkdir()
                fsync_dir(folder.parent)
        if os.path.islink(target):
            raise OkfPathError(f"{target} is a symlink")
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

    def _sweep_temps(self) -> None:
        if self.base.lock_dir.is_dir():
            for leftover in self.base.lock_dir.glob(".publish.*.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _remove_journal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.base.journal_path)
        fsync_dir(self.base.journal_path.parent)

    # -- publication ---------------------------------------------------------------------------

    def publish(self, proposal_file: Path, proposal: Mapping[str, Any], receipt: dict[str, Any],
                save: SaveReceipt, *, at: float) -> dict[str, Any]:
        """Deliver ``proposal`` by the journal protocol; returns the ``accepted`` receipt."""
        before, after = decode_tree(proposal["before"]), decode_tree(proposal["after"])
        changed = list(proposal["changed"])
        digest_hash = proposal_hash(proposal)
        self.base.check_plain()
        with self.base.locked():
            if self.base.journal_pending():
                raise RecoveryError(f"base {self.alias!r}: publication pending; it must recover first")
            if receipt.get("status") == "publication-intent":
                receipt["status"] = "validated"
                save(receipt)
            elif receipt.get("status") not in ("validated", "no-change"):
                raise RecoveryError(f"base {self.alias!r}: receipt is {receipt.get('status')!r} with no journal")
            current = self.base.read_unlocked()
            if tree_digest(current) != tree_digest(before):
                changed_now = sorted(p for p in set(current) | set(before) if current.get(p) != before.get(p))
                raise BaselineError(f"base {self.alias!r} changed since the judgment was staged "
                                    f"({', '.join(changed_now[:5])}); nothing was written, rejudge it")
            receipt.update(status="publication-intent", proposal=str(proposal_file), proposalHash=digest_hash)
            save(receipt)
            self._step("intent")
            atomic_write_json(self.base.journal_path, {"version": 1, "run": proposal["run"], "proposalHash": digest_hash,
                                                       "proposalFile": str(proposal_file), "status": "publishing"})
            self._step("journal")
            for path in changed:
                if current.get(path) not in (before.get(path), after.get(path)):
                    raise RecoveryError(f"base {self.alias!r}: {path} holds neither its before nor its after bytes")
            receipt["status"] = "publishing"
            save(receipt)
            self._step("publishing")
            for number, path in enumerate(changed, start=1):
                self._replace(path, after.get(path))
                self._step(f"replaced:{number}")
            final = self.base.read_unlocked()
            findings = validate_tree(final, strict=True)
            if findings or tree_digest(final) != tree_digest(after):
                raise ConfirmError(f"base {self.alias!r}: published files do not equal the proposal "
                                   f"({'; '.join(map(str, findings[:3])) or 'digest differs'}); the journal stays for recovery")
            receipt.update(status="accepted", acceptedDigest=tree_digest(final), acceptedAt=iso(at))
            receipt.pop("error", None)
            save(receipt)
            self._step("accepted")
            self._remove_journal()
        return receipt

    def recover(self, complete: Callable[[RecoveryOutcome], None], *, at: float) -> RecoveryOutcome | None:
        """Finish or roll back an interrupted publication; ``complete`` persists the receipts first."""
        if not self.base.journal_pending():
            return None
        with self.base.locked():
            if not self.base.journal_pending():
                return None
            self._sweep_temps()
            try:
                journal = read_json(self.base.journal_path)
                if not isinstance(journal, dict) or journal.get("version") != 1:
                    raise ValueError("journal shape")
            except Exception:
                outcome = RecoveryOutcome(self.alias, "discarded", None, None, tree_digest(self.base.read_unlocked()))
                complete(outcome)
                self._remove_journal()
                return outcome
            proposal_file = Path(str(journal.get("proposalFile")))
            try:
                proposal = json.loads(proposal_file.read_bytes())
            except (OSError, json.JSONDecodeError):
                raise RecoveryError(f"base {self.alias!r}: the journal names {proposal_file}, which cannot be read; "
                                    "the publication stays pending") from None
            if proposal_hash(proposal) != journal.get("proposalHash"):
                raise RecoveryError(f"base {self.alias!r}: {proposal_file} does not match the journal's hash")
            before, after = decode_tree(proposal["before"]), decode_tree(proposal["after"])
            current = self.base.read_unlocked()
            for path in proposal["changed"]:
                if current.get(path) not in (before.get(path), after.get(path)):
                    raise RecoveryError(f"base {self.alias!r}: {path} was changed outside the publication; "
                                        "recovery refuses to mix it")
            target, status = after, "completed"
            if validate_tree(after, strict=True):
                target, status = before, "rolled-back"
            for path in proposal["changed"]:
                if current.get(path) != target.get(path):
                    self._replace(path, target.get(path))
            final = self.base.read_unlocked()
            if tree_digest(final) != tree_digest(target):
                raise RecoveryError(f"base {self.alias!r}: recovery could not reach a whole state")
            outcome = RecoveryOutcome(self.alias, status, str(journal.get("run")), str(proposal_file), tree_digest(final))
            complete(outcome)
            self._remove_journal()
            return outcome
