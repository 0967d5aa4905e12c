"""What in OKF needs the operator, and the housekeeping every open does.

- ``OkfNotice``s: a base that is blocked (its binding cannot be used, its folder is broken, or a
  publication journal cannot recover), a capture that failed, a note that was refused. Each says
  what is wrong and the way out; ``Harvest.notices()`` hands them to the judgments pane.
- ``sweep_leftovers``: the temp files a killed process left (the bindings file's, the state
  dir's, each home's, each base's journal and publication temps, half-built base folders), each
  removed under the lock that guards writes there where one does, so a live writer's file is
  never taken (a home is written only while it is being registered).
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from ...errors import ServiceError
from ...files import FileLock, sweep_temps
from .bases import DirectoryBase
from .delivery import DirectoryProvider, describe
from .errors import OkfError
from .models import OkfNotice
from .runs import RunBook
from .shapes import LastCapture
from .state import StateDir

__all__ = ["base_blocked", "binding_unusable", "capture_notices", "check_bases", "sweep_leftovers", "BINDINGS_LOCK"]

BINDINGS_LOCK = "okf-bindings.lock"
"""The lock beside the bindings file, held while it is rewritten or a base is created."""
_STAGING_RE = re.compile(r"^\..+\.[0-9a-f]{32}\.staging$")


def binding_unusable(alias: str, path: Path, bindings_file: Path, reason: str) -> OkfNotice:
    """The notice for a base whose binding or folder cannot be used."""
    return OkfNotice("base-blocked", alias, reason,
                     f"restore {path} as a plain folder holding okf-base.json (not reached through a symlink, "
                     f"outside any Git working tree), or remove base {alias!r} from {bindings_file}; then reopen "
                     "the workspace. Judgments into other bases go on meanwhile.")


def base_blocked(alias: str, exc: BaseException) -> OkfNotice:
    """The notice for a base whose pending publication could not recover (``exc`` says why)."""
    remedy = getattr(exc, "remedy", None) or ("fix what the reason names, then reopen the workspace; the pending "
                                              "publication then completes or rolls back")
    return OkfNotice("base-blocked", alias, f"a publication is pending and cannot recover: {describe(exc)}",
                     f"{remedy}. Until then no judgment is delivered to it and no fresh view reads it; "
                     "judgments into other bases go on.")


def check_bases(runs: RunBook) -> dict[str, OkfNotice]:
    """A notice for each usable-looking base whose folder or descriptor is broken now."""
    found = {}
    for alias in runs.directory_aliases():
        if alias in runs.unusable:
            continue
        binding = runs.bindings.directory(alias)
        try:
            DirectoryBase(binding).descriptor()
        except (ServiceError, OSError) as exc:
            found[alias] = binding_unusable(alias, binding.path, runs.bindings.file, describe(exc))
    return found


def capture_notices(state: StateDir) -> list[OkfNotice]:
    """The last failed capture and every skipped note, per source."""
    found: list[OkfNotice] = []
    for source_id in state.source_ids():
        try:
            agent = str(state.source(source_id).get("agent", source_id))
            status = state.status(source_id)
        except (ServiceError, OSError) as exc:
            found.append(OkfNotice("capture-failed", source_id, f"the source's files cannot be read ({describe(exc)})",
                                   f"restore {state.source_dir(source_id)} from a backup; its captures wait meanwhile"))
            continue
        last: LastCapture = status.get("lastCapture") or {}
        if last.get("status") == "failed":
            found.append(OkfNotice("capture-failed", agent, str(last.get("error", "")),
                                   "nothing of that capture was recorded; fix what the reason names, and the next "
                                   "capture (a note changing, a run settling) tries again"))
        for skip in status.get("skippedNotes") or []:
            name = str(skip.get("name", "?")) if isinstance(skip, dict) else str(skip)
            reason = str(skip.get("reason", "")) if isinstance(skip, dict) else ""
            found.append(OkfNotice("note-skipped", f"{agent}: notes/{name}", f"notes/{name} {reason}",
                                   f"save notes/{name} as a plain UTF-8 file under 1 MiB (or move it out of notes/); "
                                   "it is captured at its next change, the other notes already were"))
    return found


def _sweep_staging(folder: Path, names: Iterable[str] | None = None) -> list[str]:
    """Remove half-built ``.<name>.<hex>.staging`` folders (of the given target names only, if given)."""
    wanted = None if names is None else {f".{name}." for name in names}
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if not _STAGING_RE.match(entry.name) or (wanted is not None and entry.name[:-41] + "." not in wanted):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
    return removed


def sweep_leftovers(root: Path, runs: RunBook) -> list[str]:
    """Remove what killed writers left in the knowledge root, the state dir and beside each base."""
    removed: list[str] = []
    lock = FileLock(root / BINDINGS_LOCK)
    if lock.try_acquire():
        try:
            removed += sweep_temps(root, [runs.bindings.file.name])
            removed += _sweep_staging(root / "bases")
            for alias in runs.directory_aliases():
                path = runs.bindings.directory(alias).path
                if path.parent != root / "bases":
                    removed += _sweep_staging(path.parent, [path.name])
        finally:
            lock.release()
    with contextlib.suppress(ServiceError, OSError):
        removed += runs.state.sweep_temps()
    for source_id in runs.state.source_ids():  # a home is written only while it is registered
        with contextlib.suppress(ServiceError, OSError, KeyError, TypeError):
            home = Path(runs.state.source(source_id)["home"])
            removed += sweep_temps(home, ["STATE.md", "log.md", ".okf-source.json"])
    for alias in runs.directory_aliases():
        if alias in runs.unusable:
            continue
        with contextlib.suppress(OkfError, ServiceError, OSError):
            provider = runs.provider(alias)
            if isinstance(provider, DirectoryProvider):  # a directory alias always has one
                removed += provider.sweep()
    return removed
