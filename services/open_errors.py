"""Why a workspace cannot open, in plain words: ``WorkspaceOpenError`` and ``open_error``.

``Workspace.open`` turns whatever stopped it (SQLite saying ``file is not a database`` or
``database disk image is malformed``, a permission refused, a file where a folder belongs, a JSON
file that does not parse, a store's own clear error) into one ``WorkspaceOpenError`` that names
the file, says the cause in plain words and says what to do. No SQLAlchemy text reaches a person.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from .errors import ServiceError

__all__ = ["WorkspaceOpenError", "open_error"]


class WorkspaceOpenError(ServiceError):
    """The workspace cannot open: ``path`` (the file or folder), ``cause`` and ``remedy`` in plain words."""

    def __init__(self, path: Path | str, cause: str, remedy: str) -> None:
        self.path = Path(path)
        """The file or folder that stopped the open."""
        self.cause = cause
        """What is wrong with it, in plain words."""
        self.remedy = remedy
        """What the person can do about it."""
        super().__init__(f"cannot open the workspace: {self.path}: {cause}. {remedy}")


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error behind it (SQLAlchemy's ``orig``, ``__cause__``, ``__context__``)."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for behind in (getattr(current, "orig", None), current.__cause__, current.__context__):
            if isinstance(behind, BaseException):
                todo.append(behind)


def _aside(path: Path) -> str:
    return (f"Move the damaged file aside (for example: mv '{path}' '{path}.damaged') and open the workspace "
            "again; a new, empty one is made in its place and nothing else in the folder is touched")


def _sqlite(error: sqlite3.Error, path: Path) -> WorkspaceOpenError:
    text = str(error).lower()
    name = path.name
    if "not a database" in text:
        return WorkspaceOpenError(path, f"{name} is not an SQLite database (the file is damaged, or is some "
                                        "other kind of file)", _aside(path))
    if "malformed" in text or "corrupt" in text:
        return WorkspaceOpenError(path, f"{name} is damaged (SQLite finds its pages malformed)",
                                  _aside(path) + f"; 'sqlite3 {name}.damaged .recover' may save what is left")
    if "unable to open" in text or "is a directory" in text:
        return WorkspaceOpenError(path, f"{name} cannot be opened as a database file (it is a folder, or its "
                                        "folder cannot be written)",
                                  f"Check that {path} is a file you may read and write, or move it aside")
    if "readonly" in text or "read-only" in text or "permission" in text:
        return WorkspaceOpenError(path, f"{name} cannot be written (read-only)",
                                  f"Check the permissions of {path} and its folder")
    if "locked" in text or "busy" in text:
        return WorkspaceOpenError(path, f"{name} is held by another program",
                                  "Close the other workbench using this workspace, or open another --workspace")
    return WorkspaceOpenError(path, f"SQLite cannot use {name}: {error}", _aside(path))


def _file_in_the_way(path: Path) -> Path:
    """The nearest of ``path`` and its parents that exists and is not a folder (``path`` if none is)."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate
        except OSError:
            break
    return path


def open_error(error: BaseException, path: Path, folder: Path) -> WorkspaceOpenError:
    """The plain explanation of ``error``, raised while the workspace at ``folder`` opened ``path``."""
    if isinstance(error, WorkspaceOpenError):
        return error
    for cause in _chain(error):
        if isinstance(cause, sqlite3.Error):
            return _sqlite(cause, path)
        if isinstance(cause, PermissionError):
            where = Path(cause.filename) if cause.filename else path
            return WorkspaceOpenError(where, "permission denied (the workbench may not read or write it)",
                                      f"Check the permissions of {where}, or open another --workspace folder")
        if isinstance(cause, (FileExistsError, NotADirectoryError)):
            where = _file_in_the_way(Path(cause.filename) if cause.filename else folder)
            return WorkspaceOpenError(where, f"{where.name} is a file where a folder belongs",
                                      "Move the file aside, or open another --workspace folder")
        if isinstance(cause, IsADirectoryError):
            where = Path(cause.filename) if cause.filename else path
            return WorkspaceOpenError(where, f"{where.name} is a folder where a file belongs",
                                      "Move the folder aside, or open another --workspace folder")
        if isinstance(cause, (json.JSONDecodeError, UnicodeDecodeError)):
            return WorkspaceOpenError(path, f"{path.name} is not valid JSON text ({cause})", _aside(path))
        if isinstance(cause, OSError):
            where = Path(cause.filename) if cause.filename else path
            return WorkspaceOpenError(where, cause.strerror or str(cause),
                                      f"Check {where} and the disk it is on, or open another --workspace folder")
    if isinstance(error, ServiceError):
        where = Path(getattr(error, "path", None) or path)
        return WorkspaceOpenError(where, str(error), "Move the damaged file aside or fix it, then open the "
                                                     "workspace again")
    return WorkspaceOpenError(path, f"{type(error).__name__}: {error}",
                              "Move the damaged file aside or fix it, then open the workspace again")
