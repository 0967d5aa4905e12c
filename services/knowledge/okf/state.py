"""The durable state dir: owners, frozen source descriptors, status receipts, inputs and runs.

Layout (OKF's)::

    <stateDir>/owners.json                    {ownerId: soulId}
    <stateDir>/owners.lock
    <stateDir>/sources/<uuid>/source.json     frozen descriptor
    <stateDir>/sources/<uuid>/status.json     processing receipts
    <stateDir>/sources/<uuid>/{worker,status,capture}.lock
    <stateDir>/sources/<uuid>/inputs/<sha256>.json   content-addressed evidence
    <stateDir>/sources/<uuid>/runs/<uuid>/run.json   (+ work/, <alias>-proposal.json, rejudgments/)
    <stateDir>/sources/<uuid>/views/          views made from the durable descriptor

Every write is atomic (temp, fsync, rename, folder fsync); every read-modify-write of
``status.json`` or ``run.json`` holds the source's ``status.lock``, inputs are written under the
``capture.lock``. ``sweep_temps`` removes the temp files a killed write left, folder by folder
under the lock that guards it (a source whose locks are busy is left for the next open).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from ...clock import iso
from ...files import (CorruptFileError, FileLock, PathError, atomic_write_bytes, atomic_write_json, contained_path, read_json,
                      sweep_temps)
from .descriptors import Bindings, SoulDecl
from .errors import OkfError, SourceError
from .shapes import InputPayload, Run, Source, Status, View
from .tree import canonical_json, sha256_hex

__all__ = ["StateDir", "initial_status", "is_uuid"]


def is_uuid(value: object) -> bool:
    """True for a UUID in its canonical form only (``uuid.UUID`` also reads ``{...}``, ``urn:uuid:...``,
    upper case and no dashes: other names for one folder, or names some file systems cannot hold)."""
    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value
    except ValueError:
        return False


def initial_status() -> Status:
    """``status.json`` as a new source starts it."""
    return {"version": 1, "captured": {"notes": [], "threads": {}, "inputs": []}, "processed": [],
            "delivered": {}, "accepted": {}, "retired": False, "auto": True, "activeRun": None}


class StateDir:
    """One durable state dir (outside every base and home)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    # -- owners and sources ------------------------------------------------------------------

    @property
    def sources_dir(self) -> Path:
        """``<stateDir>/sources``."""
        return self.path / "sources"

    def owners(self) -> dict[str, object]:
        """``owners.json`` (empty when absent): owner id -> the soul it names."""
        try:
            return dict(read_json(self.path / "owners.json"))
        except FileNotFoundError:
            return {}

    def claim_owner(self, owner: str, soul: str) -> None:
        """Record that ``owner`` names ``soul``; refuses an owner id already naming another soul."""
        self.path.mkdir(parents=True, exist_ok=True)
        with FileLock(self.path / "owners.lock"):
            owners = self.owners()
            current = owners.get(owner)
            if current is not None and current != soul:
                raise OkfError(f"owner id {owner!r} already names soul {current!r}, not {soul!r}", code="E_OWNER")
            if current is None:
                owners[owner] = soul
                atomic_write_json(self.path / "owners.json", owners)

    def register_source(self, *, home: Path, soul: str, decl: SoulDecl, bindings: Bindings, agent: str,
                        role: str, accepted_view: View | None, at: float) -> Source:
        """Create ``sources/<uuid>/`` with a frozen ``source.json`` and an initial ``status.json``."""
        self.claim_owner(decl.owner, soul)
        source_id = str(uuid.uuid4())
        folder = self.sources_dir / source_id
        (folder / "inputs").mkdir(parents=True)
        (folder / "runs").mkdir()
        bindings_doc = {"file": str(bindings.file), **bindings.to_json()}
        role_bytes = role.encode("utf-8")
        if len(role_bytes) > 128 * 1024:
            raise SourceError(f"role text is {len(role_bytes)} bytes; the limit is 128 KiB")
        source: Source = {
            "version": 1, "id": source_id, "home": str(home), "work": str(folder / "runs"),
            "context": str(bindings.file.parent), "agent": agent, "instance": agent, "owner": decl.owner,
            "decl": decl.to_json(), "role": role, "bindings": bindings_doc,
            "bindingFingerprint": "sha256-" + sha256_hex(canonical_json(bindings.to_json())),
            "execution": {"runtime": "crouter", "model": None}, "created": iso(at),
            "acceptedView": accepted_view, "acceptedNodes": list(decl.owns) + list(decl.reads),
        }
        atomic_write_json(folder / "status.json", initial_status())
        atomic_write_json(folder / "source.json", source)
        return source

    def source_ids(self) -> list[str]:
        """Every registered source id, sorted."""
        if not self.sources_dir.is_dir():
            return []
        return sorted(p.name for p in self.sources_dir.iterdir() if (p / "source.json").is_file())

    def source_dir(self, source_id: str) -> Path:
        """``sources/<id>``; refuses an id that is not a registered source."""
        if not is_uuid(source_id):
            raise SourceError(f"{source_id!r} is not a source id"[:200])
        folder = self.sources_dir / source_id
        if not (folder / "source.json").is_file():
            raise SourceError(f"no source {source_id}")
        return folder

    def source(self, source_id: str) -> Source:
        """The frozen ``source.json``."""
        return cast(Source, dict(read_json(self.source_dir(source_id) / "source.json")))

    # -- locks and status --------------------------------------------------------------------

    def status_lock(self, source_id: str) -> FileLock:
        """The lock around every read-modify-write of ``status.json`` and the source's runs."""
        return FileLock(self.source_dir(source_id) / "status.lock")

    def worker_lock(self, source_id: str) -> FileLock:
        """The lock a judge run holds while staging and judging."""
        return FileLock(self.source_dir(source_id) / "worker.lock")

    def capture_lock(self, source_id: str) -> FileLock:
        """The lock a capture holds."""
        return FileLock(self.source_dir(source_id) / "capture.lock")

    def status(self, source_id: str) -> Status:
        """``status.json``."""
        return cast(Status, dict(read_json(self.source_dir(source_id) / "status.json")))

    def update_status(self, source_id: str, change: Callable[[Status], None]) -> Status:
        """Apply ``change`` to ``status.json`` under the status lock and write it atomically."""
        with self.status_lock(source_id):
            status = self.status(source_id)
            change(status)
            atomic_write_json(self.source_dir(source_id) / "status.json", status)
            return status

    # -- inputs ------------------------------------------------------------------------------

    def write_input(self, source_id: str, payload: InputPayload) -> str:
        """Store ``payload`` as ``inputs/<sha256>.json`` (the id is the sha256 of its JSON); returns the id."""
        data = canonical_json(payload)
        input_id = sha256_hex(data)
        try:
            target = contained_path(self.source_dir(source_id), f"inputs/{input_id}.json")
        except PathError as exc:
            raise OkfError(f"input {input_id} is not written: {exc}", code="E_INPUT") from None
        if not target.exists():
            atomic_write_bytes(target, data + b"\n")
        return input_id

    def read_input(self, source_id: str, input_id: str) -> InputPayload:
        """One input payload; its content must still hash to its id."""
        if len(input_id) != 64 or any(c not in "0123456789abcdef" for c in input_id):
            raise OkfError(f"{input_id!r} is not an input id", code="E_INPUT")
        path = self.source_dir(source_id) / "inputs" / f"{input_id}.json"
        try:
            payload = read_json(path)
        except FileNotFoundError:
            raise OkfError(f"input {input_id} is missing from {path.parent}", code="E_INPUT") from None
        except CorruptFileError as exc:  # not JSON, not a regular file, too large or too deep
            raise OkfError(f"input {exc}", code="E_INPUT") from None
        if sha256_hex(canonical_json(payload)) != input_id:
            raise OkfError(f"input {path} does not match its hash", code="E_INPUT")
        return cast(InputPayload, dict(payload))

    # -- runs --------------------------------------------------------------------------------

    def runs_dir(self, source_id: str) -> Path:
        """``sources/<id>/runs``."""
        return self.source_dir(source_id) / "runs"

    def run_dir(self, source_id: str, run_id: str) -> Path:
        """``runs/<run>``; refuses a malformed or unknown run id."""
        if not is_uuid(run_id):
            raise OkfError(f"{run_id!r} is not a run id"[:200], code="E_RUN")
        folder = self.runs_dir(source_id) / run_id
        if not (folder / "run.json").is_file():
            raise OkfError(f"no run {run_id} in source {source_id}", code="E_RUN")
        return folder

    def run_ids(self, source_id: str) -> list[str]:
        """Every run of a source."""
        folder = self.runs_dir(source_id)
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if (p / "run.json").is_file())

    def load_run(self, source_id: str, run_id: str) -> Run:
        """``run.json``."""
        path = self.run_dir(source_id, run_id) / "run.json"
        try:
            run = cast(Run, dict(read_json(path)))
        except CorruptFileError as exc:
            raise OkfError(str(exc), code="E_RUN") from None
        except (TypeError, ValueError):
            raise OkfError(f"{path}: not a run record (not a JSON object)", code="E_RUN") from None
        if run.get("id") != run_id:  # it is saved back under its own id
            raise OkfError(f"{path} names run {str(run.get('id'))[:80]!r}, not {run_id}", code="E_RUN")
        return run

    def save_run(self, source_id: str, run: Run) -> None:
        """Write ``run.json`` atomically (create the run folder on first save); the run's own id names
        the folder, so it must be a run id (a ``run.json`` edited to name another place is refused)."""
        if not is_uuid(run.get("id")):
            raise OkfError(f"run id {str(run.get('id'))[:80]!r} is not a run id; run.json is not written", code="E_RUN")
        try:  # no link on the way: a run folder that became a link is never written through
            folder = contained_path(self.runs_dir(source_id), run["id"])
        except PathError as exc:
            raise OkfError(f"run {run['id']} is not written: {exc}", code="E_RUN") from None
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "run.json", run)

    @contextmanager
    def editing_run(self, source_id: str, run_id: str) -> Iterator[Run]:
        """Hold the status lock, yield ``run.json`` for editing, write it back when the block ends."""
        with self.status_lock(source_id):
            run = self.load_run(source_id, run_id)
            yield run
            self.save_run(source_id, run)

    def sweep_temps(self) -> list[str]:
        """Remove the ``.<name>.*.tmp`` files killed writes left; the names removed."""
        removed: list[str] = []
        owners = FileLock(self.path / "owners.lock")
        if self.path.is_dir() and owners.try_acquire():
            try:
                removed += sweep_temps(self.path, ["owners.json"])
            finally:
                owners.release()
        for source_id in self.source_ids():
            capture, status = self.capture_lock(source_id), self.status_lock(source_id)
            if not capture.try_acquire():
                continue
            try:
                if not status.try_acquire():
                    continue
                try:
                    removed += self._sweep_source(self.sources_dir / source_id)
                finally:
                    status.release()
            finally:
                capture.release()
        return removed

    @staticmethod
    def _sweep_source(folder: Path) -> list[str]:
        removed = sweep_temps(folder) + sweep_temps(folder / "inputs")
        runs = folder / "runs"
        for run in (runs.iterdir() if runs.is_dir() else ()):
            folders = [run, run / "work"]
            attempts = run / "rejudgments"
            if attempts.is_dir():
                folders += [a for a in attempts.iterdir()] + [a / "work" for a in attempts.iterdir()]
            for each in folders:
                removed += sweep_temps(each)
        return removed

    def find_run(self, run_id: str) -> str:
        """The source id owning ``run_id``."""
        if not is_uuid(run_id):
            raise OkfError(f"{run_id!r} is not a judgment id"[:200], code="E_RUN")
        for source_id in self.source_ids():
            if (self.runs_dir(source_id) / run_id / "run.json").is_file():
                return source_id
        raise OkfError(f"no judgment {run_id}", code="E_RUN")
