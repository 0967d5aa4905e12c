"""An instance home: ``STATE.md``, ``log.md``, ``notes/``, the source marker and knowledge views.

The home is the working instance's rewritable memory. It holds only a pointer to its durable
source (``.okf-source.json`` = ``{version: 1, id, source}``). Knowledge views are immutable
reader snapshots: ``knowledge/`` (the first) or ``knowledge-view-<uuid>/`` (every refresh), each
with ``view.json`` and ``bases/<alias>/``; a view is built beside its target and renamed into
place, and an existing target is never overwritten (``ViewError``).
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...clock import iso
from ...files import PathError, atomic_write_json, atomic_write_text, publish_tree, read_json
from .descriptors import SoulDecl
from .errors import CaptureError, OkfPathError, ViewError
from .shapes import JsonObject, View
from .tree import Tree

if TYPE_CHECKING:
    from .bases import DirectoryBase
    from .git import GitBase

__all__ = ["InstanceHome", "Note", "NOTE_LIMIT_BYTES", "STATE_SCAFFOLD", "LOG_SCAFFOLD", "is_note_name", "publish_view"]

STATE_SCAFFOLD = "# Working state\n\n# Task\n\n# Next\n"
"""A new home's ``STATE.md``."""
LOG_SCAFFOLD = "# Instance log\n"
"""A new home's ``log.md``."""
NOTE_LIMIT_BYTES = 1024 * 1024
"""A note over this many bytes is skipped (like a record turn, it is never truncated)."""


def is_note_name(name: str) -> bool:
    """True for a Markdown note; editor swap, backup and temp files are not notes."""
    base = os.path.basename(name)
    return (base.endswith(".md") and not base.startswith((".", "#", "~"))
            and not base.endswith(("~", ".swp", ".tmp")))


@dataclass(frozen=True)
class Note:
    """One note: its name relative to ``notes/`` and its text."""

    name: str
    text: str


class InstanceHome:
    """One instance home folder."""

    def __init__(self, path: Path) -> None:
        self.path = Path(os.path.abspath(path))
        self.notes_dir = self.path / "notes"
        self.marker_path = self.path / ".okf-source.json"

    def scaffold(self) -> None:
        """Create ``STATE.md``, ``log.md`` and ``notes/`` where missing (existing files are kept)."""
        self.notes_dir.mkdir(parents=True, exist_ok=True)
        if not (self.path / "STATE.md").exists():
            atomic_write_text(self.path / "STATE.md", STATE_SCAFFOLD)
        if not (self.path / "log.md").exists():
            atomic_write_text(self.path / "log.md", LOG_SCAFFOLD)

    def write_marker(self, source_id: str, source_file: Path) -> None:
        """Point the home at its durable source."""
        atomic_write_json(self.marker_path, {"version": 1, "id": source_id, "source": str(source_file)})

    def marker(self) -> JsonObject | None:
        """The source pointer, or None when the home has none (or it is unreadable)."""
        try:
            info = os.lstat(self.marker_path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise OkfPathError(f"{self.marker_path} is not a regular file")
        try:
            value = read_json(self.marker_path)
        except Exception:
            return None
        return value if isinstance(value, dict) else None

    def notes(self) -> list[Note]:
        """Every readable note under ``notes/`` (see ``scan_notes``; skipped ones left out)."""
        return self.scan_notes()[0]

    def scan_notes(self) -> tuple[list[Note], list[tuple[str, str]]]:
        """``(notes, skipped)``: every note under ``notes/`` (nested allowed) sorted by name, and
        ``(name, reason)`` for each note that is refused.

        A note is refused, never repaired, and the others are still read: a symlink, a hard link,
        a special file, a note that cannot be read, is over ``NOTE_LIMIT_BYTES``, is not UTF-8 or
        holds NUL. It stays in the home untouched and is read again at the next capture. A
        ``notes/`` that is itself a link or not a folder raises ``CaptureError``.
        """
        if not os.path.lexists(self.notes_dir):
            return [], []
        if os.path.islink(self.notes_dir) or not self.notes_dir.is_dir():
            raise CaptureError(f"{self.notes_dir} is not a plain folder")
        found: list[Note] = []
        skipped: list[tuple[str, str]] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                with os.scandir(self.notes_dir / rel if rel else self.notes_dir) as listing:
                    entries = list(listing)
            except OSError as exc:
                skipped.append((rel or ".", f"the folder cannot be read ({exc.strerror or exc})"))
                continue
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    skipped.append((name, f"cannot be read ({exc.strerror or exc})"))
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if not entry.name.startswith("."):
                        stack.append(name)
                    continue
                if not is_note_name(entry.name):
                    continue
                text, reason = self._read_note(name, st)
                if reason is not None:
                    skipped.append((name, reason))
                elif text is not None:
                    found.append(Note(name, text))
        return sorted(found, key=lambda n: n.name), sorted(skipped)

    def _read_note(self, name: str, st: os.stat_result) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, why the note is refused)``."""
        if stat.S_ISLNK(st.st_mode):
            return None, "is a symlink; notes must be plain files"
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        if st.st_nlink > 1:
            return None, "is hard-linked; notes must be plain files"
        try:
            fd = os.open(self.notes_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    raw = handle.read(NOTE_LIMIT_BYTES + 1)
            finally:
                os.close(fd)
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or exc})"
        if len(raw) > NOTE_LIMIT_BYTES:
            return None, f"is over the {NOTE_LIMIT_BYTES // (1024 * 1024)} MiB note limit; nothing is truncated"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"is not UTF-8 (byte {exc.start}); save it as UTF-8"
        if "\x00" in text:
            return None, f"holds a NUL character (position {text.index(chr(0))})"
        return text, None

    def new_view_dir(self) -> Path:
        """Where the next view goes: ``knowledge/`` first, then ``knowledge-view-<uuid>/``."""
        first = self.path / "knowledge"
        return first if not os.path.lexists(first) else self.path / f"knowledge-view-{uuid.uuid4()}"


def publish_view(target: Path, snapshots: dict[str, tuple[DirectoryBase | GitBase, Tree, str]], decl: SoulDecl,
                 *, at: float) -> View:
    """Write an immutable view at ``target`` from locked base snapshots; returns ``view.json``.

    ``snapshots`` maps alias -> (base, tree, digest); a base is a ``DirectoryBase`` (``head`` None) or a
    ``GitBase`` (``head`` the accepted commit the tree was read at). The view is assembled in a sibling temp
    folder and renamed into place; an existing ``target`` raises ``ViewError``.
    """
    target = Path(target)
    if os.path.lexists(target):
        raise ViewError(f"view {target} already exists; views are immutable")
    view: View = {
        "version": 1, "at": iso(at),
        "bases": {alias: {"path": f"bases/{alias}", "id": base.binding.id, "digest": digest, "head": getattr(base, "head", None),
                          "nodes": {n: {"path": d.path, "owner": d.owner} for n, d in base.descriptor().nodes.items()}}
                  for alias, (base, tree, digest) in snapshots.items()},
        "owns": list(decl.owns), "reads": list(decl.reads),
    }
    files = {f"bases/{alias}/{rel}": data for alias, (_, tree, _) in snapshots.items() for rel, data in tree.items()}
    files["view.json"] = (json.dumps(view, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        publish_tree(target, files)  # proves every name inside the view before anything is written
    except FileExistsError:
        raise ViewError(f"view {target} already exists; views are immutable") from None
    except PathError as exc:
        raise OkfPathError(f"the view cannot be published ({exc}); nothing of it was written") from None
    return view
