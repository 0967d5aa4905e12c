"""Why a workspace cannot open, in plain words: ``WorkspaceOpenError`` and ``open_error``.

``Workspace.open`` turns whatever stopped it (SQLite saying ``file is not a database`` or
``database disk image is malformed``, a permission refused, a file where a folder belongs, a JSON
file that does not parse, a store's own clear error) into one ``WorkspaceOpenError`` that names
the file, says the cause in plain words and says what to do. No SQLAlchemy text reaches a person.

A canvas on a database server (``Settings.canvas_url``) is named by its URL with the password
masked (``canvas_location``), and the server's answer is read by its SQLSTATE: the server cannot
be reached, the login was refused, the database does not exist, the role may not use it, or the
canvas there has a schema this workbench cannot use.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from .errors import ServiceError

__all__ = ["WorkspaceOpenError", "canvas_location", "open_error"]


class WorkspaceOpenError(ServiceError):
    """The workspace cannot open: ``path`` (the file or folder), ``cause`` and ``remedy`` in plain words."""

    def __init__(self, path: Path | str, cause: str, remedy: str) -> None:
        self.path: Path | str = path if _is_url(path) else Path(path)
        """The file or folder that stopped the open, or the database server's URL (password masked)."""
        self.cause = cause
        """What is wrong with it, in plain words."""
        self.remedy = remedy
        """What the person can do about it."""
        super().__init__(f"cannot open the workspace: {self.path}: {cause}. {remedy}")


def _is_url(where: Path | str) -> bool:
    return isinstance(where, str) and "://" in where


def canvas_location(canvas_url: str | None, folder: Path) -> Path | str:
    """What a failed canvas open is named by: ``canvas.db`` in ``folder``, the file of a
    ``sqlite:///`` URL, or a server's URL with its password masked."""
    if not canvas_url:
        return folder / "canvas.db"
    if "://" not in canvas_url:
        return Path(canvas_url)
    if canvas_url.startswith("sqlite:///"):
        return Path(canvas_url[len("sqlite:///"):].split("?", 1)[0])
    from .canvas.engine import display_url

    return display_url(canvas_url)


_REACH = ("Start the PostgreSQL server, or correct the host and port of the canvas URL (--canvas-url, "
          "WORKBENCH_CANVAS_URL or canvas_url in the settings file); without a canvas URL the workspace "
          "keeps its canvas in canvas.db")


def _server(error: BaseException, url: str) -> WorkspaceOpenError | None:
    """The plain explanation of a canvas server's refusal, or None when ``error`` is not one."""
    from .canvas.errors import CanvasSchemaError

    for cause in _chain(error):
        if isinstance(cause, CanvasSchemaError):
            text = str(cause)
            remedy = ("Upgrade the workbench on this machine to the version that wrote the canvas"
                      if "newer" in text else
                      "Open it once with an older workbench that can migrate it, or use another database")
            return WorkspaceOpenError(url, text.split(";")[0] + " (nothing was changed)", remedy)
    found = next((c for c in _chain(error) if type(c).__module__.startswith("psycopg")), None)
    if found is None:
        return None
    state = str(getattr(found, "sqlstate", None) or "")
    text = str(found).lower()  # libpq reports a refused connection without a SQLSTATE: its words then
    if not state:
        if re.search(r'\brole "[^"]*" does not exist|password|authentication', text):
            state = "28000"
        elif re.search(r'\bdatabase "[^"]*" does not exist', text):
            state = "3D000"
        elif "permission denied" in text:
            state = "42501"
        elif "starting up" in text or "shutting down" in text or "too many" in text:
            state = "57P03"
    if state.startswith("28"):
        return WorkspaceOpenError(url, "the canvas server refused the login (wrong user name or password, "
                                       "or the role does not exist)",
                                  "Check the user name in the URL and the password in PGPASSWORD or ~/.pgpass "
                                  "(never on the command line), or ask the server's owner for a role")
    if state == "3D000":
        return WorkspaceOpenError(url, "the database named in the URL does not exist on that server",
                                  "Create it once (createdb --owner <user> <database>), or correct the database "
                                  "name in the canvas URL")
    if state in ("42501", "3F000"):
        return WorkspaceOpenError(url, "the role may not create or use the canvas tables there (permission "
                                       "denied, or the schema in the URL does not exist)",
                                  "Grant the role the rights it needs on that database or schema, create the "
                                  "schema named in the URL, or use another database")
    if state in ("57P03", "53300"):
        return WorkspaceOpenError(url, "the canvas server is starting up, shutting down or full (too many "
                                       "connections)", "Wait a moment and open the workspace again")
    if not state:
        if "translate host name" in text or "name or service not known" in text or "nodename" in text:
            why = "the host name in the canvas URL is not known"
        elif "timeout" in text or "timed out" in text:
            why = "the canvas server did not answer in time"
        elif "refused" in text or "could not connect" in text or "connection failed" in text:
            why = "the canvas server cannot be reached (connection refused: the server is down, or nothing " \
                  "listens at that host and port)"
        else:
            why = "the connection to the canvas server failed or dropped while the workspace opened"
        return WorkspaceOpenError(url, why, _REACH)
    return WorkspaceOpenError(url, f"the canvas server refused the open (SQLSTATE {state})",
                              "Check the server's log for that SQLSTATE, then open the workspace again")


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
    return f"Move the damaged file aside (for example: mv '{path}' '{path}.damaged') and open the workspace again"


def _aside_db(path: Path) -> str:
    return _aside(path) + "; a new, empty database is made in its place"


def _sqlite(error: sqlite3.Error, path: Path) -> WorkspaceOpenError:
    text = str(error).lower()
    name = path.name
    if "not a database" in text:
        return WorkspaceOpenError(path, f"{name} is not an SQLite database (the file is damaged, or is some "
                                        "other kind of file)", _aside_db(path))
    if "malformed" in text or "corrupt" in text:
        return WorkspaceOpenError(path, f"{name} is damaged (SQLite finds its pages malformed)",
                                  _aside_db(path) + f"; 'sqlite3 {name}.damaged .recover' may save what is left")
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
    return WorkspaceOpenError(path, f"SQLite cannot use {name}: {error}", _aside_db(path))


def _file_in_the_way(path: Path) -> Path:
    """The nearest of ``path`` and its parents that exists and is not a folder (``path`` if none is)."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate
        except OSError:
            break
    return path


def _named_path(text: str, folder: Path) -> Path | None:
    """The longest path inside ``folder`` that ``text`` names, if any."""
    root = str(folder.resolve()) if folder.exists() else str(folder)
    found = [m.rstrip(".,;:)'\"") for m in re.findall(re.escape(root) + r"[^\s'\"]*", text)]
    found += [m.rstrip(".,;:)'\"") for m in re.findall(re.escape(str(folder)) + r"[^\s'\"]*", text)]
    return Path(max(found, key=len)) if found else None


def open_error(error: BaseException, path: Path | str, folder: Path) -> WorkspaceOpenError:
    """The plain explanation of ``error``, raised while the workspace at ``folder`` opened ``path``
    (a file or folder, or a canvas server's masked URL from ``canvas_location``)."""
    if isinstance(error, WorkspaceOpenError):
        return error
    if isinstance(path, str):
        if _is_url(path):
            return _server(error, path) or WorkspaceOpenError(
                path, f"the canvas server could not be used ({type(error).__name__})",
                "Check the canvas URL and the server, then open the workspace again")
        path = Path(path)
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
        if isinstance(cause, OSError):
            where = Path(cause.filename) if cause.filename else path
            return WorkspaceOpenError(where, cause.strerror or str(cause),
                                      f"Check {where} and the disk it is on, or open another --workspace folder")
    service = next((c for c in _chain(error) if isinstance(c, ServiceError)), None)
    if service is not None:  # the store's own words name the file; the path is read from them
        where = Path(getattr(service, "path", None) or _named_path(str(service), folder) or path)
        return WorkspaceOpenError(where, str(service), _aside(where) if where.is_file() else
                                  "Fix or move aside what it names, then open the workspace again")
    decode = next((c for c in _chain(error) if isinstance(c, (json.JSONDecodeError, UnicodeDecodeError))), None)
    if decode is not None:
        return WorkspaceOpenError(path, f"{path.name} is not valid JSON text ({decode})", _aside(path))
    return WorkspaceOpenError(path, f"{type(error).__name__}: {error}",
                              "Move the damaged file aside or fix it, then open the workspace again")
